"""SQuAD data side and postprocessing: hand-made examples, golden values by hand."""

import collections
import json
import logging

import numpy as np
import pytest
from absl import logging as absl_logging

from bert_tf.text import tokenization
from bert_tf.tasks.squad import data as squad_data
from bert_tf.tasks.squad import evaluate as squad_evaluate
from bert_tf.tasks.squad import features as squad_features
from bert_tf.tasks.squad import postprocess as squad_postprocess
from harness import write_squad_json

CAFE = "The Café Procope (1686–1872) opened in Paris."
XS = " ".join(f"x{i}" for i in range(20))
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cafe", "pro", "##cope",
         "(", "16", "##86", "–", "18", "##72", ")", "opened", "in", "paris", ".",
         "when", "did", "open", "?", "where", "what", "is", "who"] + [
             f"x{i}" for i in range(20)]


def _write_squad(tmp_path, paragraphs, name="data.json", version="1.1"):
    return write_squad_json(tmp_path / name, paragraphs, version)


def _qa(qid, question, answer=None, start=None, context=CAFE):
    qa = {"id": qid, "question": question, "answers": []}
    if answer is not None:
        start = context.index(answer) if start is None else start
        qa["answers"] = [{"text": answer, "answer_start": start}]
    return qa


def test_split_context_words_and_offsets():
    doc_tokens, offsets = squad_data.split_context("Le  café\u202fbleu.\n")
    assert doc_tokens == ["Le", "café", "bleu."]
    # L e ' ' ' ' c a f é U+202F b l e u . \n
    assert offsets == [0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2]


def test_answers_projected_and_tightened(tmp_path, tokenizer):
    path = _write_squad(tmp_path, [{"context": CAFE, "qas": [
        _qa("q1", "When did the Café Procope open?", "1686"),
        _qa("q2", "Where?", "Paris"),
        _qa("q3", "What opened?", "Café Procope")]}])
    examples = squad_data.read_squad_examples(path, is_training=True)
    assert examples[0].doc_tokens == ["The", "Café", "Procope", "(1686–1872)", "opened",
                                      "in", "Paris."]
    assert [(e.start_position, e.end_position) for e in examples] == [
        (3, 3), (6, 6), (1, 2)]
    features = squad_features.convert_examples_to_features(examples, tokenizer, 32, 128, 16, True)
    assert len(features) == 3
    first = features[0]
    assert first.tokens == [
        "[CLS]", "when", "did", "the", "cafe", "pro", "##cope", "open", "?", "[SEP]",
        "the", "cafe", "pro", "##cope", "(", "16", "##86", "–", "18", "##72", ")",
        "opened", "in", "paris", ".", "[SEP]"]
    assert first.token_to_orig_map == {10: 0, 11: 1, 12: 2, 13: 2, 14: 3, 15: 3, 16: 3,
                                       17: 3, 18: 3, 19: 3, 20: 3, 21: 4, 22: 5, 23: 6,
                                       24: 6}
    assert first.segment_ids == [0] * 10 + [1] * 16 + [0] * 6
    assert first.input_mask == [1] * 26 + [0] * 6
    assert first.input_ids[:3] == [2, 20, 21] and first.input_ids[25:] == [3] + [0] * 6
    # "1686" is the sub-tokens "16 ##86" inside the word "(1686–1872)".
    assert (first.start_position, first.end_position) == (15, 16)
    # "Paris" without the full stop of the word "Paris.": [CLS] where ? [SEP] = 4.
    assert (features[1].start_position, features[1].end_position) == (4 + 13, 4 + 13)
    # [CLS] what opened ? [SEP] = 5; "cafe pro ##cope" are sub-tokens 1..3.
    assert (features[2].start_position, features[2].end_position) == (6, 8)
    assert [f.unique_id for f in features] == [1000000000, 1000000001, 1000000002]


def _x_example(answer_words, qid="qx"):
    doc_tokens = XS.split()
    start = doc_tokens.index(answer_words[0])
    end = doc_tokens.index(answer_words[-1])
    return squad_data.SquadExample(qid, "what is ?", doc_tokens, " ".join(answer_words),
                                   start, end)


