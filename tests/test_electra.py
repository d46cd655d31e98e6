"""ELECTRA pre-training (bert_tf/tasks/electra): the model, its losses and sampling, the
run and its folders, the checkpoint names, the pre-training features and bad input."""

import dataclasses
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.configs import BertConfig
from bert_tf.models import BertClassifier, BertEncoder, BertPretrainer
from bert_tf.runs import registry
from bert_tf.tasks.electra.options import ElectraOptions
from bert_tf.tasks.electra.model import (ElectraPretrainer, electra_losses,
                                         generator_config)
from bert_tf.train import warm_start
from bert_tf.weights import checkpoints
from bert_tf.text.preprocessor import Preprocessor
from harness import (RUNNER_OVERRIDES, SPECIAL_TOKENS, tiny_config, tiny_model,
                     write_records, write_released_checkpoint, write_unmasked_records,
                     write_vocab)


def _config(**overrides):
    return tiny_config(**{**RUNNER_OVERRIDES, **overrides})


def _model(config=None, fraction=0.5, seed=0):
    config = config or _config()
    tf.keras.utils.set_random_seed(seed)
    model = ElectraPretrainer(BertEncoder(config), generator_config(config, fraction))
    model.build()
    return model


def _batch(seed=0, batch=3, length=12, vocab=99):
    rng = np.random.default_rng(seed)
    positions = np.array([[1, 4, 7], [2, 3, 0], [5, 0, 0]], np.int32)[:batch]
    weights = np.array([[1, 1, 1], [1, 1, 0], [1, 0, 0]], np.float32)[:batch]
    mask = np.ones((batch, length), np.int32)
    mask[1, 9:] = 0
    return {"input_ids": rng.integers(5, vocab, (batch, length)).astype(np.int32),
            "input_mask": mask, "segment_ids": np.zeros((batch, length), np.int32),
            "masked_lm_positions": positions,
            "masked_lm_ids": rng.integers(5, vocab, positions.shape).astype(np.int32),
            "masked_lm_weights": weights}


def _options(tmp_path, **overrides):
    values = dict(do_train=True, bert_config=_config(), input_file=str(tmp_path / "records" / "*"),
                  output_dir=str(tmp_path / "out"), max_seq_length=16,
                  max_predictions_per_seq=3, train_batch_size=32, eval_batch_size=32,
                  learning_rate=1e-2, num_train_steps=60, num_warmup_steps=6,
                  save_checkpoints_steps=30, steps_per_loop=10, seed=1,
                  generator_hidden_size=0.5)
    values.update(overrides)
    return ElectraOptions(**values)


def write_tiny_inputs(tmp_path):
    """The records of `tiny_options` (shared with test_commands and test_run_config)."""
    write_records(tmp_path / "records", 1, 40)


def tiny_options(tmp_path, **changes):
    """A short ELECTRA run (shared with test_commands and test_run_config)."""
    config_file = tmp_path / "bert_config.json"
    _config().to_json_file(str(config_file))
    return _options(tmp_path, **{"bert_config": None, "bert_config_file": str(config_file),
                                 "num_train_steps": 4, "num_warmup_steps": 1,
                                 "save_checkpoints_steps": 4, "steps_per_loop": 2,
                                 "train_batch_size": 8, **changes})


# --------------------------------------------------------------------------- the model
def test_generator_sizes_follow_the_paper_and_share_the_embeddings():
    base = BertConfig(vocab_size=99, hidden_size=768, num_attention_heads=12)
    small = BertConfig(vocab_size=99, hidden_size=256, num_attention_heads=4,
                       intermediate_size=1024, embedding_size=128)
    assert (generator_config(base).hidden_size, generator_config(base).num_attention_heads,
            generator_config(base).intermediate_size) == (256, 4, 1024)
    assert generator_config(small).hidden_size == 64
    assert generator_config(small).embedding_size == 128  # the shared tables' width
    assert generator_config(base).embedding_size == 768
    model = _model()
    assert model.generator.encoder.embeddings is model.encoder.embeddings
    ids = [id(v) for v in model.trainable_variables]
    assert len(ids) == len(set(ids))
    assert not any("pooler" in v.path for v in model.trainable_variables)


