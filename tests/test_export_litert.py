"""LiteRT exports (bert-export-model --export_format=litert): the .tflite of each model
type run by the LiteRT interpreter (`ai-edge-litert`, the `litert-test` extra) against
the Keras model and the SavedModel's serve_ids, int8 against float32, the files an app
tokenizes with, and bad input refused before anything is written."""

import importlib.util
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.models import (BertClassifier, BertEncoder, BertSpanLabeler, BertTokenClassifier)
from bert_tf.serving import export, litert
from bert_tf.runs import export_checkpoint
from bert_tf.text.tokenization import FullTokenizer
from bert_tf.tasks.multiple_choice.model import BertMultipleChoice
from bert_tf.text.preprocessor import Preprocessor
from harness import tiny_config, tiny_model
from test_export_formats import (LABELS, TAGS, export_options, randomized,  # noqa: F401
                                 vocab, write_run)

HAVE_LITERT = importlib.util.find_spec("ai_edge_litert") is not None
LENGTH = 16
# (model class, head arguments, output names)
MODELS = {"classifier": (BertClassifier, {"num_classes": 3}, ["logits"]),
          "tagger": (BertTokenClassifier, {"num_classes": 4}, ["logits"]),
          "span": (BertSpanLabeler, {}, ["end_logits", "start_logits"]),
          "encoder": (BertEncoder, {}, ["pooled_output", "sequence_output"])}
# Largest |int8 - float32| logit: measured 0.027 on the classifier here (logits up to
# 0.6; weights moved N(0, 0.2) from their initial values), 0.014 on another seed's
# (logits up to 1.2), 0.058 on a token classifier's (logits up to 3.6).
INT8_TOLERANCE = 0.05


def runner_or_skip(path):
    """The `serving_default` signature runner of the LiteRT interpreter on `path`."""
    if not HAVE_LITERT:
        pytest.skip("ai-edge-litert is not installed: pip install -e .[litert-test]")
    from ai_edge_litert.interpreter import Interpreter  # pylint: disable=import-outside-toplevel
    interpreter = Interpreter(model_path=str(path))
    assert list(interpreter.get_signature_list()) == ["serving_default"]
    return interpreter.get_signature_runner("serving_default")


def rows():
    """Three rows [1, 16] as an app packs them: a sentence, a pair, a full row."""
    rng = np.random.default_rng(5)
    result = []
    for length, pair_start in ((6, None), (11, 5), (LENGTH, 9)):
        ids = np.zeros((1, LENGTH), np.int32)
        ids[0, :length] = rng.integers(5, 99, length)
        mask = (np.arange(LENGTH) < length).astype(np.int32)[None]
        segments = np.zeros_like(ids)
        if pair_start:
            segments[0, pair_start:length] = 1
        result.append({"input_ids": ids, "input_mask": mask, "segment_ids": segments})
    return result


def keras_outputs(model, features):
    return {key: np.asarray(value) for key, value in model(features, training=False).items()
            if key != "encoder_outputs"}


@pytest.mark.extras("ai_edge_litert")
@pytest.mark.parametrize("name", list(MODELS))
def test_float32_tflite_equals_the_keras_model(name, vocab, tmp_path):
    model_cls, head, output_names = MODELS[name]
    model = randomized(model_cls, 21, **head)
    labels = {"classifier": LABELS, "tagger": TAGS}.get(name)
    folder = litert.export_litert(
        model, Preprocessor(vocab, True, LENGTH), tmp_path / name, label_names=labels)
    assert sorted(os.listdir(folder)) == ["litert_config.json", "model.tflite", "vocab.txt"]
    assert (tmp_path / name / "vocab.txt").read_text() == open(vocab, encoding="utf-8").read()
    config = json.loads((tmp_path / name / "litert_config.json").read_text())
    assert config["input_names"] == ["input_ids", "input_mask", "segment_ids"]
    assert (config["input_shape"], config["input_dtype"]) == ([1, LENGTH], "int32")
    assert sorted(config["output_names"]) == output_names
    assert config["special_tokens"] == {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3,
                                        "[MASK]": 4}
    assert (config["do_lower_case"], config["max_seq_length"]) == (True, LENGTH)
    assert config.get("label_names") == labels
    runner = runner_or_skip(tmp_path / name / "model.tflite")
    for features in rows():
        got = runner(**features)
        want = keras_outputs(model, features)
        assert sorted(got) == output_names
        for key in output_names:
            assert got[key].dtype == np.float32 and got[key].shape == want[key].shape
            np.testing.assert_allclose(got[key], want[key], atol=1e-4, rtol=0, err_msg=key)