def test_windows_max_context_and_answers_across_borders(tokenizer):
    # 16 tokens - 3 question tokens - 3 = 10 context tokens per window, stride 4.
    features = squad_features.convert_examples_to_features(
        [_x_example(["x8", "x9", "x10", "x11"]), _x_example(["x17", "x18"])],
        tokenizer, max_seq_length=16, doc_stride=4, max_query_length=8,
        is_training=True)
    assert [(f.example_index, f.doc_span_index) for f in features] == [
        (0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1), (1, 2), (1, 3)]
    windows = [[f.tokens[i] for i in sorted(f.token_to_orig_map)] for f in features[:4]]
    assert windows == [XS.split()[0:10], XS.split()[4:14], XS.split()[8:18],
                       XS.split()[12:20]]
    # Best window per context token, computed by hand from
    # min(left, right) + 0.01 * length.
    best = [0] * 7 + [1] * 4 + [2] * 4 + [3] * 5
    for feature in features[:4]:
        for position, orig in feature.token_to_orig_map.items():
            expected = best[orig] == feature.doc_span_index
            assert feature.token_is_max_context[position] == expected, (feature, orig)
    # x8..x11 is not inside window 0 (x0..x9) nor 3 (x12..x19): [CLS] target there.
    assert [(f.start_position, f.end_position) for f in features[:4]] == [
        (0, 0), (5 + 4, 5 + 7), (5 + 0, 5 + 3), (0, 0)]
    # x17..x18 crosses the end of window 2 (x8..x17).
    assert [(f.start_position, f.end_position) for f in features[4:]] == [
        (0, 0), (0, 0), (0, 0), (5 + 5, 5 + 6)]


def test_question_truncated_and_lengths_checked(tokenizer):
    example = _x_example(["x1"])
    example.question_text = "what is the cafe ?"
    feature = squad_features.convert_examples_to_features([example], tokenizer, 32, 8, 2, False)[0]
    assert feature.tokens[:4] == ["[CLS]", "what", "is", "[SEP]"]
    assert feature.start_position is None
    with pytest.raises(ValueError, match="max_query_length"):
        squad_features.convert_examples_to_features([example], tokenizer, 10, 8, 7, False)


def test_building_features_says_it_started_and_finished(tokenizer, caplog):
    """The features of predict_file are built after training: a line says so at once
    (tokenizing a dev set takes tens of seconds), another when they are done."""
    absl_logging.set_verbosity(absl_logging.INFO)
    caplog.set_level(logging.INFO, logger="absl")
    squad_features.convert_examples_to_features([_x_example(["x1"])] * 3, tokenizer, 32, 8, 2,
                                            False)
    assert "Building prediction features: 3 questions ..." in caplog.text
    assert "Building prediction features: 3 questions in " in caplog.text


def test_version_2_impossible_points_at_cls(tmp_path, tokenizer):
    qa = _qa("q1", "Who?")
    qa["is_impossible"] = True
    path = _write_squad(tmp_path, [{"context": CAFE, "qas": [qa]}], version="v2.0")
    examples = squad_data.read_squad_examples(path, True, version_2_with_negative=True)
    assert examples[0].is_impossible and examples[0].start_position == -1
    with pytest.raises(squad_data.SquadFormatError,
                       match=r'qas\[0\]: "answers" is empty.*version_2_with_negative'):
        squad_data.read_squad_examples(path, True, version_2_with_negative=False)
    feature = squad_features.convert_examples_to_features(examples, tokenizer, 32, 8, 8, True)[0]
    assert (feature.start_position, feature.end_position, feature.is_impossible) == (
        0, 0, True)


def test_answer_not_at_start_counted_and_skipped(tmp_path):
    path = _write_squad(tmp_path, [{"context": CAFE, "qas": [
        _qa("good", "When?", "1686"),
        _qa("shifted", "When?", "1686", start=CAFE.index("opened")),
        _qa("outside", "When?", "1686", start=len(CAFE) - 2)]}])
    stats = collections.Counter()
    examples = squad_data.read_squad_examples(path, True, stats=stats)
    assert [e.qas_id for e in examples] == ["good"]
    assert stats["skipped_answer_not_found"] == 2 and stats["questions"] == 3
    # Prediction does not look at answers.
    assert len(squad_data.read_squad_examples(path, False)) == 3