def test_losses_equal_an_independent_computation():
    model = _model()
    batch = _batch()
    outputs = model(batch, training=False)
    losses = {k: float(v) for k, v in electra_losses(batch, outputs, 50.0, 1.0).items()}
    logits = outputs["masked_lm_logits"].numpy().astype(np.float64)
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    picked = np.take_along_axis(log_probs, batch["masked_lm_ids"][..., None], -1)[..., 0]
    weights = batch["masked_lm_weights"]
    mlm = -(picked * weights).sum() / weights.sum()
    # The discriminator's labels: 1 where the corrupted input differs from the original.
    original, corrupted = batch["input_ids"].copy(), batch["input_ids"].copy()
    sampled = outputs["sampled_ids"].numpy()
    for row, slot in zip(*np.nonzero(weights)):
        original[row, batch["masked_lm_positions"][row, slot]] = batch["masked_lm_ids"][row, slot]
        corrupted[row, batch["masked_lm_positions"][row, slot]] = sampled[row, slot]
    labels = (original != corrupted).astype(np.float64)
    np.testing.assert_array_equal(outputs["replaced"].numpy(), labels)
    z = outputs["discriminator_logits"].numpy().astype(np.float64)
    per_token = np.maximum(z, 0) - z * labels + np.log1p(np.exp(-np.abs(z)))
    rtd = (per_token * batch["input_mask"]).sum() / batch["input_mask"].sum()
    assert losses["masked_lm_loss"] == pytest.approx(mlm, rel=1e-5)
    assert losses["discriminator_loss"] == pytest.approx(rtd, rel=1e-5)
    assert losses["total_loss"] == pytest.approx(mlm + 50 * rtd, rel=1e-5)


def test_replacements_follow_the_generator_distribution_without_gradient():
    model = _model()
    probs = np.array([0.6, 0.3, 0.1])
    logits = tf.constant(np.log(np.tile(probs, (4000, 5, 1))), tf.float32)
    drawn = model.sample(logits).numpy().ravel()
    np.testing.assert_allclose(np.bincount(drawn, minlength=3) / drawn.size, probs, atol=0.01)
    model.temperature = 0.25  # sharper: p^4 normalised
    drawn = model.sample(logits).numpy().ravel()
    sharp = probs ** 4 / (probs ** 4).sum()
    np.testing.assert_allclose(np.bincount(drawn, minlength=3) / drawn.size, sharp, atol=0.01)
    model.temperature = 1.0
    batch = _batch()
    with tf.GradientTape() as tape:
        rtd = electra_losses(batch, model(batch, training=True))["discriminator_loss"]
    generator_only = [v for v in model.generator.trainable_variables
                      if not v.path.startswith(model.encoder.embeddings.path)
                      and "embeddings/" not in v.path]
    assert generator_only
    grads = tape.gradient(rtd, generator_only)
    assert all(g is None or not np.any(g.numpy()) for g in grads)


def test_a_narrow_embedding_is_projected_and_round_trips(tmp_path):
    config = dataclasses.replace(_config(), embedding_size=16)
    assert config.to_dict()["embedding_size"] == 16
    assert "embedding_size" not in dataclasses.replace(config, embedding_size=32).to_dict()
    model = _model(config, fraction=0.25)
    assert model.encoder.embeddings.embedding_table.shape == (99, 16)
    assert model.encoder.embeddings_project.kernel.shape == (16, 32)
    assert model.generator.encoder.embeddings_project.kernel.shape == (16, 8)
    assert model.generator.masked_lm.transform.kernel.shape == (8, 16)  # H_g -> E
    batch = _batch()
    expected = model.encoder(batch)["sequence_output"].numpy()
    write_released_checkpoint(tmp_path / "disc", model.encoder)
    assert json.loads((tmp_path / "disc" / "bert_config.json").read_text())[
        "embedding_size"] == 16
    classifier = checkpoints.from_pretrained(BertClassifier, str(tmp_path / "disc"),
                                             num_classes=2)
    np.testing.assert_allclose(classifier.encoder(batch)["sequence_output"].numpy(),
                               expected, atol=1e-6)


