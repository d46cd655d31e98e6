"""google-research TF1 checkpoints (read/write), Hugging Face safetensors, reports."""

import json

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.serving import huggingface
from bert_tf.weights import checkpoints
from bert_tf.weights.checkpoints import from_pretrained
from bert_tf.models import (BertClassifier, BertEncoder, BertPretrainer, BertSpanLabeler,
                            BertTokenClassifier)
from harness import tiny_config, tiny_model
import numpy_bert

TINY = tiny_config()

LAYER_NAMES = [
    "attention/output/LayerNorm/beta", "attention/output/LayerNorm/gamma",
    "attention/output/dense/bias", "attention/output/dense/kernel",
    "attention/self/key/bias", "attention/self/key/kernel",
    "attention/self/query/bias", "attention/self/query/kernel",
    "attention/self/value/bias", "attention/self/value/kernel",
    "intermediate/dense/bias", "intermediate/dense/kernel",
    "output/LayerNorm/beta", "output/LayerNorm/gamma",
    "output/dense/bias", "output/dense/kernel"]
ENCODER_NAMES = [
    "bert/embeddings/LayerNorm/beta", "bert/embeddings/LayerNorm/gamma",
    "bert/embeddings/position_embeddings", "bert/embeddings/token_type_embeddings",
    "bert/embeddings/word_embeddings", "bert/pooler/dense/bias",
    "bert/pooler/dense/kernel"] + [
    f"bert/encoder/layer_{n}/{name}" for n in range(2) for name in LAYER_NAMES]
HEAD_NAMES = ["cls/predictions/output_bias", "cls/predictions/transform/LayerNorm/beta",
              "cls/predictions/transform/LayerNorm/gamma",
              "cls/predictions/transform/dense/bias",
              "cls/predictions/transform/dense/kernel", "cls/seq_relationship/output_bias",
              "cls/seq_relationship/output_weights"]


def make_inputs(seq=9):
    rng = np.random.default_rng(0)
    mask = np.ones((2, seq), "int32")
    mask[1, seq - 3:] = 0
    return {"input_ids": rng.integers(1, 99, (2, seq)).astype("int32"),
            "input_mask": mask, "segment_ids": np.zeros((2, seq), "int32"),
            "masked_lm_positions": np.array([[1, 2], [0, 4]], "int32")}


def randomized_pretrainer(seed=0):
    model = tiny_model(BertPretrainer, TINY, seed)
    rng = np.random.default_rng(seed)
    for var in model.weights:
        var.assign(var.numpy() + rng.normal(0, 0.05, var.shape))
    return model


def test_tf1_round_trip_names_layout_and_outputs(tmp_path):
    model = randomized_pretrainer()
    prefix = str(tmp_path / "bert_model.ckpt")
    checkpoints.save_google_checkpoint(model, prefix, write_config=True)
    reader = tf.train.load_checkpoint(prefix)
    shapes = reader.get_variable_to_shape_map()
    assert sorted(shapes) == sorted(ENCODER_NAMES + HEAD_NAMES)
    assert shapes["cls/seq_relationship/output_weights"] == [2, 32]
    assert shapes["bert/encoder/layer_1/intermediate/dense/kernel"] == [32, 37]
    np.testing.assert_array_equal(
        reader.get_tensor("bert/encoder/layer_1/attention/self/query/kernel"),
        model.encoder.transformer_layers[1].self_attention.query.kernel.numpy())
    np.testing.assert_array_equal(
        reader.get_tensor("cls/seq_relationship/output_weights"),
        model.next_sentence.dense.kernel.numpy().T)
    assert not list(tmp_path.glob("*.tmp-*"))

    restored, report = from_pretrained(BertPretrainer, str(tmp_path), return_report=True)
    assert sorted(report.loaded) == sorted(ENCODER_NAMES + HEAD_NAMES)
    assert report.newly_initialized == report.unmatched == []
    inputs = make_inputs()
    for key, value in model(inputs).items():
        np.testing.assert_array_equal(restored(inputs)[key], value)

    # The file's weights, run through the independent numpy forward pass.
    weights = {name: reader.get_tensor(name) for name in shapes}
    sequence, pooled, _ = numpy_bert.encoder_forward(
        weights, 2, 4, inputs["input_ids"], inputs["input_mask"], inputs["segment_ids"])
    mlm, nsp = numpy_bert.pretraining_heads(weights, sequence, pooled,
                                            inputs["masked_lm_positions"])
    np.testing.assert_allclose(restored(inputs)["masked_lm_logits"], mlm, atol=1e-5)
    np.testing.assert_allclose(restored(inputs)["next_sentence_logits"], nsp, atol=1e-5)


def write_tf1_checkpoint(prefix, values):
    names = sorted(values)
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(values[n]) for n in names])


