"""ELECTRA and Hugging Face transformers: the Electra classes' names both ways, the
exports (an ELECTRA pre-training model as ElectraForPreTraining + its generator as
ElectraForMaskedLM in generator/; a model with embedding_size as ElectraModel,
ElectraForMaskedLM, ElectraForTokenClassification, ElectraForQuestionAnswering) read
back by bert_tf, transformers' Electra folders loaded as init, bad input refused; and,
with torch and transformers (the `huggingface-test` extra, or the Python that
BERT_TF_REFERENCE_PYTHON names), transformers' outputs, losses and one optimizer step
equal to ours (the reference side: bench/reference_electra.py)."""

import dataclasses
import importlib.util
import json
import logging
import os
import pathlib

import keras
import numpy as np
import pytest
from safetensors import safe_open

from bert_tf.models import (BertClassifier, BertEncoder, BertPretrainer, BertSpanLabeler,
                            BertTokenClassifier)
from bert_tf.serving import huggingface
from bert_tf.runs import export_checkpoint, registry
from bert_tf.tasks.electra.model import ElectraPretrainer, generator_config
from bert_tf.tasks.electra.serving import load_electra
from bert_tf.runs.export_checkpoint import ExportOptions
from bert_tf.weights import checkpoints
from bert_tf.weights.hugging_face import (google_to_hf_name, hf_to_google_name,
                                          read_safetensors)
from bert_tf.text.preprocessor import Preprocessor
from harness import SPECIAL_TOKENS, tiny_config, tiny_model, write_vocab
from test_electra import tiny_options, write_tiny_inputs
from test_export_formats import make_inputs, outputs, randomized, reference_python_or_skip

BENCH_CHECK = pathlib.Path(__file__).resolve().parents[1] / "bench" / \
    "electra_reference_check.py"
NO_DROPOUT = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
# The discriminator: tiny_config (vocab 99, hidden 32, intermediate 37, 2 layers), with
# embeddings as wide as it (the generator of hidden 16 projects them) or 24 wide.
VARIANTS = {"shared_width": {}, "embedding_24": {"embedding_size": 24}}
# (model class, head arguments, transformers class) of a config with embedding_size.
NARROW_MODELS = {"encoder": (BertEncoder, {}, "ElectraModel"),
                 "masked_lm": (BertPretrainer, {"next_sentence": False},
                               "ElectraForMaskedLM"),
                 "tagger": (BertTokenClassifier, {"num_classes": 4},
                            "ElectraForTokenClassification"),
                 "span": (BertSpanLabeler, {}, "ElectraForQuestionAnswering")}
AUTO_CLASSES = {"encoder": "AutoModel", "masked_lm": "AutoModelForMaskedLM",
                "tagger": "AutoModelForTokenClassification",
                "span": "AutoModelForQuestionAnswering"}
TAGS = ["O", "B-PER", "I-PER", "B-LOC"]
FOLDER_FILES = ["config.json", "model.safetensors", "special_tokens_map.json",
                "tokenizer_config.json", "vocab.txt"]


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
    return write_vocab(tmp_path_factory.mktemp("vocab") / "vocab.txt", SPECIAL_TOKENS,
                       size=99)


def narrow_config(**changes):
    """tiny_config with embeddings of width 24 projected to its hidden 32."""
    return dataclasses.replace(tiny_config(**changes), embedding_size=24)


def electra_model(variant, seed=0, **changes):
    """A built ElectraPretrainer (generator of hidden 16) whose weights are far from their
    initial values, so that a wrong or transposed weight shows."""
    config = tiny_config(**{**NO_DROPOUT, **changes})
    config = dataclasses.replace(config, **VARIANTS[variant])
    keras.utils.set_random_seed(seed)
    model = ElectraPretrainer(BertEncoder(config), generator_config(config, 0.5))
    model.build()
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        variable.assign(variable.numpy() + rng.normal(0, 0.2, variable.shape))
    return model


