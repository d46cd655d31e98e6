"""Tests of bert-extend-vocab (data_prep/extend_vocab.py, extend_vocab_run.py,
vocab_extension.py) on a tiny released model folder and corpora written here, and on
../shared/data."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from absl import flags

from bert_tf.models import BertPretrainer
from bert_tf.text import tokenization
from bert_tf.text.rules import BasicTokenizer, WordpieceTokenizer
from bert_tf.weights import checkpoints
from data_prep import extend_vocab, extend_vocab_run
from data_prep import vocab_extension
from flag_contract import check_every_flag_reaches_options
from harness import (SPECIAL_TOKENS, tiny_config, tiny_model, write_released_checkpoint,
                     write_vocab)

LETTERS = "abcdefghijklmnopqrstuvwxyz"
WORDS = ["the", "cat", "sat", "on", "mat", "he", "##mo", "##glo", "##bin", "kin", "##ase",
         "lip", "##id", ".", ","]
NUM_UNUSED = 99 - len(SPECIAL_TOKENS) - len(WORDS) - 2 * len(LETTERS)  # 27 slots
# The vocab of the tiny model (99 lines): [unused0] ... right after the special tokens.
VOCAB = (SPECIAL_TOKENS + [f"[unused{i}]" for i in range(NUM_UNUSED)] + WORDS
         + list(LETTERS) + [f"##{c}" for c in LETTERS])
# hemoglobin: 4 pieces x 6 = score 18; kinase: 2 pieces x 7 = 7; lipid: 2 x 3 = 3;
# kinases (kin ##ase ##s): 3 pieces, seen once: below --min_frequency=2.
CORPUS = (["the cat sat on the mat ."] * 3
          + ["hemoglobin , hemoglobin ."] * 3
          + ["kinase kinase kinase , kinase .", "the kinase kinase kinase sat ."]
          + ["lipid , lipid lipid .", "kinases ."])
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("BERT_TF_SHARED_DATA", os.path.join(REPO_ROOT, "..", "shared", "data"))


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("released") / "model"
    write_released_checkpoint(str(folder), tiny_model(BertPretrainer, tiny_config(), 7), VOCAB)
    return str(folder)


def write_corpus(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture
def corpus(tmp_path):
    return write_corpus(tmp_path / "corpus.txt", CORPUS)


def run(model_folder, corpus, output_dir, **overrides):
    values = dict(input_file=corpus, init_checkpoint=model_folder, output_dir=str(output_dir),
                  min_frequency=2)
    values.update(overrides)
    return extend_vocab_run.extend_vocab(extend_vocab.ExtendVocabOptions(**values))


def linked_folder(model_folder, folder, without):
    """A copy of `model_folder` (links to its files) without the file `without`."""
    folder.mkdir()
    for name in os.listdir(model_folder):
        if name != without:
            os.symlink(os.path.join(model_folder, name), folder / name)
    return folder


def tensors(folder):
    reader = tf.train.load_checkpoint(os.path.join(folder, "bert_model.ckpt"))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def piece_mean(table, word):
    """The mean of the rows of the pieces the original vocab gives `word`."""
    vocab = {token: index for index, token in enumerate(VOCAB)}
    pieces = WordpieceTokenizer(vocab).tokenize(word)
    return np.mean([table[vocab[piece]] for piece in pieces], axis=0)


def test_append_grows_vocab_config_and_rows(model_folder, corpus, tmp_path):
    output = tmp_path / "extended"
    summary = run(model_folder, corpus, output, mode="append", max_new_tokens=2)
    vocab = (output / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert vocab[:99] == VOCAB and vocab[99:] == ["hemoglobin", "kinase"]
    config = json.loads((output / "bert_config.json").read_text())
    assert config["vocab_size"] == 101 == summary["vocab_size_after"]
    old, new = tensors(model_folder), tensors(str(output))
    assert sorted(old) == sorted(new)
    for name in ("bert/embeddings/word_embeddings", "cls/predictions/output_bias"):
        assert new[name].shape[0] == 101 and new[name].dtype == old[name].dtype
        np.testing.assert_array_equal(new[name][:99], old[name])
        for index, word in ((99, "hemoglobin"), (100, "kinase")):
            np.testing.assert_allclose(new[name][index], piece_mean(old[name], word),
                                       rtol=1e-6, atol=1e-7)
    for name in set(old) - {"bert/embeddings/word_embeddings", "cls/predictions/output_bias"}:
        np.testing.assert_array_equal(new[name], old[name])
    model, report = checkpoints.from_pretrained(BertPretrainer, str(output),
                                                return_report=True)
    assert not report.newly_initialized and not report.unmatched
    assert model.encoder.config.vocab_size == 101
    tokenizer = tokenization.FullTokenizer(str(output / "vocab.txt"), do_lower_case=True)
    assert tokenizer.tokenize("Hemoglobin, kinase.") == ["hemoglobin", ",", "kinase", "."]
    report_lines = (output / extend_vocab_run.REPORT_FILE).read_text().splitlines()
    assert report_lines == ["token\tid\tfrequency\told_piece_count\told_pieces\tscore",
                            "hemoglobin\t99\t6\t4\the ##mo ##glo ##bin\t18",
                            "kinase\t100\t7\t2\tkin ##ase\t7"]
    assert summary["added_tokens"] == 2 and summary["candidates"] == 3
    # hemoglobin and kinase saved their scores; kinases is now kinase ##s: one more.
    assert summary["tokens_after"] == summary["tokens_before"] - 18 - 7 - 1
    assert summary["tokens_per_sentence_after"] < summary["tokens_per_sentence_before"]
    assert not [name for name in os.listdir(tmp_path) if ".tmp-" in name]


def test_unused_mode_keeps_shapes_and_fills_unused_lines(model_folder, corpus, tmp_path):
    output = tmp_path / "unused"
    summary = run(model_folder, corpus, output, mode="unused")
    vocab = (output / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert len(vocab) == 99 and summary["vocab_size_after"] == 99
    assert vocab[5:8] == ["hemoglobin", "kinase", "lipid"]
    assert vocab[8:] == VOCAB[8:]  # the other [unusedN] slots and every other token
    assert json.loads((output / "bert_config.json").read_text())["vocab_size"] == 99
    old, new = tensors(model_folder), tensors(str(output))
    for name in ("bert/embeddings/word_embeddings", "cls/predictions/output_bias"):
        assert new[name].shape == old[name].shape
        np.testing.assert_array_equal(np.delete(new[name], [5, 6, 7], axis=0),
                                      np.delete(old[name], [5, 6, 7], axis=0))
        for index, word in ((5, "hemoglobin"), (6, "kinase"), (7, "lipid")):
            np.testing.assert_allclose(new[name][index], piece_mean(old[name], word),
                                       rtol=1e-6, atol=1e-7)
    checkpoints.from_pretrained(BertPretrainer, str(output))
    tokenizer = tokenization.FullTokenizer(str(output / "vocab.txt"), do_lower_case=True)
    assert tokenizer.convert_tokens_to_ids(tokenizer.tokenize("Lipid")) == [7]


def test_same_input_same_output(model_folder, corpus, tmp_path):
    for name in ("one", "two"):
        run(model_folder, corpus, tmp_path / name, mode="append", max_new_tokens=3)
    for file_name in ("vocab.txt", extend_vocab_run.REPORT_FILE, "bert_config.json",
                      "bert_model.ckpt.index", "bert_model.ckpt.data-00000-of-00001"):
        assert (tmp_path / "one" / file_name).read_bytes() == \
            (tmp_path / "two" / file_name).read_bytes(), file_name


def test_ties_go_to_frequency_then_the_word():
    vocab = {token: index for index, token in enumerate(VOCAB)}
    counts = {"zeta": 4, "beta": 4, "alpha": 2, "cat": 50, "he-mo": 9, "x": 3}
    ranked = vocab_extension.rank_words(counts, vocab, do_lower_case=True, min_frequency=1)
    # zeta, beta: z ##e ##t ##a (4 pieces): 3 x 4 = 12 each, the tie by the word;
    # alpha: a ##l ##p ##h ##a (5 pieces): 4 x 2 = 8. "cat" is in the vocab, "x" is one
    # piece, "he-mo" is not one word after basic tokenization.
    assert [(w.word, w.score) for w in ranked] == [("beta", 12), ("zeta", 12),
                                                   ("alpha", 8)]


def test_case_rules_of_the_words():
    basic_uncased = BasicTokenizer(do_lower_case=True)
    basic_cased = BasicTokenizer(do_lower_case=False)
    assert vocab_extension.is_single_word("hemoglobin", basic_uncased)
    assert not vocab_extension.is_single_word("Hemoglobin", basic_uncased)
    assert vocab_extension.is_single_word("Hemoglobin", basic_cased)
    for word in ("foo-bar", "two words", "中国", "café"):
        assert not vocab_extension.is_single_word(word, basic_uncased), word


def test_nothing_to_add_leaves_no_output(model_folder, tmp_path):
    corpus = write_corpus(tmp_path / "plain.txt", ["the cat sat on the mat ."] * 5)
    with pytest.raises(ValueError, match=r"plain.txt: nothing to add: no word seen at least "
                                         r"--min_frequency=2 times is split"):
        run(model_folder, corpus, tmp_path / "out", mode="append", max_new_tokens=5)
    assert sorted(os.listdir(tmp_path)) == ["plain.txt"]


def test_max_sentences_reads_only_the_first(model_folder, corpus, tmp_path):
    """The first three sentences hold no split word: nothing to add, counted from 3."""
    with pytest.raises(ValueError, match=r"nothing to add: .* \(6 distinct words counted\)"):
        run(model_folder, corpus, tmp_path / "out", max_sentences=3)
    assert run(model_folder, corpus, tmp_path / "out", max_sentences=6)["sentences"] == 6


def _refuse_reading(monkeypatch):
    def read(*args, **kwargs):
        raise AssertionError("the corpus was read before the options were checked")
    monkeypatch.setattr(extend_vocab_run.wikipedia, "iter_documents", read)


def test_more_tokens_than_unused_slots_is_refused_before_reading(model_folder, corpus,
                                                                  tmp_path, monkeypatch):
    _refuse_reading(monkeypatch)
    with pytest.raises(ValueError, match=rf"--max_new_tokens=30: .*vocab.txt has only "
                                         rf"{NUM_UNUSED} free \[unusedN\] slots"):
        run(model_folder, corpus, tmp_path / "out", mode="unused", max_new_tokens=30)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("overrides, error, message", [
    (dict(mode="append"), ValueError, "--mode=append needs --max_new_tokens"),
    (dict(max_new_tokens=-1), ValueError, "--max_new_tokens=-1: expected >= 0"),
    (dict(min_frequency=0), ValueError, "--min_frequency=0: expected >= 1"),
    (dict(mode="grow"), ValueError, "mode must be one of unused, append"),
    (dict(input_file=None), Exception, "--input_file is required"),
    (dict(do_lower_case=False), ValueError, None),  # set below: the folder's name
])
def test_bad_options_are_refused_before_reading(model_folder, corpus, tmp_path, monkeypatch,
                                                overrides, error, message):
    _refuse_reading(monkeypatch)
    if message is None:  # a folder named as google-research names an uncased model
        uncased = tmp_path / "uncased_L-2_H-32_A-4"
        os.symlink(model_folder, uncased)
        overrides = dict(overrides, init_checkpoint=str(uncased))
        message = "do_lower_case=false does not fit init_checkpoint .*uncased_L-2"
    with pytest.raises(error, match=message):
        run(model_folder, corpus, tmp_path / "out", **overrides)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("missing", ["vocab.txt", "bert_config.json", "bert_model.ckpt.index"])
def test_missing_model_files_are_named(model_folder, corpus, tmp_path, missing):
    folder = linked_folder(model_folder, tmp_path / "model", without=missing)
    with pytest.raises(FileNotFoundError, match=f"init_checkpoint {folder}: no {missing}"):
        run(str(folder), corpus, tmp_path / "out", mode="unused")
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        run(str(tmp_path / "absent"), corpus, tmp_path / "out", mode="unused")


def test_vocab_of_another_model_is_refused(model_folder, corpus, tmp_path):
    folder = linked_folder(model_folder, tmp_path / "model", without="vocab.txt")
    write_vocab(folder / "vocab.txt", VOCAB + ["extra"])
    with pytest.raises(ValueError, match="has 100 tokens but .*bert_config.json has "
                                         "vocab_size 99"):
        run(str(folder), corpus, tmp_path / "out", mode="unused")


def test_unused_mode_without_unused_slots_is_refused(model_folder, corpus, tmp_path):
    folder = linked_folder(model_folder, tmp_path / "model", without="vocab.txt")
    write_vocab(folder / "vocab.txt", [t.replace("[unused", "[spare") for t in VOCAB])
    with pytest.raises(ValueError, match=r"has no \[unusedN\] slots for --mode=unused"):
        run(str(folder), corpus, tmp_path / "out", mode="unused")
    run(str(folder), corpus, tmp_path / "out", mode="append", max_new_tokens=1)


def test_existing_output_dir_needs_overwrite(model_folder, corpus, tmp_path):
    output = tmp_path / "out"
    output.mkdir()
    (output / "keep.txt").write_text("x")
    with pytest.raises(ValueError, match="exists and is not empty: pass --overwrite"):
        run(model_folder, corpus, output, mode="unused")
    assert os.listdir(output) == ["keep.txt"]
    run(model_folder, corpus, output, mode="unused", overwrite=True)
    assert "keep.txt" not in os.listdir(output) and (output / "vocab.txt").exists()
    with pytest.raises(ValueError, match="is init_checkpoint"):
        run(model_folder, corpus, model_folder, mode="unused", overwrite=True)
    empty = tmp_path / "empty"
    empty.mkdir()
    stale = tmp_path / f"empty.tmp-{2 ** 22 + 1}"  # a killed run's (no such process)
    stale.mkdir()
    run(model_folder, corpus, empty, mode="unused", max_new_tokens=1)
    assert (empty / "vocab.txt").exists() and not stale.exists()


def test_cli_flags_and_one_line_error(model_folder, corpus, tmp_path):
    flag_values = flags.FlagValues()
    extend_vocab.define_flags(flag_values)
    flag_values(["bert-extend-vocab", f"--input_file={corpus}",
                 f"--init_checkpoint={model_folder}", f"--output_dir={tmp_path / 'cli'}",
                 "--mode=append", "--max_new_tokens=1", "--min_frequency=2"])
    assert extend_vocab.run(flag_values)["added_tokens"] == 1
    plain = write_corpus(tmp_path / "plain.txt", ["the cat ."])
    done = subprocess.run(
        [sys.executable, "-m", "data_prep.extend_vocab", f"--input_file={plain}",
         f"--init_checkpoint={model_folder}", f"--output_dir={tmp_path / 'none'}"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith(
        f"bert-extend-vocab: error: input_file {plain}: nothing to add")
    assert not (tmp_path / "none").exists()


def test_every_flag_reaches_the_options():
    assert check_every_flag_reaches_options(extend_vocab.ExtendVocabOptions) == 12


@pytest.mark.slow
def test_released_model_on_wikiextractor_slice(tmp_path):
    """uncased_L-6_H-384_A-12 + 100 appended tokens from the enwiki WikiExtractor slice."""
    model = os.path.join(SHARED, "checkpoints", "uncased_L-6_H-384_A-12")
    corpus = os.path.join(SHARED, "wiki", "enwiki_wikiextractor_wiki_00")
    if not (os.path.isdir(model) and os.path.isfile(corpus)):
        pytest.skip("../shared/data (checkpoint and WikiExtractor slice) is absent")
    output = tmp_path / "extended"
    summary = run(model, corpus, output, mode="append", max_new_tokens=100)
    assert summary["do_lower_case"] is True  # read from the vocab: no capitals
    assert summary["added_tokens"] == 100 and summary["vocab_size_after"] == 30622
    assert summary["tokens_per_sentence_after"] < summary["tokens_per_sentence_before"]
    assert summary["fewer_tokens_percent"] > 1.0
    encoder = checkpoints.from_pretrained(BertPretrainer, str(output)).encoder
    assert encoder.config.vocab_size == 30622
    new_tokens = (output / "vocab.txt").read_text(encoding="utf-8").splitlines()[30522:]
    tokenizer = tokenization.FullTokenizer(str(output / "vocab.txt"), do_lower_case=True)
    assert all(tokenizer.tokenize(word) == [word] for word in new_tokens)
