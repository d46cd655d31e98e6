"""ONNX exports (bert-export-model --export_format=onnx): each model type's model.onnx
run by ONNX Runtime against the SavedModel's serve_ids (float32 within 1e-5, argmax
equal) and against the Keras model at other batch sizes and lengths, int8 against
float32, the files an app reads, and what ONNX cannot hold refused before anything is
written. Skipped without the `onnx` extra (tf2onnx, onnx, onnxruntime)."""

import json
import logging
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.models import BertClassifier, BertEncoder, BertSpanLabeler, BertTokenClassifier
from bert_tf.serving import export, onnx_export
from bert_tf.runs import export_checkpoint
from bert_tf.tasks.multiple_choice.model import BertMultipleChoice
from bert_tf.tasks.sentence_embeddings.model import SentenceEncoder
from bert_tf.text.preprocessor import Preprocessor
from harness import tiny_config, tiny_model
from test_export_formats import (LABELS, TAGS, export_options, randomized,  # noqa: F401
                                 vocab, write_run)
from test_export_litert import classifier_run  # noqa: F401  a run folder of a classifier

ort = pytest.importorskip("onnxruntime", reason="the onnx extra: pip install -e .[onnx]")
pytest.importorskip("tf2onnx", reason="the onnx extra: pip install -e .[onnx]")
pytestmark = pytest.mark.extras("onnx", "onnxruntime", "tf2onnx")

LENGTH = 16
# name: (model class, head arguments, exporter keyword arguments, output names)
MODELS = {
    "classifier": (BertClassifier, {"num_classes": 3}, {"label_names": LABELS}, ["logits"]),
    "multi_label": (BertClassifier, {"num_classes": 3},
                    {"label_names": LABELS, "multi_label": True}, ["logits"]),
    "tagger": (BertTokenClassifier, {"num_classes": 4}, {"label_names": TAGS}, ["logits"]),
    "span": (BertSpanLabeler, {}, {}, ["end_logits", "start_logits"]),
    "encoder": (BertEncoder, {}, {}, ["pooled_output", "sequence_output"]),
    "multiple_choice": (BertMultipleChoice, {}, {}, ["logits"]),
    "sentence_encoder": (SentenceEncoder, {}, {}, ["embedding"]),
}
MODEL_TYPES = {"classifier": "classifier", "multi_label": "classifier",
               "tagger": "token_classifier", "span": "span_labeler", "encoder": "encoder",
               "multiple_choice": "multiple_choice", "sentence_encoder": "sentence_encoder"}
# Largest |int8 - float32| logit allowed (LiteRT's int8 tolerance, tests/test_export_litert).
INT8_TOLERANCE = 0.05


def id_rows(batch, length, seed, choices=None):
    """int32 inputs [batch, (choices,) length]: rows of different lengths, pairs."""
    rng = np.random.default_rng(seed)
    shape = (batch,) + ((choices,) if choices else ()) + (length,)
    lengths = rng.integers(2, length + 1, shape[:-1])
    lengths.flat[0] = min(length, 4)  # the longest row need not be the first
    positions = np.arange(length)
    mask = (positions < lengths[..., None]).astype(np.int32)
    ids = rng.integers(5, 99, shape).astype(np.int32) * mask
    segments = ((positions >= lengths[..., None] // 2) & (mask > 0)).astype(np.int32)
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}


def session(folder):
    return ort.InferenceSession(os.path.join(folder, "model.onnx"),
                                providers=["CPUExecutionProvider"])


def run(sess, features):
    names = [output.name for output in sess.get_outputs()]
    return dict(zip(names, sess.run(names, features)))


def weight_bytes(path):
    """Bytes of the initializers (weights and constants) of the ONNX file at `path`."""
    import onnx  # pylint: disable=import-outside-toplevel
    from onnx import numpy_helper  # pylint: disable=import-outside-toplevel
    return sum(numpy_helper.to_array(tensor).nbytes
               for tensor in onnx.load(str(path)).graph.initializer)


def choices(name):
    return 3 if name == "multiple_choice" else None


@pytest.mark.parametrize("name", list(MODELS))
def test_onnx_equals_the_saved_model_serve_ids(name, vocab, tmp_path):
    model_cls, head, options, output_names = MODELS[name]
    model = randomized(model_cls, 31, **head)
    export.export_finetuned_model(model, Preprocessor(vocab, True, LENGTH),
                                  str(tmp_path / "saved"), MODEL_TYPES[name], **options)
    labels = options.get("label_names")
    folder = onnx_export.export_onnx(
        model, Preprocessor(vocab, True, LENGTH), tmp_path / "onnx", label_names=labels)
    assert sorted(os.listdir(folder)) == ["model.onnx", "onnx_config.json", "vocab.txt"]
    sess = session(folder)
    rank = 3 if choices(name) else 2
    assert [value.name for value in sess.get_inputs()] == [
        "input_ids", "input_mask", "segment_ids"]
    assert sess.get_inputs()[0].shape == list(onnx_export.DIMENSIONS[rank])
    assert sorted(output.name for output in sess.get_outputs()) == output_names
    serve_ids = tf.saved_model.load(str(tmp_path / "saved")).signatures["serve_ids"]
    features = id_rows(3, LENGTH, 1, choices(name))
    want = serve_ids(**{key: tf.constant(value) for key, value in features.items()})
    got = run(sess, features)
    for key in output_names:
        assert got[key].dtype == np.float32 and got[key].shape == want[key].shape, key
        np.testing.assert_allclose(got[key], want[key].numpy(), atol=1e-5, rtol=0,
                                   err_msg=key)
        np.testing.assert_array_equal(np.argmax(got[key], -1),
                                      np.argmax(want[key].numpy(), -1), err_msg=key)
    config = json.loads((tmp_path / "onnx" / "onnx_config.json").read_text())
    assert (config["model_file"], config["input_shape"], config["quantize"]) == (
        "model.onnx", list(onnx_export.DIMENSIONS[rank]), "none")
    assert config.get("label_names") == labels


@pytest.mark.parametrize("name", ["classifier", "tagger", "multiple_choice"])
def test_batch_and_length_are_free(name, vocab, tmp_path):
    """Other batch sizes and lengths than the export's: the Keras model's outputs; per-
    position outputs past the longest row are 0, as serve_ids pads them."""
    model_cls, head, options, _ = MODELS[name]
    model = randomized(model_cls, 32, **head)
    sess = session(onnx_export.export_onnx(
        model, Preprocessor(vocab, True, LENGTH), tmp_path / "onnx",
        label_names=options.get("label_names")))
    for batch, length in ((1, 5), (4, 11), (2, 40)):
        features = id_rows(batch, length, batch, choices(name))
        got = run(sess, features)["logits"]
        want = model(features, training=False)["logits"].numpy()
        if name == "tagger":
            longest = int(features["input_mask"].sum(-1).max())
            np.testing.assert_array_equal(got[:, longest:], 0)
            got, want = got[:, :longest], want[:, :longest]
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)


