"""Hugging Face and keras-hub exports: the weight names both ways, the folders read back
by bert_tf, by transformers (PyTorch CPU: the `huggingface-test` extra, or the Python that
BERT_TF_REFERENCE_PYTHON names) and by keras-hub (the `keras-hub` extra), and bad input
refused before anything is written."""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from safetensors import safe_open

from bert_tf.models import (BertClassifier, BertEncoder, BertPretrainer, BertSpanLabeler,
                            BertTokenClassifier)
from bert_tf.serving import huggingface
from bert_tf.serving import keras_hub as keras_hub_export
from bert_tf.runs import export_checkpoint
from bert_tf.runs.export_checkpoint import ExportOptions
from bert_tf.text.tokenization import FullTokenizer
from bert_tf.weights import checkpoints
from bert_tf.weights.hugging_face import google_to_hf_name, hf_to_google_name
from bert_tf.text.preprocessor import Preprocessor
from harness import SPECIAL_TOKENS, tiny_config, tiny_model, write_released_checkpoint
from harness import write_vocab

WORDS = ["hello", "world", "the", "red", "house", "cafe", "##s", "un", "##aff", "##able",
         "is", "blue", "."]
LABELS = ["neg", "neutral", "pos"]
TAGS = ["O", "B-PER", "I-PER", "B-LOC"]
TEXTS = ["Hello world, the red houses!", "Unaffable CAFÉ is blue."]
# (model class, head arguments, transformers class of the export)
MODELS = {"encoder": (BertEncoder, {}, "BertModel"),
          "pretrainer": (BertPretrainer, {}, "BertForPreTraining"),
          "masked_lm": (BertPretrainer, {"next_sentence": False}, "BertForMaskedLM"),
          "classifier": (BertClassifier, {"num_classes": 3},
                         "BertForSequenceClassification"),
          "tagger": (BertTokenClassifier, {"num_classes": 4}, "BertForTokenClassification"),
          "span": (BertSpanLabeler, {}, "BertForQuestionAnswering")}
REFERENCE_PYTHON = os.environ.get("BERT_TF_REFERENCE_PYTHON", sys.executable)
HAVE_KERAS_HUB = importlib.util.find_spec("keras_hub") is not None


def randomized(model_cls, seed, config=None, **head):
    """A tiny model whose weights are far from their initial values (a wrong or
    transposed weight shows in the outputs)."""
    model = tiny_model(model_cls, config or tiny_config(), seed, **head)
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        variable.assign(variable.numpy() + rng.normal(0, 0.2, variable.shape))
    return model


def make_inputs():
    rng = np.random.default_rng(1)
    mask = np.ones((2, 9), "int32")
    mask[1, 6:] = 0
    segments = np.zeros((2, 9), "int32")
    segments[:, 4:] = 1
    return {"input_ids": rng.integers(1, 99, (2, 9)).astype("int32") * mask,
            "input_mask": mask, "segment_ids": segments * mask,
            "masked_lm_positions": np.array([[1, 3, 7], [2, 4, 5]], "int32")}


def outputs(model, inputs):
    """The model's outputs as numpy, the encoder's list of layers left out."""
    return {key: np.asarray(value) for key, value in model(inputs, training=False).items()
            if key != "encoder_outputs"}


def padded_ids(tokenizer, text, length=16):
    """[CLS] text [SEP] as our FullTokenizer makes it, padded with 0 to `length`."""
    ids = tokenizer.convert_tokens_to_ids(["[CLS]"] + tokenizer.tokenize(text) + ["[SEP]"])
    return ids + [0] * (length - len(ids))


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
    return write_vocab(tmp_path_factory.mktemp("vocab") / "vocab.txt",
                       SPECIAL_TOKENS + WORDS, size=99)