def test_several_answers_use_the_first(tmp_path):
    qa = _qa("q", "Where?", "Paris")
    qa["answers"].append({"text": "in Paris", "answer_start": CAFE.index("in Paris")})
    path = _write_squad(tmp_path, [{"context": CAFE, "qas": [qa]}])
    stats = collections.Counter()
    example = squad_data.read_squad_examples(path, True, stats=stats)[0]
    assert example.orig_answer_text == "Paris" and stats["first_of_several_answers"] == 1


@pytest.mark.parametrize("qa, message", [
    ({"question": "q", "answers": []}, r'qas\[1\]: missing "id"'),
    ({"id": 5, "question": "q", "answers": []}, r'qas\[1\]: "id" must be str, got int'),
    ({"id": "b", "question": "q", "answers": [{"text": "x"}]},
     r'qas\[1\]\.answers\[0\]: missing "answer_start"'),
    ({"id": "b", "question": "q", "answers": [{"text": "x", "answer_start": True}]},
     r'qas\[1\]\.answers\[0\]: "answer_start" must be int, got bool'),
])
def test_bad_json_names_the_element(tmp_path, qa, message):
    path = _write_squad(tmp_path, [{"context": CAFE, "qas": [_qa("a", "q", "Paris"), qa]}])
    with pytest.raises(squad_data.SquadFormatError,
                       match=r"data\.json: data\[0\]\.paragraphs\[0\]\." + message):
        squad_data.read_squad_examples(path, is_training=True)


def test_bad_json_shapes(tmp_path):
    path = _write_squad(tmp_path, [{"qas": []}])
    with pytest.raises(squad_data.SquadFormatError, match=r'paragraphs\[0\]: missing "context"'):
        squad_data.read_squad_examples(path, False)
    path = tmp_path / "broken.json"
    path.write_text('{"data": [', encoding="utf-8")
    with pytest.raises(squad_data.SquadFormatError, match="broken.json: not valid"):
        squad_data.read_squad_examples(str(path), False)
    path.write_text('{"articles": []}', encoding="utf-8")
    with pytest.raises(squad_data.SquadFormatError, match='top level: missing "data"'):
        squad_data.read_squad_examples(str(path), False)


@pytest.mark.parametrize("pred, orig, lower, expected", [
    ("steve smith", "Steve Smith's", True, "Steve Smith"),
    ("cafe", "Café,", True, "Café"),
    ("1686", "(1686–1872)", True, "1686"),
    ("Smith", "Smith's", False, "Smith"),
    ("paris", "London.", True, "London."),  # not found: the whole original text
])
def test_get_final_text(pred, orig, lower, expected):
    assert squad_postprocess.get_final_text(pred, orig, lower) == expected


def test_compute_softmax():
    probs = squad_postprocess._compute_softmax([1.0, 2.0, 3.0])
    expected = np.exp([1.0, 2.0, 3.0]) / np.exp([1.0, 2.0, 3.0]).sum()
    np.testing.assert_allclose(probs, expected, rtol=1e-12)
    assert squad_postprocess._compute_softmax([]) == []


def _x_windows(tokenizer):
    example = _x_example(["x9"])
    features = squad_features.convert_examples_to_features([example], tokenizer, 16, 4, 8, False)
    logits = [(np.full(16, -10.0, np.float32), np.full(16, -10.0, np.float32))
              for _ in features]
    return [example], features, logits


def _results(features, logits):
    return [squad_postprocess.RawResult(f.unique_id, s, e)
            for f, (s, e) in zip(features, logits)]