def test_google_electra_names_round_trip_and_load_into_a_bert(tmp_path):
    model = _model(seed=3)
    prefix = str(tmp_path / "electra_model.ckpt")
    checkpoints.save_google_checkpoint(model, prefix, encoder_scope=checkpoints.ELECTRA_SCOPE)
    names = set(tf.train.load_checkpoint(prefix).get_variable_to_shape_map())
    for name in ("electra/embeddings/word_embeddings", "electra/encoder/layer_1/output/dense/kernel",
                 "generator/encoder/layer_0/attention/self/query/kernel",
                 "generator/embeddings_project/kernel", "generator_predictions/output_bias",
                 "generator_predictions/LayerNorm/gamma", "discriminator_predictions/dense/kernel",
                 "discriminator_predictions/dense_1/bias"):
        assert name in names, name
    assert not any(name.startswith(("bert/", "generator/embeddings/")) for name in names)
    fresh = _model(seed=4)
    report = checkpoints.load_google_checkpoint(fresh, prefix)
    assert not report.newly_initialized and not report.unmatched
    batch = _batch()
    replacements = np.full((3, 3), 7, np.int32)
    for key in ("masked_lm_logits", "discriminator_logits"):
        np.testing.assert_allclose(fresh(batch, replacements=replacements)[key].numpy(),
                                   model(batch, replacements=replacements)[key].numpy(),
                                   atol=1e-6)
    # A BERT classifier starts from the discriminator (google's ELECTRA release layout).
    classifier = tiny_model(BertClassifier, _config(), 9, num_classes=2)
    report = checkpoints.load_pretrained_weights(classifier, prefix)
    assert not report.fresh_encoder()
    np.testing.assert_array_equal(classifier.encoder.embeddings.embedding_table.numpy(),
                                  model.encoder.embeddings.embedding_table.numpy())


def test_continued_pretraining_starts_from_a_bert_or_an_electra(tmp_path):
    bert = tiny_model(BertPretrainer, _config(), 5)
    write_released_checkpoint(tmp_path / "bert", bert)
    model = _model(seed=6)
    report = warm_start.start_from(model, None, str(tmp_path / "bert"))
    assert all(name.startswith(("generator", "discriminator_predictions", "bert/pooler"))
               for name in report.newly_initialized)
    np.testing.assert_array_equal(model.encoder.embeddings.embedding_table.numpy(),
                                  bert.encoder.embeddings.embedding_table.numpy())
    electra = _model(seed=7)
    checkpoints.save_google_checkpoint(electra, str(tmp_path / "e" / "electra_model.ckpt"),
                                       encoder_scope=checkpoints.ELECTRA_SCOPE)
    again = _model(seed=8)
    report = warm_start.start_from(again, None, str(tmp_path / "e" / "electra_model.ckpt"))
    assert not report.newly_initialized
    np.testing.assert_array_equal(again.generator.masked_lm.output_bias.numpy(),
                                  electra.generator.masked_lm.output_bias.numpy())


# ----------------------------------------------------------------------------- the run
@pytest.mark.slow
def test_electra_run_learns_and_writes_a_bert_folder_and_the_generator(tmp_path):
    write_records(tmp_path / "records", 2, 128)
    vocab = write_vocab(tmp_path / "vocab.txt", SPECIAL_TOKENS, size=99)
    options = _options(tmp_path, do_eval=True, vocab_file=vocab, learning_rate=2e-3,
                       num_train_steps=120, steps_per_loop=20, save_checkpoints_steps=120)
    results = registry.run("electra", options)
    out = tmp_path / "out"
    history = [line for line in _history(out)]
    assert set(results) >= {"masked_lm_accuracy", "discriminator_accuracy",
                            "discriminator_precision", "discriminator_recall",
                            "sampled_equal_original", "loss", "global_step"}
    # The replaced-token loss weighs 50x: the shared embeddings follow it first.
    assert history[-1]["masked_lm_loss"] < history[0]["masked_lm_loss"] - 0.2
    assert history[-1]["discriminator_loss"] < history[0]["discriminator_loss"] - 0.1
    assert results["global_step"] == 120
    # The discriminator: a plain BERT folder; the generator beside it.
    names = set(tf.train.load_checkpoint(str(out / "bert_model.ckpt")).get_variable_to_shape_map())
    assert names and all(name.startswith("bert/") for name in names)
    assert BertConfig.from_json_file(str(out / "bert_config.json")) == options.bert_config
    assert (out / "vocab.txt").is_file() and (out / "generator" / "vocab.txt").is_file()
    generator = checkpoints.from_pretrained(BertPretrainer, str(out / "generator"),
                                            next_sentence=False)
    assert generator.config.hidden_size == 16
    classifier = checkpoints.from_pretrained(BertClassifier, str(out), num_classes=2)
    assert json.loads((out / "config.json").read_text())["task"] == "electra"
    assert classifier.encoder.embeddings.embedding_table.shape == (99, 32)


