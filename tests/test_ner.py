"""NER reader, IOB conversions, windows and first-sub-token alignment."""

import logging

import numpy as np
import pytest

from bert_tf.runs import run_context
from bert_tf.tasks.ner import conlleval
from bert_tf.tasks.ner import data as ner_data
from bert_tf.train import progress

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "eu", "rejects", "german", "call",
         "to", "boy", "##cott", "##s", "brit", "##ish", "lamb", ".", "peter", "black"]
IDS = {token: index for index, token in enumerate(VOCAB)}

CONLL_IOB1 = """\
-DOCSTART- -X- O O

EU NNP I-NP I-ORG
rejects VBZ I-VP O
German JJ I-NP I-MISC
call NN I-NP O
to TO I-VP O
boycotts VB I-VP O
British JJ I-NP I-MISC
lamb NN I-NP O
. . O O

Peter NNP I-NP I-PER
Black NNP I-NP I-PER
Black NNP I-NP B-PER
"""


@pytest.fixture
def conll_file(tmp_path):
    path = tmp_path / "eng.train"
    path.write_text(CONLL_IOB1)
    return str(path)


def test_reader_skips_docstart_and_splits_sentences(conll_file):
    sentences = ner_data.read_tagged_file(conll_file)
    assert [s.words[:2] for s in sentences] == [["EU", "rejects"], ["Peter", "Black"]]
    assert sentences[0].tags[:3] == ["I-ORG", "O", "I-MISC"]
    assert sentences[1].tags == ["I-PER", "I-PER", "B-PER"]
    assert sentences[1].lines == [13, 14, 15]
    # Another column as the tag: the chunk column (index 2).
    chunks = ner_data.read_tagged_file(conll_file, tag_column=2)
    assert chunks[0].tags[:2] == ["I-NP", "I-VP"]
    words_only = ner_data.read_tagged_file(conll_file, has_tags=False)
    assert words_only[1].tags is None and words_only[1].words == ["Peter", "Black", "Black"]


def test_reader_errors_name_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("EU B-ORG\nrejects\n")
    with pytest.raises(ValueError, match=r"bad.txt:2: missing tag: the line holds only "
                                         r"'rejects'"):
        ner_data.read_tagged_file(str(path))
    path.write_text("EU NNP B-ORG\n")
    with pytest.raises(ValueError, match=r"bad.txt:1: tag column 5 is outside the line, "
                                         r"which has 3 columns"):
        ner_data.read_tagged_file(str(path), tag_column=5)
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        ner_data.read_tagged_file(str(tmp_path / "missing.txt"))


def test_iob_conversions_by_hand():
    iob1 = ["I-PER", "I-PER", "B-PER", "O", "I-LOC", "I-ORG", "B-ORG", "I-ORG"]
    iob2 = ["B-PER", "I-PER", "B-PER", "O", "B-LOC", "B-ORG", "B-ORG", "I-ORG"]
    assert ner_data.to_iob2(iob1) == iob2
    assert ner_data.to_iob2(iob2) == iob2
    assert ner_data.to_iob1(iob2) == iob1
    # conlleval finds the same chunks in both schemes.
    # Chunks: PER(0-1) PER(2) LOC(4) ORG(5) ORG(6-7).
    counts = conlleval.evaluate_sequences([iob1], [iob2])
    assert counts.found_correct == counts.found_guessed == counts.correct_chunks == 5


def test_scheme_and_label_list(conll_file):
    sentences = ner_data.read_tagged_file(conll_file)
    assert ner_data.detect_scheme(sentences) == "iob1"
    for sentence in sentences:
        sentence.tags = ner_data.to_iob2(sentence.tags)
    assert ner_data.detect_scheme(sentences) == "iob2"
    assert ner_data.build_label_list(sentences) == ["O", "B-MISC", "B-ORG", "B-PER", "I-PER"]