# ------------------------------------------------------------------------ the names
@pytest.mark.parametrize("google, hf, transpose", [
    ("bert/embeddings/word_embeddings", "bert.embeddings.word_embeddings.weight", False),
    ("bert/embeddings/LayerNorm/gamma", "bert.embeddings.LayerNorm.weight", False),
    ("bert/encoder/layer_1/attention/self/query/kernel",
     "bert.encoder.layer.1.attention.self.query.weight", True),
    ("bert/encoder/layer_0/output/LayerNorm/beta",
     "bert.encoder.layer.0.output.LayerNorm.bias", False),
    ("bert/pooler/dense/bias", "bert.pooler.dense.bias", False),
    ("cls/predictions/transform/dense/kernel", "cls.predictions.transform.dense.weight", True),
    ("cls/predictions/output_bias", "cls.predictions.bias", False),
    ("cls/seq_relationship/output_weights", "cls.seq_relationship.weight", False),
    ("output_weights", "classifier.weight", False),
    ("cls/squad/output_bias", "qa_outputs.bias", False),
])
def test_google_names_map_to_the_names_transformers_saves_and_back(google, hf, transpose):
    assert google_to_hf_name(google) == (hf, transpose)
    assert hf_to_google_name(hf) == (google, transpose, False)


def test_every_weight_of_every_model_maps_both_ways():
    assert google_to_hf_name("bert/pooler/dense/kernel", "") == ("pooler.dense.weight", True)
    for name, (model_cls, head, _) in MODELS.items():
        model = tiny_model(model_cls, tiny_config(), 0, **head)
        prefix = "" if name == "encoder" else "bert."
        for google in checkpoints.google_variable_map(model):
            hf, transpose = google_to_hf_name(google, prefix)
            assert hf_to_google_name(hf) == (google, transpose, False), google
    with pytest.raises(ValueError, match="cls/multiple_choice/output_weights.*no Hugging"):
        google_to_hf_name("cls/multiple_choice/output_weights")


# ------------------------------------------------------------- Hugging Face, bert_tf
@pytest.mark.parametrize("name", list(MODELS))
def test_huggingface_folder_reads_back_with_from_pretrained(name, vocab, tmp_path):
    model_cls, head, architecture = MODELS[name]
    model = randomized(model_cls, 3, **head)
    labels = {"classifier": LABELS, "tagger": TAGS}.get(name)
    folder = huggingface.export_huggingface(
        model, Preprocessor(vocab, True), tmp_path / name, label_names=labels)
    assert sorted(os.listdir(folder)) == ["config.json", "model.safetensors",
                                          "special_tokens_map.json", "tokenizer_config.json",
                                          "vocab.txt"]
    config = json.loads((tmp_path / name / "config.json").read_text())
    assert config["architectures"] == [architecture] and config["model_type"] == "bert"
    assert (config["hidden_act"], config["layer_norm_eps"]) == ("gelu", 1e-12)
    if labels:
        assert config["id2label"] == {str(i): label for i, label in enumerate(labels)}
        assert config["label2id"] == {label: i for i, label in enumerate(labels)}
    with safe_open(os.path.join(folder, "model.safetensors"), framework="numpy") as file:
        assert file.metadata() == {"format": "pt"}
        names = set(file.keys())
    # As transformers saves these classes: no pooler where the class has none.
    assert ("bert.pooler.dense.weight" in names) == (name in ("pretrainer", "classifier"))
    assert ("pooler.dense.weight" in names) == (name == "encoder")
    tokenizer_config = json.loads((tmp_path / name / "tokenizer_config.json").read_text())
    assert tokenizer_config["do_lower_case"] is True
    assert tokenizer_config["mask_token"] == "[MASK]"

    back = checkpoints.from_pretrained(model_cls, folder, **head)
    inputs = make_inputs()
    want = outputs(model, inputs)
    got = outputs(back, inputs)
    if name in ("masked_lm", "tagger", "span"):  # no pooler there: it starts random
        want.pop("pooled_output", None)
        got.pop("pooled_output", None)
    assert sorted(got) == sorted(want)
    for key, value in want.items():
        np.testing.assert_array_equal(got[key], value, err_msg=key)


