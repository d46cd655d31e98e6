"""Tests of data_prep/build_vocab.py on small corpora written here."""

import itertools
import os

import pytest
from absl import flags

from bert_tf.text import tokenization
from bert_tf.text.vocab import load_vocab
from data_prep import build_vocab
from flag_contract import check_every_flag_reaches_options

WORDS = ["the", "The", "running", "runner", "runs", "unwanted", "wanted", "want", "café",
         "Café", "naïve", "Zürich", "tokenizer", "tokenization", "token", "中国", "人",
         "hello", "world", "Hello", "!", ",", "."]


def _corpus_lines():
    """Deterministic sentences over WORDS, blank lines between documents."""
    lines = []
    for i, combo in enumerate(itertools.permutations(WORDS[:12], 4)):
        if i >= 1500:
            break
        lines.append(" ".join(combo) + " " + WORDS[12 + i % (len(WORDS) - 12)])
        if i % 50 == 49:
            lines.append("")
    return lines


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(_corpus_lines()) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("lower", [True, False])
def test_build_vocab_text_corpus(corpus, tmp_path, lower):
    output = tmp_path / "out" / "vocab.txt"
    summary = build_vocab.build_vocab(build_vocab.BuildVocabOptions(
        input_file=str(corpus), output_file=str(output), vocab_size=300,
        do_lower_case=lower, num_unused=7, lower_thresh=2))
    lines = output.read_text(encoding="utf-8").split("\n")
    assert lines[-1] == "" and len(lines) - 1 == 300 == summary["vocab_size"]
    vocab = lines[:-1]
    assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert vocab[5:12] == [f"[unused{i}]" for i in range(7)]
    assert len(set(vocab)) == 300
    assert not os.path.exists(str(output) + ".tmp")
    learned = [t for t in vocab[12:] if not t.startswith("[unused")]
    assert summary["learned_tokens"] == len(learned) > 50
    # Frequent words are whole tokens; every character and its ## form is there.
    assert "running" in vocab and "##ä" not in vocab and "中" in vocab
    if lower:
        assert "cafe" in vocab and not any(c.isupper() for t in learned for c in t)
        assert "naive" in vocab and "zurich" in vocab
    else:
        assert "Café" in vocab and "The" in vocab and "Z" in vocab
    tokenizer = tokenization.FullTokenizer(str(output), do_lower_case=lower)
    for line in _corpus_lines()[:200]:
        assert "[UNK]" not in tokenizer.tokenize(line)


def test_build_vocab_cli_and_errors(corpus, tmp_path):
    flag_values = flags.FlagValues()
    build_vocab.define_flags(flag_values)
    output = tmp_path / "vocab.txt"
    flag_values([
        "bert-build-vocab", f"--input_file={corpus}", f"--output_file={output}",
        "--vocab_size=200", "--num_unused=3", "--lower_thresh=2", "--nodo_lower_case"])
    summary = build_vocab.run(flag_values)
    assert summary["vocab_size"] == 200
    assert len(load_vocab(str(output))) == 200
    flag_values.input_file = str(tmp_path / "missing*.txt")
    with pytest.raises(Exception, match="missing"):
        build_vocab.run(flag_values)
    flag_values.input_file = str(corpus)
    flag_values.vocab_size = 8
    with pytest.raises(Exception, match="vocab_size=8"):
        build_vocab.run(flag_values)


def test_build_vocab_wikiextractor_input(tmp_path):
    path = tmp_path / "wiki_00"
    body = "\n".join(" ".join(c) + "." for c in itertools.permutations(WORDS[:8], 3))
    path.write_text(f'<doc id="1" url="x" title="T">\nT\n\n{body}\n</doc>\n', encoding="utf-8")
    output = tmp_path / "vocab.txt"
    summary = build_vocab.build_vocab(build_vocab.BuildVocabOptions(
        input_file=str(path), output_file=str(output), vocab_size=120, num_unused=2,
        input_format="wikiextractor", lower_thresh=2))
    vocab = load_vocab(str(output))
    assert summary["vocab_size"] == len(vocab) == 120 and "running" in vocab