def electra_batch(seed=0):
    """Create_pretraining_data's features of 3 rows (padding, an empty slot) and the
    replacements a generator drew (one equal to the original: not replaced)."""
    rng = np.random.default_rng(seed)
    mask = np.ones((3, 12), np.int32)
    mask[1, 9:] = 0
    mask[2, 7:] = 0
    positions = np.array([[1, 4, 7], [2, 3, 8], [5, 6, 0]], np.int32)
    weights = np.array([[1, 1, 1], [1, 1, 1], [1, 1, 0]], np.float32)
    targets = rng.integers(5, 99, positions.shape).astype(np.int32)
    ids = rng.integers(5, 99, mask.shape).astype(np.int32) * mask
    for row, slot in zip(*np.nonzero(weights)):
        ids[row, positions[row, slot]] = 4  # [MASK]
    segments = np.zeros_like(mask)
    segments[:, 6:] = 1
    replacements = rng.integers(5, 99, positions.shape).astype(np.int32)
    replacements[0, 1] = targets[0, 1]
    return ({"input_ids": ids, "input_mask": mask, "segment_ids": segments * mask,
             "masked_lm_positions": positions, "masked_lm_ids": targets,
             "masked_lm_weights": weights}, replacements)


def electra_outputs(model, batch, replacements):
    return {key: np.asarray(value) for key, value in
            model(batch, training=False, replacements=replacements).items()}


def safetensor_names(folder):
    with safe_open(os.path.join(folder, "model.safetensors"), framework="numpy") as file:
        return set(file.keys())


# ------------------------------------------------------------------------ the names
@pytest.mark.parametrize("google, hf, transpose", [
    ("bert/embeddings_project/kernel", "electra.embeddings_project.weight", True),
    ("bert/encoder/layer_1/attention/self/key/bias",
     "electra.encoder.layer.1.attention.self.key.bias", False),
    ("discriminator_predictions/dense/kernel", "discriminator_predictions.dense.weight",
     True),
    ("discriminator_predictions/dense_1/bias",
     "discriminator_predictions.dense_prediction.bias", False),
    ("cls/predictions/transform/dense/kernel", "generator_predictions.dense.weight", True),
    ("cls/predictions/transform/LayerNorm/gamma", "generator_predictions.LayerNorm.weight",
     False),
    ("cls/predictions/output_bias", "generator_lm_head.bias", False),
    ("output_weights", "classifier.weight", False),
    ("cls/squad/output_bias", "qa_outputs.bias", False),
])
def test_google_names_map_to_the_names_transformers_electra_saves_and_back(google, hf,
                                                                          transpose):
    assert google_to_hf_name(google, "electra.", electra=True) == (hf, transpose)
    assert hf_to_google_name(hf) == (google, transpose, False)
    bare = hf[len("electra."):] if hf.startswith("electra.") else hf
    assert hf_to_google_name(bare) == (google, transpose, False)  # ElectraModel's


@pytest.mark.parametrize("hf_name", ["generator_lm_head.weight",
                                     "electra.embeddings.position_ids"])
def test_tied_copies_and_buffers_are_skipped(hf_name):
    assert hf_to_google_name(hf_name) == (None, False, True)


# --------------------------------------------------- ELECTRA pre-training, exported
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_electra_export_is_a_folder_pair_that_loads_back_whole(variant, vocab, tmp_path):
    model = electra_model(variant, 1)
    folder = huggingface.export_huggingface(model, Preprocessor(vocab, True), tmp_path / "hf")
    assert sorted(os.listdir(folder)) == sorted(FOLDER_FILES + ["generator"])
    assert sorted(os.listdir(os.path.join(folder, "generator"))) == FOLDER_FILES
    width = model.config.embedding_width
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert (config["architectures"], config["model_type"]) == (["ElectraForPreTraining"],
                                                                "electra")
    assert (config["embedding_size"], config["hidden_size"]) == (width, 32)
    generator = json.loads((tmp_path / "hf" / "generator" / "config.json").read_text())
    assert (generator["architectures"], generator["model_type"]) == (["ElectraForMaskedLM"],
                                                                     "electra")
    assert (generator["embedding_size"], generator["hidden_size"]) == (width, 16)
    names = safetensor_names(folder)
    assert {name.split(".")[0] for name in names} == {"electra",
                                                      "discriminator_predictions"}
    assert ("electra.embeddings_project.weight" in names) == (variant == "embedding_24")
    generator_names = safetensor_names(os.path.join(folder, "generator"))
    assert {name.split(".")[0] for name in generator_names} == {
        "electra", "generator_predictions", "generator_lm_head"}
    assert "electra.embeddings_project.weight" in generator_names  # width -> 16
    assert not any("pooler" in name for name in names | generator_names)

    back = load_electra(folder, checkpoints.load_config(
        os.path.join(folder, "config.json")))
    ours = {v.path: v.numpy() for v in model.weights if "pooler" not in v.path}
    theirs = {v.path: v.numpy() for v in back.weights if "pooler" not in v.path}
    assert sorted(theirs) == sorted(ours)
    for path, value in ours.items():
        np.testing.assert_array_equal(theirs[path], value, err_msg=path)
    batch, replacements = electra_batch()
    want, got = (electra_outputs(m, batch, replacements) for m in (model, back))
    for key, value in want.items():
        np.testing.assert_array_equal(got[key], value, err_msg=key)