# --------------------------------------------------- from a run folder (Python API)
def write_run(folder, model, vocab, settings):
    """A fine-tuning output_dir: ckpt-7, bert_config.json, vocab.txt, run_settings.json."""
    tf.train.Checkpoint(model=model, global_step=tf.Variable(7, dtype=tf.int64)).write(
        str(folder / "ckpt-7"))
    (folder / "checkpoint").write_text('model_checkpoint_path: "ckpt-7"\n')
    model.config.to_json_file(str(folder / "bert_config.json"))
    (folder / "vocab.txt").write_text(open(vocab, encoding="utf-8").read())
    (folder / "run_settings.json").write_text(json.dumps(settings))
    return str(folder)


def export_options(init_checkpoint, export_dir, **changes):
    return ExportOptions(**{"export_format": "huggingface", "model_type": "classifier",
                            "max_seq_length": 16,
                            "init_checkpoint": str(init_checkpoint),
                            "export_dir": str(export_dir), **changes})


def read_config(folder):
    return json.loads((folder / "config.json").read_text())


def test_a_run_folder_exports_its_labels_and_problem_type(vocab, tmp_path):
    multi = randomized(BertClassifier, 4, num_classes=3)
    run = write_run(tmp_path / "multi", multi, vocab,
                    {"model_type": "classifier", "labels": LABELS,
                     "task": "classification/generic-multi-label"})
    export_checkpoint.export_from_checkpoint(export_options(run, tmp_path / "hf_multi"))
    config = read_config(tmp_path / "hf_multi")
    assert config["problem_type"] == "multi_label_classification"
    assert config["id2label"] == {"0": "neg", "1": "neutral", "2": "pos"}
    back = checkpoints.from_pretrained(BertClassifier, str(tmp_path / "hf_multi"),
                                       num_classes=3)
    np.testing.assert_array_equal(outputs(back, make_inputs())["logits"],
                                  outputs(multi, make_inputs())["logits"])

    score = randomized(BertClassifier, 5, num_classes=1)
    run = write_run(tmp_path / "stsb", score, vocab, {"model_type": "classifier",
                                                      "labels": None, "task": "stsb"})
    export_checkpoint.export_from_checkpoint(export_options(run, tmp_path / "hf_stsb",
                                                            is_regression=True))
    config = read_config(tmp_path / "hf_stsb")
    assert (config["problem_type"], config["id2label"]) == ("regression", {"0": "LABEL_0"})


def test_pretrainer_exports_the_heads_the_checkpoint_holds(vocab, tmp_path):
    for folder, model in (("nsp", randomized(BertPretrainer, 6)),
                          ("mlm", randomized(BertPretrainer, 7, next_sentence=False))):
        write_released_checkpoint(tmp_path / folder, model)
        export_checkpoint.export_from_checkpoint(export_options(
            tmp_path / folder, tmp_path / f"hf_{folder}", model_type="pretrainer",
            vocab_file=vocab))
        architecture = read_config(tmp_path / f"hf_{folder}")["architectures"]
        assert architecture == ["BertForPreTraining" if folder == "nsp" else "BertForMaskedLM"]
        back = checkpoints.from_pretrained(BertPretrainer, str(tmp_path / f"hf_{folder}"),
                                           next_sentence=folder == "nsp")
        np.testing.assert_array_equal(outputs(back, make_inputs())["masked_lm_logits"],
                                      outputs(model, make_inputs())["masked_lm_logits"])
    write_released_checkpoint(tmp_path / "encoder_only", randomized(BertEncoder, 8))
    with pytest.raises(ValueError, match=r"encoder_only holds no masked-LM head .*"
                                         r"--model_type=encoder"):
        export_checkpoint.export_from_checkpoint(export_options(
            tmp_path / "encoder_only", tmp_path / "hf_none", model_type="pretrainer",
            vocab_file=vocab))
    assert not (tmp_path / "hf_none").exists()


# --------------------------------------------------------------------- bad input
@pytest.fixture
def classifier_run(vocab, tmp_path):
    return write_run(tmp_path / "run", randomized(BertClassifier, 9, num_classes=3), vocab,
                     {"model_type": "classifier", "labels": LABELS, "task": "mrpc"})