def _history(out):
    """The logged training losses, from the TensorBoard summaries."""
    events = []
    for root, _, files in os.walk(out / "train"):
        for name in files:
            for event in tf.compat.v1.train.summary_iterator(os.path.join(root, name)):
                for value in event.summary.value:
                    events.append((event.step, value.tag, tf.make_ndarray(value.tensor)))
    steps = sorted({step for step, _, _ in events})
    return [{tag.split("/")[-1]: float(v) for s, tag, v in events if s == step}
            for step in steps]


@pytest.mark.slow
def test_packed_dynamic_masked_accumulated_run_resumes(tmp_path):
    """(XLA on static shapes: test_commands' faked-TPU run of this task.)"""
    (tmp_path / "records").mkdir()
    write_unmasked_records(tmp_path / "records" / "plain.tfrecord", 256, min_length=5,
                           next_sentence=False)
    vocab = write_vocab(tmp_path / "vocab.txt", SPECIAL_TOKENS, size=99)
    options = _options(tmp_path, pack_sequences=True, max_sequences_per_row=3,
                       packing_window=64, dynamic_masking=True, vocab_file=vocab,
                       train_batch_size=16, gradient_accumulation_steps=2,
                       num_train_steps=20, save_checkpoints_steps=20, optimizer="lamb")
    registry.run("electra", options)
    assert tf.train.latest_checkpoint(str(tmp_path / "out")).endswith("ckpt-20")
    registry.run("electra", dataclasses.replace(options, num_train_steps=30))
    assert tf.train.latest_checkpoint(str(tmp_path / "out")).endswith("ckpt-30")
    history = _history(tmp_path / "out")
    assert all(np.isfinite(row["total_loss"]) for row in history if "total_loss" in row)


@pytest.mark.slow
def test_a_second_phase_starts_from_the_first_ones_weights_and_moments(tmp_path):
    write_records(tmp_path / "records", 1, 64)
    first = _options(tmp_path, num_train_steps=6, save_checkpoints_steps=6, steps_per_loop=3)
    registry.run("electra", first)
    second = _options(tmp_path, output_dir=str(tmp_path / "phase2"),
                      init_checkpoint=first.output_dir, restore_optimizer_state=True,
                      mixed_precision="bfloat16", num_train_steps=3, num_warmup_steps=1,
                      learning_rate=1e-5, save_checkpoints_steps=3, steps_per_loop=3)
    registry.run("electra", second)
    # Every part (the generator and the discriminator's head too) came from phase 1 and
    # moved by three steps of lr 1e-5: a fresh start would be ~0.02 away (its init).
    phase1 = tf.train.load_checkpoint(str(tmp_path / "out" / "electra_model.ckpt"))
    phase2 = tf.train.load_checkpoint(str(tmp_path / "phase2" / "electra_model.ckpt"))
    for name in ("generator/encoder/layer_0/attention/self/query/kernel",
                 "discriminator_predictions/dense_1/kernel",
                 "electra/encoder/layer_1/output/dense/kernel"):
        step = np.abs(phase2.get_tensor(name) - phase1.get_tensor(name)).max()
        assert 0 < step < 1e-3, (name, step)