def test_an_electra_folder_loads_into_every_bert_model(vocab, tmp_path):
    model = electra_model("embedding_24", 2)
    folder = huggingface.export_huggingface(model, Preprocessor(vocab, True), tmp_path / "hf")
    inputs = make_inputs()
    want = outputs(model.encoder, inputs)["sequence_output"]
    for model_cls, head in ((BertEncoder, {}), (BertClassifier, {"num_classes": 3}),
                            (BertTokenClassifier, {"num_classes": 4}),
                            (BertSpanLabeler, {}),
                            (BertPretrainer, {"next_sentence": False})):
        loaded, report = checkpoints.from_pretrained(model_cls, folder, return_report=True,
                                                     **head)
        assert loaded.config == model.config, model_cls.__name__
        got = outputs(loaded.encoder if model_cls is not BertEncoder else loaded, inputs)
        np.testing.assert_array_equal(got["sequence_output"], want)
        assert all(name.startswith("discriminator_predictions/")
                   for name in report.unmatched), report.unmatched
    # The generator's folder is a masked LM: its head loads into a BertPretrainer.
    generator = checkpoints.from_pretrained(
        BertPretrainer, os.path.join(folder, "generator"), next_sentence=False)
    inputs = dict(inputs, masked_lm_positions=inputs["masked_lm_positions"])
    np.testing.assert_array_equal(outputs(generator, inputs)["masked_lm_logits"],
                                  outputs(model.generator, inputs)["masked_lm_logits"])


def test_an_electra_run_exports_with_no_other_flag_and_reexports_the_same(tmp_path,
                                                                          caplog):
    write_tiny_inputs(tmp_path)
    options = tiny_options(tmp_path, vocab_file=write_vocab(tmp_path / "vocab.txt",
                                                            SPECIAL_TOKENS, size=99))
    registry.run("electra", options)
    run = options.output_dir
    caplog.clear()
    caplog.set_level(logging.INFO, logger="absl")
    first = export_checkpoint.export_from_checkpoint(ExportOptions(
        init_checkpoint=run, export_dir=str(tmp_path / "hf"), export_format="huggingface"))
    # One report of the whole load: the generator is loaded, not "newly initialised".
    assert "newly initialised" not in caplog.text
    assert "encoder bert/*: 39 variables loaded" in caplog.text
    assert "generator generator/*: loaded" in caplog.text
    model = load_electra(run, checkpoints.load_config(
        os.path.join(run, "bert_config.json")))
    contents = huggingface.folder_contents(model)
    for subfolder, (config, state) in contents.items():
        path = os.path.join(first, subfolder)
        assert json.loads(open(os.path.join(path, "config.json")).read()) == json.loads(
            json.dumps(config))
        stored = read_safetensors(os.path.join(path, "model.safetensors"))
        assert sorted(stored) == sorted(state)
        for name, value in state.items():
            np.testing.assert_array_equal(stored[name], value, err_msg=name)
    # The export is an init_checkpoint too: exported again, the same files.
    again = export_checkpoint.export_from_checkpoint(ExportOptions(
        init_checkpoint=first, export_dir=str(tmp_path / "again"), model_type="electra",
        export_format="huggingface"))
    for subfolder in contents:
        for name in ("model.safetensors", "config.json", "vocab.txt"):
            assert (pathlib.Path(again, subfolder, name).read_bytes()
                    == pathlib.Path(first, subfolder, name).read_bytes()), name
    with pytest.raises(ValueError, match="model_type=encoder"):
        export_checkpoint.export_from_checkpoint(ExportOptions(
            init_checkpoint=run, export_dir=str(tmp_path / "sm")))