def test_report_skips_optimizer_state_and_lists_unmatched(tmp_path):
    source = randomized_pretrainer()
    values = {name: (var.numpy().T if transposed else var.numpy())
              for name, (var, transposed) in checkpoints.google_variable_map(source).items()
              if name.startswith("bert/")}
    values["bert/pooler/dense/kernel/adam_m"] = values["bert/pooler/dense/kernel"]
    values["bert/pooler/dense/kernel/adam_v"] = values["bert/pooler/dense/kernel"]
    values["global_step"] = np.array(7, np.int64)
    values["cls/something/extra"] = np.zeros(3, np.float32)
    prefix = str(tmp_path / "model.ckpt-7")
    write_tf1_checkpoint(prefix, values)
    (tmp_path / "bert_config.json").write_text(TINY.to_json_string())

    model, report = from_pretrained(BertPretrainer, prefix, return_report=True)
    assert sorted(report.loaded) == sorted(ENCODER_NAMES)
    assert sorted(report.newly_initialized) == sorted(HEAD_NAMES)
    assert report.unmatched == ["cls/something/extra"]
    assert sorted(report.skipped) == ["bert/pooler/dense/kernel/adam_m",
                                      "bert/pooler/dense/kernel/adam_v", "global_step"]
    assert "7 newly initialised" in report.summary()
    np.testing.assert_array_equal(model.encoder.pooler.dense.kernel.numpy(),
                                  source.encoder.pooler.dense.kernel.numpy())

    classifier, report = from_pretrained(BertClassifier, prefix, config=TINY, num_classes=3,
                                         return_report=True)
    assert report.newly_initialized == ["output_weights", "output_bias"]
    assert classifier.head.dense.kernel.shape == (32, 3)


def test_shape_mismatch_names_variable_and_shapes(tmp_path):
    prefix = str(tmp_path / "bad.ckpt")
    write_tf1_checkpoint(prefix, {"bert/embeddings/word_embeddings":
                                  np.zeros((100, 32), np.float32)})
    model = BertEncoder(TINY)
    with pytest.raises(ValueError, match=r"bert/embeddings/word_embeddings: checkpoint "
                                         r"shape \(100, 32\).*needs \(99, 32\)"):
        checkpoints.load_google_checkpoint(model, prefix)
    with pytest.raises(FileNotFoundError, match="missing.ckpt.index"):
        checkpoints.load_google_checkpoint(model, str(tmp_path / "missing.ckpt"))
    with pytest.raises(FileNotFoundError, match="bert_config.json"):
        from_pretrained(BertEncoder, prefix)


def test_task_heads_use_run_classifier_and_run_squad_names(tmp_path):
    for model, names in [
            (BertClassifier(BertEncoder(TINY), num_classes=3), ["output_bias",
                                                                "output_weights"]),
            (BertTokenClassifier(BertEncoder(TINY), num_classes=4), ["output_bias",
                                                                     "output_weights"]),
            (BertSpanLabeler(BertEncoder(TINY)), ["cls/squad/output_bias",
                                                  "cls/squad/output_weights"])]:
        prefix = str(tmp_path / model.name)
        checkpoints.save_google_checkpoint(model, prefix)
        shapes = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
        assert sorted(set(shapes) - set(ENCODER_NAMES)) == names
        head = {"num_classes": model.num_classes} if hasattr(model, "num_classes") else {}
        restored, report = from_pretrained(type(model), prefix, config=TINY.to_dict(),
                                           return_report=True, **head)
        assert not report.newly_initialized and not report.unmatched
        inputs = make_inputs()
        for got, want in zip(tf.nest.flatten(restored(inputs)), tf.nest.flatten(model(inputs))):
            np.testing.assert_array_equal(got, want)


def hf_state_dict(model):
    """The model's weights under Hugging Face BertForPreTraining names (torch layout), as
    the exporter writes them, plus the tied decoder copy and the position_ids buffer that
    torch's own files hold (the loader skips both)."""
    state = huggingface.hf_state_dict(model)
    state["cls.predictions.decoder.weight"] = state["bert.embeddings.word_embeddings.weight"]
    state["bert.embeddings.position_ids"] = np.arange(64, dtype=np.int64)[None]
    return state


def test_hugging_face_safetensors_folder(tmp_path):
    from safetensors.numpy import save_file
    source = randomized_pretrainer(seed=3)
    save_file(hf_state_dict(source), str(tmp_path / "model.safetensors"))
    hf_config = {**TINY.to_dict(), "hidden_act": "gelu", "model_type": "bert",
                 "layer_norm_eps": 1e-12, "architectures": ["BertForPreTraining"]}
    (tmp_path / "config.json").write_text(json.dumps(hf_config))

    model, report = from_pretrained(BertPretrainer, str(tmp_path), return_report=True)
    assert model.config == TINY
    assert sorted(report.loaded) == sorted(ENCODER_NAMES + HEAD_NAMES)
    assert not report.newly_initialized and not report.unmatched
    assert sorted(report.skipped) == ["bert.embeddings.position_ids",
                                      "cls.predictions.decoder.weight"]
    inputs = make_inputs()
    for key, value in source(inputs).items():
        np.testing.assert_allclose(model(inputs)[key], value, atol=1e-6)