@pytest.mark.parametrize("export_format", [
    "huggingface", pytest.param("keras_hub", marks=pytest.mark.extras("keras_hub"))])
def test_a_folder_that_is_not_empty_is_kept_unless_overwrite(export_format, classifier_run,
                                                             tmp_path):
    if export_format == "keras_hub" and not HAVE_KERAS_HUB:
        pytest.skip("keras-hub is not installed (pip install -e .[keras-hub])")
    target = tmp_path / "out"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    options = export_options(classifier_run, target, export_format=export_format)
    with pytest.raises(FileExistsError, match=r"out is not empty \(holds notes.txt\); pass "
                                              r"--overwrite to replace it"):
        export_checkpoint.export_from_checkpoint(options)
    assert os.listdir(target) == ["notes.txt"]
    options.overwrite = True
    export_checkpoint.export_from_checkpoint(options)
    assert "notes.txt" not in os.listdir(target) and "config.json" in os.listdir(target)
    assert not [name for name in os.listdir(tmp_path) if ".tmp-" in name]


@pytest.mark.parametrize("changes, message", [
    ({"export_format": "keras_hub", "model_type": "ner"},
     r"BertTokenClassifier cannot be exported as a keras-hub preset: keras-hub has no "
     r"BERT token-classification task"),
    ({"export_format": "keras_hub", "model_type": "squad"},
     r"keras-hub has no BERT question-answering task"),
    ({"export_format": "keras_hub", "model_type": "pretrainer"},
     r"BertMaskedLM has no next-sentence head"),
    ({"versioned": True}, r"--versioned writes the next version .*--export_format="
                          r"huggingface writes --export_dir itself"),
    ({"export_format": "saved_model", "model_type": "pretrainer"},
     r"--model_type=pretrainer exports with --export_format=huggingface"),
    ({"export_format": "coreml"}, r"--export_format=coreml is not an export format; "
                                  r"expected one of saved_model, huggingface, .*onnx"),
])
def test_what_a_format_cannot_hold_is_refused_before_loading(changes, message,
                                                              classifier_run, tmp_path):
    options = export_options(classifier_run, tmp_path / "out", **changes)
    with pytest.raises(ValueError, match=message):
        export_checkpoint.export_from_checkpoint(options)
    assert not (tmp_path / "out").exists()


def test_a_model_without_a_class_on_the_other_side_is_refused():
    other = type("BertOther", (), {})
    with pytest.raises(ValueError, match=r"a BertOther has no Hugging Face export; the "
                                         r"format takes BertEncoder, BertPretrainer, "):
        huggingface.check_model_class(other)
    with pytest.raises(ValueError, match=r"a BertOther cannot be exported as a keras-hub "
                                         r"preset: keras-hub's BERT presets hold a "):
        keras_hub_export.check_model_class(other)


def test_a_missing_keras_hub_names_the_extra(classifier_run, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "keras_hub", None)  # import keras_hub now fails
    options = export_options(classifier_run, tmp_path / "out", export_format="keras_hub")
    with pytest.raises(ImportError, match=r"install the keras-hub extra \(`pip install "
                                          r"bert_tf\[keras-hub\]`"):
        export_checkpoint.export_from_checkpoint(options)


def test_keras_hub_refuses_an_activation_it_does_not_compute(vocab, tmp_path):
    model = tiny_model(BertEncoder, tiny_config(hidden_act="relu"), 0)
    with pytest.raises(ValueError, match=r"hidden_act 'relu' cannot be exported as a "
                                         r"keras-hub preset: .*tanh approximation"):
        keras_hub_export.export_keras_hub(
            model, Preprocessor(vocab, True, 16), tmp_path / "out")