def test_int8_is_smaller_and_close_to_float32(vocab, tmp_path):
    model = randomized(BertClassifier, 33, num_classes=3)
    for quantize in ("none", "int8"):
        onnx_export.export_onnx(
            model, Preprocessor(vocab, True, LENGTH), tmp_path / quantize, quantize=quantize)
    # The weights' bytes (a tiny model's file is mostly its graph's node names).
    float_size, int8_size = (weight_bytes(tmp_path / name / "model.onnx")
                             for name in ("none", "int8"))
    assert int8_size < 0.6 * float_size, (int8_size, float_size)
    config = json.loads((tmp_path / "int8" / "onnx_config.json").read_text())
    assert config["quantize"] == "int8"
    assert sorted(os.listdir(tmp_path / "int8")) == [
        "model.onnx", "onnx_config.json", "vocab.txt"]
    features = id_rows(4, LENGTH, 3)
    want = run(session(tmp_path / "none"), features)["logits"]
    got = run(session(tmp_path / "int8"), features)["logits"]
    assert 0 < np.abs(got - want).max() < INT8_TOLERANCE
    np.testing.assert_array_equal(np.argmax(got, -1), np.argmax(want, -1))


@pytest.mark.parametrize("model_cls, head, settings, changes, expected", [
    (BertClassifier, {"num_classes": 3},
     {"model_type": "classifier", "labels": LABELS,
      "task": "classification/generic-multi-label"}, {"quantize": "int8"},
     {"label_names": LABELS, "problem_type": "multi_label_classification",
      "quantize": "int8"}),
    (BertSpanLabeler, {}, {"model_type": "span_labeler", "labels": None, "task": "squad"},
     {"model_type": "squad", "max_query_length": 5},
     {"model_type": "BertSpanLabeler", "max_query_length": 5, "quantize": "none"}),
])
def test_a_run_folder_exports_through_bert_export_model(model_cls, head, settings, changes,
                                                        expected, vocab, tmp_path):
    model = randomized(model_cls, 34, **head)
    run_folder = write_run(tmp_path / "run", model, vocab, settings)
    export_checkpoint.export_from_checkpoint(export_options(
        run_folder, tmp_path / "out", export_format="onnx", **changes))
    config = json.loads((tmp_path / "out" / "onnx_config.json").read_text())
    assert {key: config.get(key) for key in expected} == expected
    features = id_rows(2, LENGTH, 4)
    got = run(session(tmp_path / "out"), features)
    want = model(features, training=False)
    longest = int(features["input_mask"].sum(-1).max())
    atol = 1e-5 if changes.get("quantize") != "int8" else INT8_TOLERANCE
    for name in got:
        np.testing.assert_allclose(got[name][:, :longest], want[name].numpy()[:, :longest],
                                   atol=atol, err_msg=name)