# --------------------------------------------------------------------------- bad input
def test_what_cannot_work_is_refused_before_training_naming_the_setting(tmp_path):
    write_records(tmp_path / "records", 1, 8)
    gen = tmp_path / "gen.json"
    for changes, message in (
            ({"vocab_size": 98}, "generator vocab_size=98 but the discriminator's is 99"),
            ({"embedding_size": 24}, "generator embedding_width=24"),
            ({"hidden_size": 64, "num_attention_heads": 4},
             "generator hidden_size=64 is larger than the discriminator's")):
        gen.write_text(json.dumps({**_config().to_dict(), "hidden_size": 16,
                                   "num_attention_heads": 2, **changes}))
        with pytest.raises(ValueError, match=f"--generator_config_file={gen}: {message}"):
            registry.run("electra", _options(tmp_path, generator_config_file=str(gen),
                                             generator_hidden_size=None))
    assert not (tmp_path / "out" / "ckpt-1.index").exists()
    with pytest.raises(ValueError, match="--next_sentence: ELECTRA has no next-sentence"):
        _options(tmp_path, next_sentence=True).check()
    with pytest.raises(ValueError, match="--generator_hidden_size=1.5: expected a fraction"):
        _options(tmp_path, generator_hidden_size=1.5).check()
    (tmp_path / "plain").mkdir()
    write_unmasked_records(tmp_path / "plain" / "p.tfrecord", 8, next_sentence=False)
    with pytest.raises(ValueError, match="the records carry no masks .* add --dynamic_masking"):
        registry.run("electra", _options(tmp_path, input_file=str(tmp_path / "plain" / "*"),
                                         output_dir=str(tmp_path / "out2")))


# ------------------------------------------------------------- narrow embeddings, exported
@pytest.mark.extras("ai_edge_litert", "tensorflow_hub", "tf_keras", "keras_hub")
def test_a_narrow_embedding_encoder_loads_in_each_formats_own_loader(tmp_path):
    """SavedModel (tf.saved_model.load), TF Hub (hub.KerasLayer), LiteRT (its interpreter)
    and keras-hub (ElectraBackbone.from_preset) give the encoder's outputs."""
    import test_export_litert
    import test_export_tfhub
    from bert_tf.serving import export, keras_hub as keras_hub_export, litert, tfhub
    config = dataclasses.replace(_config(hidden_act="gelu_tanh"), embedding_size=16)
    encoder = tiny_model(BertEncoder, config, 21)
    vocab = write_vocab(tmp_path / "vocab.txt", SPECIAL_TOKENS, size=99)
    batch = {key: value for key, value in _batch(length=16).items()
             if key in ("input_ids", "input_mask", "segment_ids")}
    ours = encoder(batch, training=False)
    mask = batch["input_mask"].astype(bool)

    def close(got, want):
        np.testing.assert_allclose(np.asarray(got)[mask], np.asarray(want)[mask], atol=1e-5)
    path = export.export_encoder(
        encoder, Preprocessor(vocab, True, 16), str(tmp_path / "saved_model"))
    served = tf.saved_model.load(path).signatures["serve_ids"](**{
        key: tf.constant(value) for key, value in batch.items()})
    close(served["sequence_output"], ours["sequence_output"])
    runner = test_export_litert.runner_or_skip(os.path.join(litert.export_litert(
        encoder, Preprocessor(vocab, True, 16), str(tmp_path / "litert")), "model.tflite"))
    row = {key: value[:1] for key, value in batch.items()}
    np.testing.assert_allclose(runner(**row)["sequence_output"], ours["sequence_output"][:1],
                               atol=1e-5)
    hub, _ = test_export_tfhub.hub_or_skip()
    tfhub.export_tfhub(encoder, Preprocessor(vocab, True, 16), str(tmp_path / "hub"))
    layer = hub.KerasLayer(str(tmp_path / "hub" / "encoder"))
    theirs = layer({"input_word_ids": batch["input_ids"], "input_mask": batch["input_mask"],
                    "input_type_ids": batch["segment_ids"]})
    close(theirs["sequence_output"], ours["sequence_output"])
    keras_hub = pytest.importorskip("keras_hub")
    keras_hub_export.export_keras_hub(
        encoder, Preprocessor(vocab, True, 16), str(tmp_path / "kh"))
    backbone = keras_hub.models.ElectraBackbone.from_preset(str(tmp_path / "kh"))
    theirs = backbone({"token_ids": batch["input_ids"], "padding_mask": batch["input_mask"],
                       "segment_ids": batch["segment_ids"]})
    close(theirs["sequence_output"], ours["sequence_output"])
    np.testing.assert_allclose(theirs["pooled_output"], ours["pooled_output"], atol=1e-5)
    classifier = tiny_model(BertClassifier, config, 22, num_classes=2)
    with pytest.raises(ValueError, match="embedding_size=16 .* cannot be a keras-hub preset"):
        keras_hub_export.export_keras_hub(
            classifier, Preprocessor(vocab, True, 16), str(tmp_path / "kh2"))