def test_decoding_uses_max_context_windows_only(tokenizer):
    examples, features, logits = _x_windows(tokenizer)
    # Window 0 scores "x9" highest, but x9 has its maximum context in window 1.
    logits[0][0][5 + 9], logits[0][1][5 + 9] = 5.0, 5.0
    # Window 1 (x4..x13): "x9 x10" at positions 10..11.
    logits[1][0][10], logits[1][1][11] = 3.0, 3.0
    predictions, nbest, null_odds = squad_postprocess.compute_predictions(
        examples, features, _results(features, logits))
    assert predictions == {"qx": "x9 x10"}
    assert null_odds == {}
    entries = nbest["qx"]
    assert entries[0]["text"] == "x9 x10" and entries[0]["start_logit"] == 3.0
    assert max(e["start_logit"] + e["end_logit"] for e in entries) == 6.0
    assert len(entries) == 20 and len({e["text"] for e in entries}) == 20
    assert sum(e["probability"] for e in entries) == pytest.approx(1.0)


def test_decoding_drops_long_spans(tokenizer):
    examples, features, logits = _x_windows(tokenizer)
    # Window 1 (x4..x13 at positions 5..14); x7..x10 have their maximum context there.
    logits[1][0][8], logits[1][1][14] = 8.0, 8.0  # x7..x13: 7 tokens, score 16
    logits[1][0][10], logits[1][1][11] = 1.0, 1.0  # x9..x10: 2 tokens, score 2
    expected = {2: "x9 x10", 6: "x7 x8 x9 x10", 7: "x7 x8 x9 x10 x11 x12 x13"}
    for max_answer_length, answer in expected.items():
        predictions, _, _ = squad_postprocess.compute_predictions(
            examples, features, _results(features, logits),
            max_answer_length=max_answer_length)
        assert predictions["qx"] == answer, max_answer_length


def test_version_2_null_score_and_threshold(tokenizer, tmp_path):
    examples, features, logits = _x_windows(tokenizer)
    logits[1][0][10], logits[1][1][11] = 3.0, 3.0  # best non-null: 6
    for window, cls_logit in enumerate([4.0, 1.0, 2.0, 3.0]):
        logits[window][0][0] = logits[window][1][0] = cls_logit
    results = _results(features, logits)
    # Null score is the minimum over windows: 1 + 1 = 2; 2 - 6 = -4.
    _, _, paths = squad_postprocess.write_predictions(
        examples, features, results, str(tmp_path), version_2_with_negative=True)
    assert json.loads(open(paths["predictions"]).read()) == {"qx": "x9 x10"}
    assert json.loads(open(paths["null_odds"]).read()) == {"qx": -4.0}
    nbest = json.loads(open(paths["nbest"]).read())["qx"]
    null_entry = [e for e in nbest if not e["text"]]
    assert [(e["start_logit"], e["end_logit"]) for e in null_entry] == [(1.0, 1.0)]
    predictions, _, _ = squad_postprocess.compute_predictions(
        examples, features, results, version_2_with_negative=True,
        null_score_diff_threshold=-5.0)
    assert predictions == {"qx": ""}


def test_missing_result_is_an_error(tokenizer):
    examples, features, logits = _x_windows(tokenizer)
    with pytest.raises(ValueError, match="no result"):
        squad_postprocess.compute_predictions(examples, features,
                                              _results(features[:1], logits))


def test_end_to_end_hand_made_gold_logits(tmp_path, tokenizer):
    path = _write_squad(tmp_path, [{"context": CAFE, "qas": [
        _qa("q1", "When did the Café Procope open?", "1686"),
        _qa("q2", "Where?", "Paris"),
        _qa("q3", "What opened?", "Café Procope")]}])
    predictions = _gold_predictions(path, tokenizer, max_seq_length=32, doc_stride=128)
    assert predictions == {"q1": "1686", "q2": "Paris", "q3": "Café Procope"}


def _gold_predictions(path, tokenizer, max_seq_length, doc_stride):
    """Features of a file, logits peaked at the gold sub-tokens, decoded predictions."""
    examples = squad_data.read_squad_examples(path, is_training=True)
    features = squad_features.convert_examples_to_features(examples, tokenizer, max_seq_length,
                                                       doc_stride, 16, is_training=True)
    results = []
    for feature in features:
        start_logits = np.zeros(max_seq_length, np.float32)
        end_logits = np.zeros(max_seq_length, np.float32)
        if feature.start_position > 0:
            start_logits[feature.start_position] = 10.0
            end_logits[feature.end_position] = 10.0
        results.append(squad_postprocess.RawResult(feature.unique_id, start_logits,
                                                   end_logits))
    predictions, _, _ = squad_postprocess.compute_predictions(examples, features,
                                                              results)
    return predictions