def test_output_that_is_a_directory_is_refused_before_reading(tmp_path):
    (tmp_path / "vocab_dir").mkdir()
    with pytest.raises(ValueError, match="is an existing directory"):
        build_vocab.build_vocab(build_vocab.BuildVocabOptions(
            input_file=str(tmp_path / "missing_corpus.txt"),
            output_file=str(tmp_path / "vocab_dir"), vocab_size=300))
    assert sorted(os.listdir(tmp_path)) == ["vocab_dir"]  # nothing read, nothing written


def test_every_flag_reaches_the_options():
    assert check_every_flag_reaches_options(build_vocab.BuildVocabOptions) == 12


def _refuse_reading(monkeypatch):
    """Makes any read of the corpus fail the test: checks must come before it."""
    def read(*args, **kwargs):
        raise AssertionError("the corpus was read before the options were checked")
    monkeypatch.setattr(build_vocab.wikipedia, "iter_documents", read)
    monkeypatch.setattr(build_vocab, "count_words", read)


@pytest.mark.parametrize("vocab_size, num_unused, minimum", [
    (10, 100, 205), (8, 0, 105), (204, 100, 205)])
def test_too_small_vocab_size_is_refused_before_reading(corpus, tmp_path, monkeypatch,
                                                        vocab_size, num_unused, minimum):
    """issue 26: --vocab_size=10 was refused only after the corpus had been counted."""
    _refuse_reading(monkeypatch)
    with pytest.raises(ValueError, match=rf"--vocab_size={vocab_size}: expected at least "
                                         rf"{minimum} \(5 special tokens \+ "
                                         rf"--num_unused={num_unused}"):
        build_vocab.build_vocab(build_vocab.BuildVocabOptions(
            input_file=str(corpus), output_file=str(tmp_path / "vocab.txt"),
            vocab_size=vocab_size, num_unused=num_unused))
    assert not (tmp_path / "vocab.txt").exists()


def test_smallest_accepted_vocab_size_builds(corpus, tmp_path):
    build_vocab.build_vocab(build_vocab.BuildVocabOptions(
        input_file=str(corpus), output_file=str(tmp_path / "vocab.txt"),
        vocab_size=5 + 3 + build_vocab.MIN_LEARNED_TOKENS, num_unused=3, lower_thresh=2))
    assert len(load_vocab(str(tmp_path / "vocab.txt"))) == 108


@pytest.mark.parametrize("field, value, message", [
    ("num_unused", -1, "--num_unused=-1: expected >= 0"),
    ("max_unique_chars", 0, "--max_unique_chars=0: expected >= 1"),
    ("max_sentences", -1, "--max_sentences=-1: expected >= 0"),
    ("language", "xx", "language must be one of am, ar, .*, zh, got 'xx'"),
    ("input_format", "csv", "input_format must be one of auto, text"),
])
def test_bad_options_are_refused_before_reading(corpus, tmp_path, monkeypatch, field, value,
                                                message):
    _refuse_reading(monkeypatch)
    options = dict(input_file=str(corpus), output_file=str(tmp_path / "vocab.txt"),
                   vocab_size=300)
    options[field] = value
    with pytest.raises(ValueError, match=message):
        build_vocab.build_vocab(build_vocab.BuildVocabOptions(**options))


def test_unknown_language_flag_is_refused_listing_the_codes():
    """issue 26: --language=xx was accepted (and split as English)."""
    flag_values = flags.FlagValues()
    build_vocab.define_flags(flag_values)
    with pytest.raises(flags.IllegalFlagValueError, match=r"--language=xx: .*<am\|ar\|.*\|zh>"):
        flag_values(["bert-build-vocab", "--language=xx"])
    flag_values(["bert-build-vocab", "--language=de"])
    assert flag_values.language == "de"