def test_an_electra_model_type_needs_the_generator_and_both_heads(vocab, tmp_path):
    model = electra_model("shared_width", 3)
    folder = huggingface.export_huggingface(model, Preprocessor(vocab, True), tmp_path / "hf")
    config = checkpoints.load_config(os.path.join(folder, "config.json"))
    os.rename(os.path.join(folder, "generator"), tmp_path / "elsewhere")
    with pytest.raises(FileNotFoundError, match=r"no bert_config.json or config.json in "
                                                r".*generator"):
        load_electra(folder, config)
    bert = tiny_model(BertPretrainer, model.config, 4, next_sentence=False)
    bert_folder = huggingface.export_huggingface(
        bert, Preprocessor(vocab, True), tmp_path / "bert")
    os.rename(tmp_path / "elsewhere", os.path.join(bert_folder, "generator"))
    with pytest.raises(ValueError, match=r"holds no whole ELECTRA model "
                                         r"\(discriminator_predictions/dense/kernel"):
        load_electra(bert_folder, config)


# ----------------------------------------------- a config with embedding_size, exported
@pytest.mark.parametrize("name", list(NARROW_MODELS))
def test_a_narrow_embedding_model_exports_as_transformers_electra_class(name, vocab,
                                                                        tmp_path):
    model_cls, head, architecture = NARROW_MODELS[name]
    model = randomized(model_cls, 5, narrow_config(), **head)
    folder = huggingface.export_huggingface(
        model, Preprocessor(vocab, True), tmp_path / name,
        label_names=TAGS if name == "tagger" else None)
    config = json.loads((tmp_path / name / "config.json").read_text())
    assert config["architectures"] == [architecture]
    assert (config["model_type"], config["embedding_size"]) == ("electra", 24)
    names = safetensor_names(folder)
    prefix = "" if name == "encoder" else "electra."
    assert f"{prefix}embeddings_project.weight" in names
    assert not any("pooler" in hf_name for hf_name in names)
    back = checkpoints.from_pretrained(model_cls, folder, **head)
    assert back.config.embedding_size == 24
    inputs = make_inputs()
    want, got = outputs(model, inputs), outputs(back, inputs)
    for key in set(want) - {"pooled_output"}:  # no pooler in an Electra class
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)


def test_a_plain_config_still_exports_as_bert(vocab, tmp_path):
    model = tiny_model(BertTokenClassifier, tiny_config(), 6, num_classes=4)
    folder = huggingface.export_huggingface(
        model, Preprocessor(vocab, True), tmp_path / "bert", label_names=TAGS)
    config = json.loads((tmp_path / "bert" / "config.json").read_text())
    assert (config["architectures"], config["model_type"]) == (
        ["BertForTokenClassification"], "bert")
    assert "embedding_size" not in config
    assert all(name.startswith(("bert.", "classifier."))
               for name in safetensor_names(folder))


@pytest.mark.parametrize("build, message", [
    (lambda: tiny_model(BertClassifier, narrow_config(), 0, num_classes=2),
     r"a BertClassifier whose config has embedding_size=24 \(hidden_size 32\) has no "
     r"Hugging Face export: .*ElectraForSequenceClassification head is dense \+ gelu \+ "
     r"out_proj.*export_format=saved_model or litert"),
    (lambda: tiny_model(BertPretrainer, narrow_config(), 0),
     r"ElectraForMaskedLM has no next-sentence head"),
    (lambda: tiny_model(BertPretrainer, narrow_config(hidden_act="relu"),
                        0, next_sentence=False),
     r"ElectraForMaskedLM head applies gelu whatever hidden_act says; this one applies "
     r"hidden_act='relu'"),
    (lambda: electra_model("shared_width", hidden_act="relu"),
     r"ElectraPretrainer's generator \(written to generator/\), a BertPretrainer, has no "
     r"transformers Electra class: .*applies gelu"),
])
def test_what_transformers_electra_cannot_compute_is_refused(build, message, vocab,
                                                             tmp_path):
    with pytest.raises(ValueError, match=message):
        huggingface.export_huggingface(build(), Preprocessor(vocab, True), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_an_electra_config_json_reads_with_transformers_defaults(tmp_path):
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "electra",
                                                    "vocab_size": 99}))
    config = checkpoints.load_config(str(folder / "config.json"))
    assert (config.embedding_size, config.hidden_size, config.num_attention_heads,
            config.intermediate_size, config.type_vocab_size) == (128, 256, 4, 1024, 2)
    (folder / "config.json").write_text(json.dumps({
        "model_type": "electra", "vocab_size": 99, "hidden_size": 64,
        "embedding_size": 64}))
    assert checkpoints.load_config(str(folder / "config.json")).embedding_size is None
    (folder / "config.json").write_text(json.dumps({"model_type": "xlnet"}))
    with pytest.raises(ValueError, match=r"model_type 'xlnet' is not a BERT \(expected one "
                                         r"of 'bert', 'electra'\)"):
        checkpoints.load_config(str(folder / "config.json"))