def _dev_subset(shared_data_dir, tmp_path, num_articles):
    dev_file = shared_data_dir / "squad" / "dev-v1.1.json"
    if not dev_file.exists():
        pytest.skip(f"{dev_file} not found")
    dev = json.loads(dev_file.read_text(encoding="utf-8"))
    if num_articles:
        dev["data"] = dev["data"][:num_articles]
        dev_file = tmp_path / "dev-subset.json"
        dev_file.write_text(json.dumps(dev), encoding="utf-8")
    vocab = shared_data_dir / "checkpoints" / "uncased_L-6_H-384_A-12" / "vocab.txt"
    return str(dev_file), dev["data"], tokenization.FullTokenizer(str(vocab), True)


def test_dev_gold_spans_round_trip(shared_data_dir, tmp_path):
    """Two dev articles through features -> gold logits -> decoding -> official EM."""
    dev_file, data, tokenizer = _dev_subset(shared_data_dir, tmp_path, 2)
    predictions = _gold_predictions(dev_file, tokenizer, 192, 64)
    result = squad_evaluate.evaluate_v1(data, predictions)
    assert len(predictions) > 400
    assert result["exact_match"] > 95.0 and result["f1"] > 95.0


@pytest.mark.slow
def test_dev_gold_spans_round_trip_full(shared_data_dir, tmp_path):
    """All of dev-v1.1.json, at the original's lengths (384 / 128)."""
    dev_file, data, tokenizer = _dev_subset(shared_data_dir, tmp_path, 0)
    predictions = _gold_predictions(dev_file, tokenizer, 384, 128)
    result = squad_evaluate.evaluate_v1(data, predictions)
    assert result["exact_match"] > 95.0 and result["f1"] > 95.0


@pytest.mark.parametrize("qa, message", [
    (_qa("a", "When?", "1686"), r'qas\[1\]: "id" \'a\' is also the id of '
                                r'data\[0\]\.paragraphs\[0\]\.qas\[0\]'),
    (_qa(" ", "When?", "1686"), r'qas\[1\]: "id" is empty'),
    (_qa("b", "  ", "1686"), r'qas\[1\]: "question" is empty'),
])
def test_repeated_ids_and_empty_values_are_refused(tmp_path, qa, message):
    path = _write_squad(tmp_path, [{"context": CAFE, "qas": [_qa("a", "When?", "1686"), qa]}])
    for is_training in (True, False):
        with pytest.raises(squad_data.SquadFormatError,
                           match=r"data\.json: data\[0\]\.paragraphs\[0\]\." + message):
            squad_data.read_squad_examples(path, is_training=is_training)


def test_empty_context_and_binary_files_are_named(tmp_path):
    path = _write_squad(tmp_path, [{"context": " ", "qas": [_qa("a", "When?")]}])
    with pytest.raises(squad_data.SquadFormatError, match=r'paragraphs\[0\]: "context" is '
                                                          "empty"):
        squad_data.read_squad_examples(path, False)
    # A paragraph without questions may have any context.
    _write_squad(tmp_path, [{"context": "", "qas": []}])
    assert squad_data.read_squad_examples(path, False) == []
    (tmp_path / "data.json").write_bytes(b'{"data":\n [\x00]}')
    with pytest.raises(squad_data.SquadFormatError, match=r"data.json:2: NUL byte at column "
                                                          "3: not a text file"):
        squad_data.read_squad_examples(path, False)
    (tmp_path / "data.json").write_bytes(b'{"data":\n [}')
    with pytest.raises(squad_data.SquadFormatError, match=r"data.json: not valid JSON \(line "
                                                          r"2, column 3"):
        squad_data.read_squad_examples(path, False)
