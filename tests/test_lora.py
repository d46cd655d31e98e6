"""LoRA fine-tuning (--lora_rank): the adapters' formula on `Projection` and the fused
query/key/value path, what trains, a training step, a run that resumes and exports
merged onto its base (config.json names it: tests/test_lora_run_folder.py), and the
refused settings."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.layers import MultiHeadSelfAttention, Projection
from bert_tf.models import BertClassifier, BertEncoder
from bert_tf.runs import driver, export_checkpoint
from bert_tf.tasks.classification import task as classification_task
from bert_tf.tasks.classification.options import ClassifierOptions
from bert_tf.train import lora, loop, optimization
from bert_tf.train.lora_names import TARGETS, parse_train
from bert_tf.weights import checkpoints, digest
from contract import encoder_features
from harness import tiny_config, tiny_model, write_released_checkpoint
from test_run_classifier import options, write_sst2

H, I, LAYERS = 32, 37, 2
ALL = TARGETS


def _random_adapters(model, seed=0):
    """Non-zero B (and A) everywhere, so that the adapters change the outputs."""
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        if variable.path.endswith(("/lora_a", "/lora_b")):
            variable.assign(rng.normal(0, 0.2, variable.shape).astype(np.float32))


def saved_options(tmp_path):
    return json.loads((tmp_path / "out" / "config.json").read_text())["options"]


def _logits(model, features):
    return model(features, training=False)["logits"].numpy()


def test_projection_output_is_the_lora_formula():
    layer = Projection(7, lora_rank=3, lora_alpha=6.0, name="p")
    layer.build((None, 5))
    assert [v.path for v in layer.weights] == ["p/kernel", "p/bias", "p/lora_a", "p/lora_b"]
    assert [v.trainable for v in layer.weights] == [False, True, True, True]
    a = layer.lora_a.numpy()
    assert np.abs(a).max() <= 1 / np.sqrt(5) and a.std() > 0.1  # U(+-1/sqrt(in)), PEFT
    np.testing.assert_array_equal(layer.lora_b.numpy(), 0.0)
    rng = np.random.default_rng(0)
    weights = [rng.normal(size=v.shape).astype(np.float32) for v in layer.weights]
    for variable, value in zip(layer.weights, weights):
        variable.assign(value)
    w, b, a, bb = weights
    x = rng.normal(size=(2, 4, 5)).astype(np.float32)
    np.testing.assert_allclose(layer(x).numpy(), x @ w + b + x @ a @ bb * (6.0 / 3),
                               rtol=1e-5, atol=1e-5)
    # enable_lora on a built plain layer: the same formula, alpha None = scale 1.
    plain = Projection(7, name="q")
    plain.build((None, 5))
    plain.enable_lora(3)
    for variable, value in zip(plain.weights, weights):
        variable.assign(value)
    np.testing.assert_allclose(plain(x).numpy(), x @ w + b + x @ a @ bb, rtol=1e-5,
                               atol=1e-5)
    expected = plain(x).numpy()
    plain.merge_lora()
    assert [v.path for v in plain.weights] == ["q/kernel", "q/bias"]
    assert plain.get_config()["lora_rank"] == 0 and plain.kernel.trainable
    np.testing.assert_allclose(plain(x).numpy(), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(plain.kernel.numpy(), w + a @ bb, rtol=1e-6, atol=1e-6)


def test_adapter_dropout_acts_while_training_only():
    layer = Projection(6, lora_rank=2, lora_dropout=0.5, name="d")
    layer.build((None, 8))
    _random_adapters(layer)
    x = np.random.default_rng(1).normal(size=(4, 8)).astype(np.float32)
    w, b, a, bb = [v.numpy() for v in layer.weights]
    np.testing.assert_allclose(layer(x, training=False).numpy(), x @ w + b + x @ a @ bb,
                               rtol=1e-5, atol=1e-5)
    assert not np.allclose(layer(x, training=True).numpy(), x @ w + b + x @ a @ bb)


def test_fused_query_key_value_path_adds_the_adapters():
    attention = MultiHeadSelfAttention(H, 4, dropout_rate=0.0, name="attention")
    attention.build()
    x = np.random.default_rng(2).normal(size=(2, 5, H)).astype(np.float32)
    mask = np.ones((2, 5), np.int32)
    base = attention(x, mask).numpy()
    for name in ("query", "value"):
        getattr(attention, name).enable_lora(4, 8.0)
    np.testing.assert_array_equal(attention(x, mask).numpy(), base)  # B = 0
    _random_adapters(attention)
    unmerged = attention(x, mask).numpy()
    assert np.abs(unmerged - base).max() > 1e-2
    for name in ("query", "value"):
        getattr(attention, name).merge_lora()
    np.testing.assert_allclose(attention(x, mask).numpy(), unmerged, atol=1e-5)


def test_zero_b_is_the_base_model_exactly_and_only_adapters_and_head_train():
    model = tiny_model(BertClassifier, tiny_config(), 0, num_classes=3)
    features = encoder_features(6, 4)
    base = _logits(model, features)
    frozen = {v.path: v.numpy() for v in model.weights}
    lora.apply_lora(model, lora.LoraSettings(rank=4, alpha=16.0))
    np.testing.assert_array_equal(_logits(model, features), base)
    head = 32 * 3 + 3
    trainable = model.trainable_variables
    assert sum(int(np.prod(v.shape)) for v in trainable) == \
        LAYERS * 2 * 4 * (H + H) + head
    assert {v.path.rsplit("/", 2)[-2] for v in trainable if "lora" in v.path} == \
        {"query", "value"}
    assert all(np.array_equal(frozen[v.path], v.numpy()) for v in model.weights
               if v.path in frozen)


@pytest.mark.parametrize("train, extra", [
    ("none", 0),
    # LayerNorms: embeddings' and two a layer (gamma, beta of width H); biases: q, k, v,
    # attention output, intermediate (I), output a layer, and the pooler's.
    ("layer_norm,bias", (1 + 2 * LAYERS) * 2 * H + LAYERS * (5 * H + I) + H),
])
def test_all_targets_count_against_the_formula(train, extra):
    model = tiny_model(BertClassifier, tiny_config(), 0, num_classes=3)
    rank = 3
    lora.apply_lora(model, lora.LoraSettings(rank=rank, targets=ALL,
                                             train=parse_train(train)))
    widths = [lora.target_widths(t, H, I) for t in ALL]
    adapters = LAYERS * sum(rank * (a + b) for a, b in widths)
    assert sum(int(np.prod(v.shape)) for v in model.trainable_variables) == \
        adapters + extra + 32 * 3 + 3


def test_one_training_step_lowers_the_loss_and_leaves_frozen_weights_bit_identical():
    model = tiny_model(BertClassifier, tiny_config(hidden_dropout_prob=0.0,
                                                   attention_probs_dropout_prob=0.0),
                       0, num_classes=2)
    lora.apply_lora(model, lora.LoraSettings(rank=4, alpha=8.0, targets=ALL))
    frozen = {v.path: v.numpy() for v in model.weights if not v.trainable}
    features = encoder_features(6, 5)
    labels = tf.constant(np.arange(len(features["input_ids"])) % 2)

    def loss():
        logits = model(features, training=True)["logits"]
        return tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(
            labels, logits, from_logits=True))

    optimizer = optimization.create_optimizer(1e-2, 10, 0)
    optimizer.build(model.trainable_variables)
    before = float(loss())
    with tf.GradientTape() as tape:
        value = loss()
    grads = tape.gradient(value, model.trainable_variables)
    assert all(g is not None for g in grads)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    assert float(loss()) < before
    assert len(optimizer.variables) < 3 * len(model.trainable_variables) + 5  # no slots
    for variable in model.weights:
        if variable.path in frozen:
            np.testing.assert_array_equal(variable.numpy(), frozen[variable.path],
                                          err_msg=variable.path)
    assert any(np.abs(v.numpy()).max() > 0 for v in model.weights
               if v.path.endswith("lora_b"))


def _released(tmp_path, seed=3, name="released"):
    """A released folder of a tiny encoder (the LoRA runs' base); its {path: value}."""
    start = tiny_model(BertEncoder, tiny_config(max_position_embeddings=16), seed)
    write_released_checkpoint(tmp_path / name, start)
    return {v.path.split("/", 1)[1]: v.numpy() for v in start.weights}


def _lora_settings(tmp_path, **changes):
    return dict(dict(lora_rank=4, lora_alpha=8.0, lora_targets=["query", "value", "output"],
                     init_checkpoint=str(tmp_path / "released"), allow_random_encoder=False,
                     num_train_epochs=2.0, learning_rate=1e-2, warmup_proportion=0.0),
                **changes)


def _checkpoint_weights(prefix):
    """The model variables a training checkpoint holds ({name: number of weights}; each
    once, under the first object path that reaches it), without the optimizer moments
    and counters."""
    return {name: int(np.prod(shape)) for name, shape in tf.train.list_variables(prefix)
            if not name.startswith(("optimizer/_variables/", "optimizer/_iterations",
                                    "iterator/", "global_step/", "save_counter/", "_"))}


def test_a_lora_run_trains_resumes_and_exports_merged(tmp_path):
    write_sst2(tmp_path / "data", train=16, dev=5)
    released = _released(tmp_path)
    settings = _lora_settings(tmp_path)
    run = driver.execute(classification_task.ClassificationTask(
        options(tmp_path, do_train=True, **settings)))
    assert run.runner.global_step == 2
    model = run.runner.model
    for variable in model.weights:  # the frozen encoder is the released one
        path = variable.path.split("/", 2)[-1]
        if path in released and not variable.trainable:
            np.testing.assert_array_equal(variable.numpy(), released[path], err_msg=path)
    # config.json names the base: its path and digest.
    base = json.loads((tmp_path / "out" / "config.json").read_text())["lora_base"]
    assert base["path"] == str(tmp_path / "released")
    assert base["sha256"] == digest.weights_digest(tmp_path / "released")["sha256"]
    # The checkpoint holds the adapters and the head: restored onto the base, the model.
    again = checkpoints.build_model(BertClassifier, checkpoints.load_config(
        str(tmp_path / "bert_config.json")), num_classes=2)
    checkpoints.load_pretrained_weights(again, str(tmp_path / "released"))
    lora.apply_lora(again, lora.settings_from_options(saved_options(tmp_path)))
    assert loop.restore_model(again, str(tmp_path / "out" / "ckpt-2")) == 2
    trained = {v.path: v.numpy() for v in model.weights}
    assert sum(np.abs(value).max() > 0 for path, value in trained.items()
               if path.endswith("lora_b")) == 6
    for variable in again.weights:
        np.testing.assert_array_equal(variable.numpy(), trained[variable.path])
    saved = saved_options(tmp_path)
    assert (saved["lora_rank"], saved["lora_targets"]) == (4, ["query", "value", "output"])

    # Resumed: one more epoch from ckpt-2 (the base, then adapters and moments restore).
    run = driver.execute(classification_task.ClassificationTask(
        options(tmp_path, do_train=True, **dict(settings, num_train_epochs=3.0))))
    assert run.runner.global_step == 3
    model = run.runner.model
    features = encoder_features(8, 6)
    unmerged = _logits(model, features)
    for variable in model.weights:
        path = variable.path.split("/", 2)[-1]
        if path in released and not variable.trainable:
            np.testing.assert_array_equal(variable.numpy(), released[path], err_msg=path)

    # Evaluation without --init_checkpoint reads the base config.json names.
    evaluated = driver.execute(classification_task.ClassificationTask(options(
        tmp_path, do_eval=True, **dict(settings, init_checkpoint=None))))
    np.testing.assert_allclose(_logits(evaluated.runner.model, features), unmerged,
                               atol=1e-6)
    # The run's own folder as --init_checkpoint means the same: its base.
    evaluated = driver.execute(classification_task.ClassificationTask(options(
        tmp_path, do_eval=True, **dict(settings, init_checkpoint=str(tmp_path / "out")))))
    np.testing.assert_allclose(_logits(evaluated.runner.model, features), unmerged,
                               atol=1e-6)

    # bert-export-model's loading: base + adapters merged, a plain model, same logits.
    exported = export_checkpoint.load_model("classifier", ClassifierOptions(
        task_name="SST-2", init_checkpoint=str(tmp_path / "out"),
        bert_config_file=str(tmp_path / "bert_config.json"), output_dir=str(tmp_path / "x")),
        {"num_classes": 2})
    assert not any("lora" in v.path for v in exported.weights)
    np.testing.assert_allclose(_logits(exported, features), unmerged, atol=1e-5)
    encoder = export_checkpoint.load_model("encoder", ClassifierOptions(
        task_name="SST-2", init_checkpoint=str(tmp_path / "out"),
        bert_config_file=str(tmp_path / "bert_config.json"), output_dir=str(tmp_path / "x")))
    assert not any("lora" in v.path for v in encoder.weights)
    np.testing.assert_allclose(encoder(features)["sequence_output"].numpy(),
                               model.encoder(features)["sequence_output"].numpy(), atol=1e-5)
    assert lora.merge_adapters(model) == 6  # what the driver does before --export_dir
    np.testing.assert_allclose(_logits(model, features), unmerged, atol=1e-5)

    # Eval-only with other LoRA settings than the run's: refused, naming the flags.
    with pytest.raises(ValueError, match="--lora_rank=4.*pass the run's --lora_rank"):
        classification_task.run(options(tmp_path, do_eval=True))
    # A LoRA run as a new run's init_checkpoint: refused (its adapters would not load).
    with pytest.raises(ValueError, match="--init_checkpoint=.* is a LoRA run"):
        classification_task.run(options(tmp_path, do_train=True, output_dir=str(
            tmp_path / "new"), init_checkpoint=str(tmp_path / "out")))


@pytest.mark.parametrize("changes, message", [
    (dict(lora_rank=33), r"--lora_rank=33 is above the width of the query projections"),
    (dict(lora_rank=36, lora_targets=["intermediate"]),
     r"--lora_rank=36 is above .* intermediate .* = 32"),
    (dict(lora_rank=4, lora_targets=["query", "dense"]), r"--lora_targets=.*unknown: dense"),
    (dict(lora_alpha=16.0), r"--lora_alpha is set but --lora_rank is 0"),
    (dict(lora_train="bias"), r"--lora_train is set but --lora_rank is 0"),
    (dict(lora_rank=4, lora_train="all"), r"--lora_train=all"),
    (dict(lora_rank=-1), r"lora_rank must be an integer >= 0"),
    (dict(lora_rank=4, reinit_top_layers=1), r"--reinit_top_layers=1 with --lora_rank=4"),
    (dict(lora_rank=4), r"--lora_rank=4 needs --init_checkpoint: the base model"),
])
def test_bad_settings_are_refused_naming_the_flag(tmp_path, changes, message):
    write_sst2(tmp_path / "data", train=16, dev=5)
    with pytest.raises(ValueError, match=message):
        classification_task.run(options(tmp_path, do_train=True, **changes))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("task", ["pretraining", "electra"])
def test_lora_flags_on_a_pretraining_command_are_refused_naming_why(task, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "bert_tf.cli.train", f"--task={task}", "--lora_rank=8",
         "--lora_alpha=16", f"--output_dir={tmp_path / 'out'}"], capture_output=True,
        text=True, timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "bert-train: error: --lora_rank: LoRA adapters fine-tune a task model "
        "(bert-run-classifier, bert-run-ner, bert-run-squad, bert-train --task="
        "classification, ...); this command trains the encoder's own weights "
        "(pre-training, ELECTRA, distillation): leave out --lora_rank, --lora_alpha")
    assert not (tmp_path / "out").exists()