# ------------------------------------------------------------------- transformers
REFERENCE_SCRIPT = r"""
import json, sys
import numpy as np
import torch
import transformers
request = json.load(open(sys.argv[1]))
inputs = {key: torch.tensor(value) for key, value in request["inputs"].items()}
out = {}
for name, (auto_class, folder) in request["models"].items():
    model = getattr(transformers, auto_class).from_pretrained(folder).eval()
    out[name + "/class"] = np.array(type(model).__name__)
    with torch.no_grad():
        result = model(**inputs)
    for key, value in result.items():
        if isinstance(value, torch.Tensor):
            out[f"{name}/{key}"] = value.numpy()
tokenizer = transformers.AutoTokenizer.from_pretrained(request["tokenizer"])
out["token_ids"] = np.array(tokenizer(request["texts"], padding="max_length",
                                      max_length=16)["input_ids"])
np.savez(sys.argv[2], **out)
"""
AUTO_CLASSES = {"encoder": "AutoModel", "pretrainer": "AutoModelForPreTraining",
                "masked_lm": "AutoModelForMaskedLM",
                "classifier": "AutoModelForSequenceClassification",
                "tagger": "AutoModelForTokenClassification",
                "span": "AutoModelForQuestionAnswering"}


def reference_python_or_skip(modules=("torch", "transformers")):
    """The Python that has `modules` (torch and transformers), or a skip that says how to
    get one."""
    probe = ("import importlib.util, sys; sys.exit(any(importlib.util.find_spec(m) is None "
             f"for m in {tuple(modules)!r}))")
    if subprocess.run([REFERENCE_PYTHON, "-c", probe], check=False).returncode != 0:
        pytest.skip(f"{', '.join(modules)} are not installed for {REFERENCE_PYTHON}: "
                    "pip install -e .[huggingface-test], or set BERT_TF_REFERENCE_PYTHON "
                    "to a Python that has them")
    return REFERENCE_PYTHON