def test_plan_windows_by_hand():
    # Sub-tokens per word: 2 1 3 1 1 2 ; offsets 0 2 3 6 7 8 10
    windows, owner = ner_data.plan_windows([2, 1, 3, 1, 1, 2], max_tokens=5, stride=2)
    # Window 0: words 0-1 (3 tokens; adding word 2 makes 6). Next start: first word at
    # offset >= 0 + 2 -> word 1. Window 1: words 1-3 (1+3+1 = 5). Next start: first word
    # at offset >= 2 + 2 -> word 3. Window 2: words 3-5 (1+1+2 = 4), the end.
    assert windows == [(0, 2), (1, 4), (3, 6)]
    # Context min(left, right) in sub-tokens; ties go to the earlier window.
    # word 1: w0 min(2, 0) = 0, w1 min(0, 4) = 0 -> w0. word 2: w1 min(1, 1) -> w1.
    # word 3: w1 min(4, 0) = 0, w2 min(0, 3) = 0 -> w1. words 4, 5: only in w2.
    assert owner == [0, 0, 1, 1, 2, 2]
    assert ner_data.plan_windows([1, 1], max_tokens=5, stride=2) == ([(0, 2)], [0, 0])


def test_alignment_labels_first_sub_token_only(conll_file, tokenizer):
    sentences = ner_data.read_tagged_file(conll_file)
    labels = ner_data.build_label_list(sentences)
    features = ner_data.convert_sentences_to_features(sentences[1:], labels, 16, tokenizer)
    assert features.input_ids.shape == (1, 16)
    row = features.input_ids[0]
    # Peter Black Black -> peter black black: one sub-token each.
    assert list(row[:5]) == [IDS[t] for t in ["[CLS]", "peter", "black", "black", "[SEP]"]]
    first = ner_data.convert_sentences_to_features(sentences[:1], labels, 16, tokenizer)
    # EU rejects German call to boy ##cott ##s brit ##ish lamb .
    tokens = ["[CLS]", "eu", "rejects", "german", "call", "to", "boy", "##cott", "##s",
              "brit", "##ish", "lamb", ".", "[SEP]"]
    assert list(first.input_ids[0, :14]) == [IDS[t] for t in tokens]
    weights = first.label_weights[0]
    assert list(weights[:14]) == [0, 1, 1, 1, 1, 1, 1, 0, 0, 1, 0, 1, 1, 0]
    assert list(weights[14:]) == [0, 0]
    label_ids = [labels[i] for i in first.label_ids[0][weights == 1]]
    assert label_ids == ["B-ORG", "O", "B-MISC", "O", "O", "O", "B-MISC", "O", "O"]
    assert list(first.word_ids[0, :14]) == [-1, 0, 1, 2, 3, 4, 5, -1, -1, 6, -1, 7, 8, -1]


def test_long_sentence_windows_give_every_word_one_tag(conll_file, tokenizer):
    sentences = ner_data.read_tagged_file(conll_file)
    labels = ner_data.build_label_list(sentences)
    # 12 sub-tokens, 6 per window: several overlapping windows.
    features = ner_data.convert_sentences_to_features(sentences[:1], labels, 8, tokenizer,
                                                      doc_stride=3)
    assert len(features.input_ids) > 2
    assert np.all(features.sentence_index == 0)
    scored = features.word_ids[features.word_ids >= 0]
    assert sorted(scored.tolist()) == list(range(9))  # each of the 9 words exactly once
    assert features.label_weights.sum() == 9
    # No window is over-long and every one is [CLS] ... [SEP].
    lengths = features.input_mask.sum(axis=1)
    assert lengths.max() <= 8
    for row, length in zip(features.input_ids, lengths):
        assert row[0] == IDS["[CLS]"] and row[length - 1] == IDS["[SEP]"]
    # Decoding gold label ids back gives the IOB2 gold tags.
    tags = ner_data.decode_predictions(features, features.label_ids, sentences[:1], labels)
    assert tags == [ner_data.to_iob2(sentences[0].tags)]