@pytest.mark.extras("ai_edge_litert")
def test_float32_tflite_equals_the_saved_model_serve_ids(vocab, tmp_path):
    model = randomized(BertClassifier, 22, num_classes=3)
    litert.export_litert(
        model, Preprocessor(vocab, True, LENGTH), tmp_path / "litert", label_names=LABELS)
    export.export_classifier(
        model, Preprocessor(vocab, True, LENGTH), str(tmp_path / "saved"), label_names=LABELS)
    serve_ids = tf.saved_model.load(str(tmp_path / "saved")).signatures["serve_ids"]
    runner = runner_or_skip(tmp_path / "litert" / "model.tflite")
    for features in rows():
        want = serve_ids(**{key: tf.constant(value) for key, value in features.items()})
        np.testing.assert_allclose(runner(**features)["logits"], want["logits"].numpy(),
                                   atol=1e-4, rtol=0)


@pytest.mark.extras("ai_edge_litert")
def test_int8_is_smaller_and_close_to_float32(vocab, tmp_path):
    model = randomized(BertClassifier, 23, num_classes=3)
    for quantize in ("none", "int8"):
        litert.export_litert(
            model, Preprocessor(vocab, True, LENGTH), tmp_path / quantize, quantize=quantize)
    float_size = os.path.getsize(tmp_path / "none" / "model.tflite")
    int8_size = os.path.getsize(tmp_path / "int8" / "model.tflite")
    assert int8_size < 0.6 * float_size, (int8_size, float_size)
    config = json.loads((tmp_path / "int8" / "litert_config.json").read_text())
    assert config["quantize"] == "int8"
    float_runner = runner_or_skip(tmp_path / "none" / "model.tflite")
    int8_runner = runner_or_skip(tmp_path / "int8" / "model.tflite")
    differences = []
    for features in rows():
        want = float_runner(**features)["logits"]
        got = int8_runner(**features)["logits"]
        differences.append(np.abs(got - want).max())
        assert np.argmax(got) == np.argmax(want)
    assert 0 < max(differences) < INT8_TOLERANCE, differences


@pytest.mark.extras("ai_edge_litert")
def test_an_app_tokenizes_with_the_shipped_files(vocab, tmp_path):
    """What the docs' Python example does: the shipped vocab and settings make the row."""
    model = randomized(BertClassifier, 24, num_classes=3)
    litert.export_litert(
        model, Preprocessor(vocab, True, LENGTH, text_pair=True), tmp_path / "app",
        label_names=LABELS)
    config = json.loads((tmp_path / "app" / "litert_config.json").read_text())
    assert (config["text_pair"], config["problem_type"]) == (
        True, "single_label_classification")
    tokenizer = FullTokenizer(str(tmp_path / "app" / config["vocab_file"]),
                              do_lower_case=config["do_lower_case"])
    special = config["special_tokens"]
    pieces_a = tokenizer.convert_tokens_to_ids(tokenizer.tokenize("Hello world"))
    pieces_b = tokenizer.convert_tokens_to_ids(tokenizer.tokenize("the red houses"))
    ids = [special["[CLS]"]] + pieces_a + [special["[SEP]"]] + pieces_b + [special["[SEP]"]]
    assert ids == [2, 5, 6, 3, 7, 8, 9, 11, 3]  # hand-made from the vocab's order
    row = np.zeros((1, LENGTH), np.int32)
    row[0, :len(ids)] = ids
    features = {"input_ids": row, "input_mask": (row > 0).astype(np.int32),
                "segment_ids": np.array([[0] * 4 + [1] * 5 + [0] * 7], np.int32)}
    runner = runner_or_skip(tmp_path / "app" / config["model_file"])
    np.testing.assert_allclose(runner(**features)["logits"],
                               keras_outputs(model, features)["logits"], atol=1e-4, rtol=0)


