"""build_vocab on Apache Beam: the local builder's vocab from word counts summed by Beam."""

import pytest

beam = pytest.importorskip(
    "apache_beam", reason="the beam extra is not installed (pip install -e .[beam])")
pytestmark = pytest.mark.extras("apache_beam")

# pylint: disable=wrong-import-position
from absl import flags

from bert_tf.text import tokenization
from data_prep import beam_vocab, build_vocab
from flag_contract import check_every_flag_reaches_options
from test_build_vocab import _corpus_lines


def _write_corpus(tmp_path):
    lines = _corpus_lines()
    half = len(lines) // 2
    (tmp_path / "a.txt").write_text("\n".join(lines[:half]) + "\n", encoding="utf-8")
    (tmp_path / "b.txt").write_bytes(("\n".join(lines[half:]) + "\n").encode() + b"\xff bad\n")
    return f"{tmp_path}/a.txt,{tmp_path}/b.txt"


def _run_beam(flag_list):
    flag_values = flags.FlagValues()
    beam_vocab.define_flags(flag_values)
    flag_values(["prog"] + flag_list)
    return beam_vocab.run(flag_values, [])


@pytest.mark.parametrize("lower", [True, False])
def test_beam_vocab_is_the_local_builders(tmp_path, lower):
    inputs = _write_corpus(tmp_path)
    local = tmp_path / "local_vocab.txt"
    build_vocab.build_vocab(build_vocab.BuildVocabOptions(
        input_file=inputs, output_file=str(local), vocab_size=300, do_lower_case=lower,
        num_unused=7, lower_thresh=2))
    summary = _run_beam([f"--input_file={inputs}", f"--output_file={tmp_path}/beam_vocab.txt",
                         "--vocab_size=300", f"--do_lower_case={lower}", "--num_unused=7",
                         "--lower_thresh=2", "--split_bytes=700"])
    assert (tmp_path / "beam_vocab.txt").read_text(encoding="utf-8") == \
        local.read_text(encoding="utf-8")
    assert summary["non_utf8_lines"] == 1 and summary["distinct_words"] > 20
    beam_tokenizer = tokenization.FullTokenizer(str(tmp_path / "beam_vocab.txt"), lower)
    local_tokenizer = tokenization.FullTokenizer(str(local), lower)
    for line in _corpus_lines()[:100]:
        assert beam_tokenizer.tokenize(line) == local_tokenizer.tokenize(line)


def test_min_word_count_drops_rare_words(tmp_path):
    inputs = _write_corpus(tmp_path)
    summary = _run_beam([f"--input_file={inputs}", f"--output_file={tmp_path}/v.txt",
                         "--vocab_size=300", "--num_unused=7", "--lower_thresh=2",
                         "--min_word_count=400"])
    everything = _run_beam([f"--input_file={inputs}", f"--output_file={tmp_path}/w.txt",
                            "--vocab_size=300", "--num_unused=7", "--lower_thresh=2"])
    assert 0 < summary["distinct_words"] < everything["distinct_words"]


def test_empty_glob_refused_before_the_pipeline(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        _run_beam([f"--input_file={tmp_path}/nothing-here*", f"--output_file={tmp_path}/v.txt"])


def test_every_flag_reaches_the_options():
    # bert-build-vocab's 12 flags, --streams_per_split, --split_bytes, --min_word_count
    assert check_every_flag_reaches_options(beam_vocab.BuildVocabBeamOptions) == 15


@pytest.mark.parametrize("flag, message", [
    ("--vocab_size=10", r"--vocab_size=10: expected at least 205"),
    ("--language=xx", r"--language=xx: .*<am\|ar\|"),
])
def test_bad_flags_refused_before_the_pipeline(tmp_path, monkeypatch, flag, message):
    """issue 26: a vocab too small for the reserved tokens and the characters was refused
    only by the learner, after every word had been counted."""
    def pipeline(*args, **kwargs):
        raise AssertionError("the pipeline started before the flags were checked")
    monkeypatch.setattr(beam_vocab.beam, "Pipeline", pipeline)
    inputs = _write_corpus(tmp_path)
    with pytest.raises(Exception, match=message):
        _run_beam([f"--input_file={inputs}", f"--output_file={tmp_path}/v.txt", flag])