def test_transformers_loads_every_export_with_our_logits(vocab, tmp_path):
    python = reference_python_or_skip()
    inputs = make_inputs()
    models, ours = {}, {}
    for name, (model_cls, head, _) in MODELS.items():
        model = randomized(model_cls, 11, **head)
        labels = {"classifier": LABELS, "tagger": TAGS}.get(name)
        huggingface.export_huggingface(
            model, Preprocessor(vocab, True), tmp_path / name, label_names=labels)
        models[name] = (AUTO_CLASSES[name], str(tmp_path / name))
        ours[name] = outputs(model, inputs)
    request = {"models": models, "tokenizer": str(tmp_path / "classifier"), "texts": TEXTS,
               "inputs": {"input_ids": inputs["input_ids"].tolist(),
                          "attention_mask": inputs["input_mask"].tolist(),
                          "token_type_ids": inputs["segment_ids"].tolist()}}
    (tmp_path / "request.json").write_text(json.dumps(request))
    result = subprocess.run([python, "-c", REFERENCE_SCRIPT, str(tmp_path / "request.json"),
                             str(tmp_path / "out.npz")], capture_output=True, text=True,
                            timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    theirs = dict(np.load(tmp_path / "out.npz"))
    for name, (_, _, architecture) in MODELS.items():
        assert str(theirs[f"{name}/class"]) == architecture
    mask = inputs["input_mask"].astype(bool)
    positions = inputs["masked_lm_positions"]

    def close(got, want):
        np.testing.assert_allclose(got, want, atol=1e-4, rtol=0)

    close(theirs["encoder/last_hidden_state"][mask], ours["encoder"]["sequence_output"][mask])
    close(theirs["encoder/pooler_output"], ours["encoder"]["pooled_output"])
    close(np.take_along_axis(theirs["pretrainer/prediction_logits"], positions[..., None], 1),
          ours["pretrainer"]["masked_lm_logits"])
    close(theirs["pretrainer/seq_relationship_logits"],
          ours["pretrainer"]["next_sentence_logits"])
    close(np.take_along_axis(theirs["masked_lm/logits"], positions[..., None], 1),
          ours["masked_lm"]["masked_lm_logits"])
    close(theirs["classifier/logits"], ours["classifier"]["logits"])
    close(theirs["tagger/logits"][mask], ours["tagger"]["logits"][mask])
    for key in ("start_logits", "end_logits"):
        close(theirs[f"span/{key}"][mask], ours["span"][key][mask])
    tokenizer = FullTokenizer(vocab, do_lower_case=True)
    for text, ids in zip(TEXTS, theirs["token_ids"]):
        assert ids.tolist() == padded_ids(tokenizer, text), text


# ---------------------------------------------------------------------- keras-hub
@pytest.fixture(scope="module")
def keras_hub_module():
    if not HAVE_KERAS_HUB:
        pytest.skip("keras-hub is not installed: pip install -e .[keras-hub]")
    return keras_hub_export.import_keras_hub()


def keras_hub_inputs(inputs):
    return {"token_ids": inputs["input_ids"], "padding_mask": inputs["input_mask"],
            "segment_ids": inputs["segment_ids"]}


@pytest.mark.extras("keras_hub")
def test_keras_hub_presets_load_with_our_outputs(keras_hub_module, vocab, tmp_path):
    config = tiny_config(hidden_act="gelu_tanh")  # what keras-hub's BertBackbone computes
    encoder = randomized(BertEncoder, 12, config)
    classifier = randomized(BertClassifier, 13, config, num_classes=3)
    keras_hub_export.export_keras_hub(
        encoder, Preprocessor(vocab, True, 16), tmp_path / "encoder")
    keras_hub_export.export_keras_hub(
        classifier, Preprocessor(vocab, True, 16), tmp_path / "classifier")
    inputs = make_inputs()
    mask = inputs["input_mask"].astype(bool)
    backbone = keras_hub_module.models.BertBackbone.from_preset(str(tmp_path / "encoder"))
    theirs = backbone(keras_hub_inputs(inputs))
    ours = outputs(encoder, inputs)
    np.testing.assert_allclose(np.asarray(theirs["sequence_output"])[mask],
                               ours["sequence_output"][mask], atol=1e-5, rtol=0)
    np.testing.assert_allclose(theirs["pooled_output"], ours["pooled_output"], atol=1e-5,
                               rtol=0)
    task = keras_hub_module.models.BertTextClassifier.from_preset(str(tmp_path / "classifier"))
    np.testing.assert_allclose(task(keras_hub_inputs(inputs)), outputs(classifier, inputs)[
        "logits"], atol=1e-5, rtol=0)
    # Raw text through the preset's own preprocessor: our tokenizer's ids, our logits.
    tokenizer = FullTokenizer(vocab, do_lower_case=True)
    features = task.preprocessor(TEXTS)
    for text, ids in zip(TEXTS, np.asarray(features["token_ids"])):
        assert ids.tolist() == padded_ids(tokenizer, text), text
    np.testing.assert_allclose(task.predict(TEXTS, verbose=0), outputs(classifier, {
        "input_ids": np.asarray(features["token_ids"]),
        "input_mask": np.asarray(features["padding_mask"]).astype("int32"),
        "segment_ids": np.asarray(features["segment_ids"])})["logits"], atol=1e-5, rtol=0)
    # An encoder preset starts any keras-hub BERT task, at the exported sequence length.
    new_task = keras_hub_module.models.BertTextClassifier.from_preset(
        str(tmp_path / "encoder"), num_classes=2)
    assert new_task.preprocessor.sequence_length == 16


@pytest.mark.extras("keras_hub")
def test_keras_hub_gelu_model_exports_with_the_difference_logged(keras_hub_module, vocab,
                                                                 tmp_path, caplog):
    encoder = randomized(BertEncoder, 14)  # hidden_act=gelu, the exact GELU
    keras_hub_export.export_keras_hub(
        encoder, Preprocessor(vocab, True, 16), tmp_path / "encoder")
    logged = [r.getMessage() for r in caplog.records if "tanh approximation" in r.getMessage()]
    assert len(logged) == 1 and "differ by up to" in logged[0]
    logged_difference = float(logged[0].rsplit("up to ", 1)[1].split()[0])
    backbone = keras_hub_module.models.BertBackbone.from_preset(str(tmp_path / "encoder"))
    assert keras_hub_export.output_difference(encoder, backbone, 16) == pytest.approx(
        logged_difference, rel=0.01)
    assert 1e-6 < logged_difference < 0.1