# ------------------------------------------------------------------- transformers
def reference_check():
    """bench/electra_reference_check.py, whose helpers run the comparison."""
    spec = importlib.util.spec_from_file_location("electra_reference_check", BENCH_CHECK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def close(got, want, what, atol=1e-5):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=atol, rtol=0,
                               err_msg=what)


def test_transformers_loads_every_narrow_embedding_export_with_our_outputs(vocab,
                                                                           tmp_path):
    python = reference_python_or_skip()
    inputs = make_inputs()
    models, ours = {}, {}
    for name, (model_cls, head, _) in NARROW_MODELS.items():
        model = randomized(model_cls, 7, narrow_config(), **head)
        huggingface.export_huggingface(
            model, Preprocessor(vocab, True), tmp_path / name,
            label_names=TAGS if name == "tagger" else None)
        models[name] = (AUTO_CLASSES[name], str(tmp_path / name))
        ours[name] = outputs(model, inputs)
    theirs = reference_check().run_reference(python, {"models": models, "inputs": {
        "input_ids": inputs["input_ids"].tolist(),
        "attention_mask": inputs["input_mask"].tolist(),
        "token_type_ids": inputs["segment_ids"].tolist()}}, tmp_path)
    for name, (_, _, architecture) in NARROW_MODELS.items():
        assert theirs[f"{name}/class"] == architecture
    mask = inputs["input_mask"].astype(bool)
    positions = inputs["masked_lm_positions"][..., None]
    close(np.asarray(theirs["encoder/last_hidden_state"])[mask],
          ours["encoder"]["sequence_output"][mask], "ElectraModel")
    close(np.take_along_axis(np.asarray(theirs["masked_lm/logits"]), positions, 1),
          ours["masked_lm"]["masked_lm_logits"], "ElectraForMaskedLM")
    close(np.asarray(theirs["tagger/logits"])[mask], ours["tagger"]["logits"][mask],
          "ElectraForTokenClassification")
    for key in ("start_logits", "end_logits"):
        close(np.asarray(theirs[f"span/{key}"])[mask], ours["span"][key][mask], key)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_losses_and_one_step_equal_transformers_electra(variant, vocab, tmp_path):
    python = reference_python_or_skip()
    check = reference_check()
    model = electra_model(variant, 8)
    folder = huggingface.export_huggingface(model, Preprocessor(vocab, True), tmp_path / "hf")
    batch, replacements = electra_batch(1)
    before = check.exported_state(model)
    watch = check.watched(before)
    learning_rate, disc_weight = 0.05, 50.0
    losses, ours = check.our_step(model, batch, replacements, learning_rate, disc_weight)
    theirs = check.run_reference(python, check.pretraining_request(
        folder, batch, replacements, learning_rate, disc_weight, watch), tmp_path)
    theirs = theirs["pretraining"]
    assert theirs["replaced"] == ours["replaced"].tolist()
    assert 0 < np.sum(ours["replaced"]) < np.sum(batch["masked_lm_weights"])
    close(theirs["masked_lm_logits"], ours["masked_lm_logits"], "masked_lm_logits")
    real = batch["input_mask"].astype(bool)
    close(np.asarray(theirs["discriminator_logits"])[real],
          ours["discriminator_logits"][real], "discriminator_logits")
    for key in ("masked_lm_loss", "discriminator_loss"):
        close(theirs[key], losses[key], key)
    close(theirs["total_loss"], losses["total_loss"], "total_loss", atol=disc_weight * 1e-5)
    after = check.exported_state(model)
    assert len(watch) >= 10
    for name in watch:
        assert np.abs(after[name] - before[name]).max() > 1e-4, f"{name} did not move"
        close(theirs["after"][name], after[name], name)