# --------------------------------------------------------------------- bad input
@pytest.mark.parametrize("changes, message", [
    ({"export_format": "onnx", "model_type": "pretrainer"},
     r"a BertPretrainer cannot be exported as an ONNX model"),
    ({"export_format": "onnx", "doc_stride": 4},
     r"long documents \(doc_stride\) cannot be exported as an ONNX model"),
    ({"export_format": "onnx", "quantize": "int4"},
     r"quantize must be one of none, int8, got 'int4'"),
    ({"export_format": "onnx", "versioned": True},
     r"--export_format=onnx writes --export_dir itself"),
    ({"export_format": "saved_model", "quantize": "int8"},
     r"--quantize=int8 quantizes a LiteRT or ONNX model \(--export_format=litert or "
     r"onnx\); --export_format=saved_model writes float32 weights: leave --quantize out"),
])
def test_what_onnx_cannot_hold_is_refused_before_loading(changes, message, classifier_run,
                                                          tmp_path):
    with pytest.raises(ValueError, match=message):
        export_checkpoint.export_from_checkpoint(export_options(
            classifier_run, tmp_path / "out", **changes))
    assert not (tmp_path / "out").exists()


def test_the_library_refuses_before_writing(vocab, tmp_path):
    model = tiny_model(BertClassifier, tiny_config(), 0, num_classes=3)
    with pytest.raises(ValueError, match=r"label_names has 2 names"):
        onnx_export.export_onnx(
            model, Preprocessor(vocab, True, LENGTH), tmp_path / "a", label_names=["x", "y"])
    with pytest.raises(ValueError, match=r"max_seq_length must be an integer in \[3, "
                                         r"max_position_embeddings=64\], got 65"):
        onnx_export.export_onnx(model, Preprocessor(vocab, True, 65), tmp_path / "b")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match=r"c is not empty \(holds keep.txt\)"):
        onnx_export.export_onnx(model, Preprocessor(vocab, True, LENGTH), tmp_path / "c")
    assert sorted(os.listdir(tmp_path)) == ["c"]


def test_an_export_logs_no_table_initializer_warnings(vocab, tmp_path):
    """The tokenizer's eager lookup tables left None in TF1's table_initializer
    collection, which tf2onnx exports: TensorFlow warned "Issue encountered when
    serializing table_initializer ... 'NoneType' object has no attribute 'name'"."""
    lines = []

    class Recorder(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())

    recorder = Recorder()
    tf.get_logger().addHandler(recorder)
    try:
        onnx_export.export_onnx(tiny_model(BertEncoder, tiny_config(), 0),
                                Preprocessor(vocab, True, LENGTH), tmp_path / "onnx")
    finally:
        tf.get_logger().removeHandler(recorder)
    assert not [line for line in lines if "table_initializer" in line or "NoneType" in line]


def test_layer_norms_and_gelus_are_in_the_ops_runtimes_fuse(vocab, tmp_path):
    """Every LayerNorm one LayerNormalization (embeddings + 2 a layer); every GELU
    x / sqrt 2 -> Erf -> + 1 -> * x -> * 0.5 (ONNX Runtime's Gelu fusion)."""
    import onnx  # pylint: disable=import-outside-toplevel
    model = randomized(BertClassifier, 37, num_classes=3)
    folder = onnx_export.export_onnx(
        model, Preprocessor(vocab, True, LENGTH), tmp_path / "onnx")
    graph = onnx.load(os.path.join(folder, "model.onnx")).graph
    ops = [node.op_type for node in graph.node]
    assert ops.count("LayerNormalization") == 1 + 2 * tiny_config().num_hidden_layers
    assert "GlobalAveragePool" not in ops and "ReduceMean" not in ops
    producer = {name: node for node in graph.node for name in node.output}
    consumers = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    erfs = [node for node in graph.node if node.op_type == "Erf"]
    assert len(erfs) == tiny_config().num_hidden_layers
    for erf in erfs:
        assert producer[erf.input[0]].op_type == "Div"
        chain = [consumers[erf.output[0]][0]]
        for _ in range(2):
            chain.append(consumers[chain[-1].output[0]][0])
        assert [node.op_type for node in chain] == ["Add", "Mul", "Mul"]


def test_dense_layers_take_their_input_without_reshapes(vocab, tmp_path):
    """The attention output, intermediate and output Dense of every layer: a MatMul on
    [B, S, K] (no Reshape to [-1, K] and back)."""
    import onnx  # pylint: disable=import-outside-toplevel
    model = randomized(BertClassifier, 38, num_classes=3)
    folder = onnx_export.export_onnx(
        model, Preprocessor(vocab, True, LENGTH), tmp_path / "onnx")
    graph = onnx.load(os.path.join(folder, "model.onnx")).graph
    producer = {name: node for node in graph.node for name in node.output}
    direct = [node for node in graph.node if node.op_type == "MatMul"
              and producer[node.input[0]].op_type != "Reshape"]
    assert len(direct) >= 3 * tiny_config().num_hidden_layers