@pytest.mark.slow
def test_real_google_checkpoint_loads_completely(shared_data_dir):
    folder = shared_data_dir / "checkpoints" / "uncased_L-6_H-384_A-12"
    if not folder.is_dir():
        pytest.skip(f"{folder} not found")
    encoder, report = from_pretrained(BertEncoder, str(folder), return_report=True)
    assert report.unmatched == [] and report.newly_initialized == []
    assert len(report.loaded) == 5 + 16 * 6 + 2
    pretrainer, report = from_pretrained(BertPretrainer, str(folder), return_report=True)
    assert report.unmatched == [] and sorted(report.newly_initialized) == sorted(HEAD_NAMES)
    # [CLS] hello world [SEP] in the released vocabulary, checked against numpy.
    reader = tf.train.load_checkpoint(str(folder / "bert_model.ckpt"))
    weights = {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}
    ids = np.array([[101, 7592, 2088, 102, 0]], "int32")
    mask = np.array([[1, 1, 1, 1, 0]], "int32")
    segments = np.zeros_like(ids)
    sequence, pooled, _ = numpy_bert.encoder_forward(weights, 6, 12, ids, mask, segments)
    outputs = encoder({"input_ids": ids, "input_mask": mask, "segment_ids": segments})
    np.testing.assert_allclose(outputs["sequence_output"], sequence, atol=1e-4)
    np.testing.assert_allclose(outputs["pooled_output"], pooled, atol=1e-4)


def write_hf_folder(folder, model, rename=None, **config_changes):
    """A Hugging Face folder of `model` (names optionally rewritten by `rename`)."""
    from safetensors.numpy import save_file
    state = hf_state_dict(model)
    if rename:
        state = {rename(name): value for name, value in state.items()}
    folder.mkdir(parents=True, exist_ok=True)
    save_file(state, str(folder / "model.safetensors"))
    config = {**model.config.to_dict(), "model_type": "bert", **config_changes}
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


def test_a_checkpoint_of_another_model_is_refused_unless_allowed(tmp_path):
    # RoBERTa-style names translate to nothing: every encoder weight would start random.
    folder = write_hf_folder(tmp_path / "roberta", randomized_pretrainer(seed=3),
                             rename=lambda name: name.replace("bert.", "roberta.", 1))
    with pytest.raises(ValueError, match=r"roberta.*is not a checkpoint of this BERT: "
                       r"37 of the model's 39 encoder variables are not in it .* and "
                       r"32 more\); 40 of its tensors .*would be dropped.*--allow_random_encoder"):
        from_pretrained(BertClassifier, folder, num_classes=2)
    model, report = from_pretrained(BertClassifier, folder, num_classes=2,
                                    allow_random_encoder=True, return_report=True)
    assert not report.loaded and "roberta.embeddings.word_embeddings.weight" in \
        report.summary()  # the HF names are in the logged summary too


def test_a_checkpoint_with_more_layers_than_the_config_is_refused(tmp_path):
    deeper = BertPretrainer.from_encoder(BertEncoder(tiny_config(num_hidden_layers=3)))
    deeper.build()
    folder = write_hf_folder(tmp_path / "deeper", deeper, num_hidden_layers=2)
    with pytest.raises(ValueError, match=r"16 of its tensors fit no variable of the model "
                       r"and would be dropped \(bert/encoder/layer_2/"):
        from_pretrained(BertEncoder, folder)


@pytest.mark.parametrize("change, message", [
    ({"model_type": "roberta"}, r"model_type 'roberta' is not a BERT"),
    ({"position_embedding_type": "relative_key"},
     r"position_embedding_type 'relative_key' is not supported"),
])
def test_hugging_face_config_keys_this_bert_cannot_compute_are_refused(tmp_path, change,
                                                                      message):
    folder = write_hf_folder(tmp_path / "hf", randomized_pretrainer(), **change)
    with pytest.raises(ValueError, match=message):
        from_pretrained(BertEncoder, folder)


def test_the_encoder_of_a_training_checkpoint_loads_into_another_head(tmp_path):
    # A fine-tuning output_dir (object-based checkpoint) is a valid init_checkpoint: its
    # encoder loads whole, its 3-class head is not read.
    trained = tiny_model(BertClassifier, TINY, seed=5, num_classes=3)
    tf.train.Checkpoint(model=trained).write(str(tmp_path / "run" / "ckpt-1"))
    (tmp_path / "run" / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\n')
    (tmp_path / "run" / "bert_config.json").write_text(TINY.to_json_string())
    model, report = from_pretrained(BertClassifier, str(tmp_path / "run"), num_classes=2,
                                    return_report=True)
    assert sorted(report.loaded) == sorted(ENCODER_NAMES)
    assert report.newly_initialized == ["output_weights", "output_bias"]
    inputs = make_inputs()
    np.testing.assert_array_equal(model.encoder(inputs)["pooled_output"],
                                  trained.encoder(inputs)["pooled_output"])


def test_load_messages_list_a_few_names_and_a_count():
    report = checkpoints.LoadReport(source="x", newly_initialized=[f"v{i}" for i in range(39)])
    assert "v19 and 19 more" in report.summary() and "v20" not in report.summary()