def test_a_run_folder_exports_its_labels_and_problem_type(vocab, tmp_path):
    model = randomized(BertClassifier, 25, num_classes=3)
    run = write_run(tmp_path / "multi", model, vocab,
                    {"model_type": "classifier", "labels": LABELS,
                     "task": "classification/generic-multi-label"})
    export_checkpoint.export_from_checkpoint(export_options(
        run, tmp_path / "out", export_format="litert", quantize="int8"))
    config = json.loads((tmp_path / "out" / "litert_config.json").read_text())
    assert (config["label_names"], config["problem_type"], config["quantize"]) == (
        LABELS, "multi_label_classification", "int8")
    score = write_run(tmp_path / "stsb", randomized(BertClassifier, 28, num_classes=1), vocab,
                      {"model_type": "classifier", "labels": None, "task": "stsb"})
    export_checkpoint.export_from_checkpoint(export_options(
        score, tmp_path / "stsb_out", export_format="litert", is_regression=True))
    config = json.loads((tmp_path / "stsb_out" / "litert_config.json").read_text())
    assert (config["label_names"], config["problem_type"]) == (None, "regression")
    squad = write_run(tmp_path / "squad", randomized(BertSpanLabeler, 26), vocab,
                      {"model_type": "span_labeler", "labels": None, "task": "squad"})
    export_checkpoint.export_from_checkpoint(export_options(
        squad, tmp_path / "squad_out", export_format="litert", model_type="squad",
        max_query_length=5))
    config = json.loads((tmp_path / "squad_out" / "litert_config.json").read_text())
    assert (config["model_type"], config["max_query_length"]) == ("BertSpanLabeler", 5)


# --------------------------------------------------------------------- bad input
@pytest.fixture
def classifier_run(vocab, tmp_path):
    return write_run(tmp_path / "run", randomized(BertClassifier, 27, num_classes=3), vocab,
                     {"model_type": "classifier", "labels": LABELS, "task": "mrpc"})


@pytest.mark.parametrize("changes, error, message", [
    ({"export_format": "litert", "model_type": "multiple_choice"}, ValueError,
     r"a BertMultipleChoice cannot be exported as a LiteRT model: a multiple-choice model "
     r"scores \[B, C, S\] rows"),
    ({"export_format": "litert", "doc_stride": 4}, ValueError,
     r"long documents \(doc_stride\) cannot be exported as a LiteRT model: its windows are "
     r"cut from the raw text inside the graph"),
    ({"export_format": "litert", "model_type": "pretrainer"}, ValueError,
     r"a BertPretrainer cannot be exported as a LiteRT model"),
    ({"export_format": "saved_model", "quantize": "int8"}, ValueError,
     r"--quantize=int8 quantizes a LiteRT or ONNX model \(--export_format=litert or "
     r"onnx\); --export_format=saved_model writes float32"),
    ({"export_format": "huggingface", "quantize": "int8"}, ValueError,
     r"--quantize=int8 quantizes a LiteRT or ONNX model"),
    ({"export_format": "litert", "quantize": "int4"}, ValueError,
     r"quantize must be one of none, int8, got 'int4'"),
    ({"export_format": "litert", "versioned": True}, ValueError,
     r"--export_format=litert writes --export_dir itself"),
])
def test_what_litert_cannot_hold_is_refused_before_loading(changes, error, message,
                                                            classifier_run, tmp_path):
    with pytest.raises(error, match=message):
        export_checkpoint.export_from_checkpoint(export_options(
            classifier_run, tmp_path / "out", **changes))
    assert not (tmp_path / "out").exists()


def test_the_library_refuses_before_writing(vocab, tmp_path):
    model = tiny_model(BertClassifier, tiny_config(), 0, num_classes=3)
    with pytest.raises(ValueError, match=r"quantize must be one of none, int8, got 'fp16'"):
        litert.export_litert(
            model, Preprocessor(vocab, True, LENGTH), tmp_path / "a", quantize="fp16")
    with pytest.raises(ValueError, match=r"label_names has 2 names"):
        litert.export_litert(
            model, Preprocessor(vocab, True, LENGTH), tmp_path / "b", label_names=["x", "y"])
    with pytest.raises(ValueError, match=r"max_seq_length must be an integer in \[3, "
                                         r"max_position_embeddings=64\], got 65"):
        litert.export_litert(model, Preprocessor(vocab, True, 65), tmp_path / "c")
    with pytest.raises(ValueError, match=r"BertMultipleChoice cannot be exported as a LiteRT"):
        litert.check_model_class(BertMultipleChoice)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match=r"d is not empty \(holds keep.txt\)"):
        litert.export_litert(model, Preprocessor(vocab, True, LENGTH), tmp_path / "d")
    assert sorted(os.listdir(tmp_path)) == ["d"]