def test_decode_rejects_unknown_ids_and_reports_unknown_gold(conll_file, tokenizer):
    sentences = ner_data.read_tagged_file(conll_file)
    features = ner_data.convert_sentences_to_features(sentences, ["O", "B-PER", "I-PER"], 16,
                                                      tokenizer)
    # ORG and MISC are unknown to this label list: left out of the loss, listed.
    assert [(line, tag) for _, line, tag in features.unknown_tags] == [
        (3, "B-ORG"), (5, "B-MISC"), (9, "B-MISC")]
    assert features.label_weights.sum() == 12 - 3
    predictions = np.full(features.input_ids.shape, 7)
    with pytest.raises(ValueError, match="predicted label id 7 is not in the label list of 3"):
        ner_data.decode_predictions(features, predictions, sentences, ["O", "B-PER", "I-PER"])


def test_feature_building_logs_its_progress(conll_file, tokenizer, caplog, monkeypatch):
    """A line as it starts, one every 10 s (a clock that moves 11 s a call), one at the
    end: a CoNLL-2003 split takes tens of seconds (issue 49)."""
    caplog.set_level(logging.INFO, logger="absl")
    ticks = iter(range(0, 1000, 11))

    class Clocked(progress.PhaseProgress):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs, clock=lambda: next(ticks))
    monkeypatch.setattr(ner_data.progress, "PhaseProgress", Clocked)
    sentences = ner_data.read_tagged_file(conll_file)
    ner_data.convert_sentences_to_features(sentences, ner_data.build_label_list(sentences),
                                           16, tokenizer, phase="Building evaluation features")
    assert [record.getMessage() for record in caplog.records] == [
        "Building evaluation features: 2 sentences ...",
        "Building evaluation features: 1 of 2 sentences (50%), 0.1/s, about 11s left",
        "Building evaluation features: 2 of 2 sentences (100%), 0.1/s, about 0s left",
        "Building evaluation features: 2 sentences in 33s (0.1/s)"]


def test_format_predictions_in_the_gold_scheme(conll_file):
    sentences = ner_data.read_tagged_file(conll_file)[1:]
    text = ner_data.format_predictions(sentences, [["B-PER", "I-PER", "B-PER"]], scheme="iob1")
    assert text == "Peter I-PER I-PER\nBlack I-PER I-PER\nBlack B-PER B-PER\n\n"
    counts = conlleval.evaluate_lines(text.splitlines())
    assert counts.correct_chunks == counts.found_correct == 2


def test_label_list_file_round_trip(tmp_path):
    run_context.write_label_list(str(tmp_path), ["O", "B-PER"])
    assert run_context.read_label_list(str(tmp_path)) == ["O", "B-PER"]
    with pytest.raises(FileNotFoundError, match="output_dir"):
        run_context.read_label_list(str(tmp_path / "none"))


def test_undecodable_conll_file_names_file_and_line(tmp_path):
    path = tmp_path / "train.txt"
    path.write_bytes(b"EU B-ORG\nrejects O\n\nCaf\xe9 B-LOC\n")
    with pytest.raises(ValueError, match=r"train.txt:4: not UTF-8 text \(byte 0xe9"):
        ner_data.read_tagged_file(str(path))


def test_tag_sniffing_names_a_binary_file(tmp_path):
    from bert_tf.tasks.ner import task as ner_task
    path = tmp_path / "test.txt"
    path.write_bytes(b"\n\x00\x01binary\n")
    with pytest.raises(ValueError, match=r"test.txt: not a text file: .*test.txt:2: NUL byte at column 1"):
        ner_task.file_has_tags(str(path))
    path.write_bytes(b"\xef\xbb\xbf-DOCSTART- O\n\nEU B-ORG\n")
    assert ner_task.file_has_tags(str(path))
