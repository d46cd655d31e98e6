"""Stable fine-tuning on small data sets: ELECTRA's layer-wise learning-rate decay
(`--layerwise_lr_decay`), re-initialised top layers (`--reinit_top_layers`), and the
Mosbach et al. recipe of docs/examples/stable_finetuning.json."""

import json
import pathlib

import keras
import numpy as np
import pytest

from bert_tf.models import BertClassifier, BertEncoder
from bert_tf.options import options_from_dict
from bert_tf.runs import driver
from bert_tf.tasks.classification import task as classification_task
from bert_tf.tasks.classification.options import ClassifierOptions
from bert_tf.train import optimization, reinit_layers
from harness import tiny_config, tiny_model, write_released_checkpoint
from test_run_classifier import options, write_sst2

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
PREFIX = "bert_classifier/bert_encoder/"
# google-research/electra's table for 2 layers: lr * decay^(n + 2 - depth), depth 0
# (embeddings), i + 1 (layer_i), n + 2 (pooler, head); depth n + 1 is unused.
EXPONENTS = {PREFIX + "embeddings/": 4, PREFIX + "layer_0/": 3, PREFIX + "layer_1/": 2,
             PREFIX + "pooler/": 0, "bert_classifier/classifier/": 0}
DECAYED = ("kernel", "embeddings")  # the rest (LayerNorm, biases) get no weight decay


def _exponent(path):
    (exponent,) = [e for prefix, e in EXPONENTS.items() if path.startswith(prefix)]
    return exponent


@pytest.fixture
def classifier():
    return tiny_model(BertClassifier, tiny_config(), 0, num_classes=3)


def test_multipliers_are_electras_formula_for_every_variable(classifier):
    paths = [v.path for v in classifier.trainable_variables]
    table = optimization.layerwise_lr_multipliers(classifier.trainable_variables, 0.5)
    assert set(table) == set(paths) and len(paths) == 41
    for path in paths:
        assert table[path] == 0.5 ** _exponent(path), path
    assert table[PREFIX + "embeddings/word_embeddings/embeddings"] == 0.0625
    assert table["bert_classifier/classifier/dense/kernel"] == 1.0
    # 12 layers (ELECTRA-base): the embeddings at decay^14, layer_11 at decay^2.
    table = optimization.layerwise_lr_multipliers(
        ["e/embeddings/x/embeddings", "e/layer_0/k/kernel", "e/layer_11/k/kernel",
         "e/pooler/dense/kernel", "head/dense/bias"], 0.9)
    assert list(table.values()) == pytest.approx([0.9 ** 14, 0.9 ** 13, 0.9 ** 2, 1.0, 1.0])


def _numpy_adamw_step(weights, grads, lr, multipliers, decayed, weight_decay, clipnorm,
                      eps=1e-6, beta_1=0.9, beta_2=0.999):
    """Bias-corrected AdamW's first step at lr * multiplier, after global-norm clipping."""
    norm = np.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in grads))
    scale = clipnorm / max(norm, clipnorm)
    new = []
    for w, g, multiplier, decay in zip(weights, grads, multipliers, decayed):
        g, rate = g.astype(np.float64) * scale, lr * multiplier
        w = w.astype(np.float64) * (1 - rate * weight_decay * decay)
        m_hat = (1 - beta_1) * g / (1 - beta_1)
        v_hat = (1 - beta_2) * g ** 2 / (1 - beta_2)
        new.append(w - rate * m_hat / (np.sqrt(v_hat) + eps))
    return new


def test_one_adamw_step_moves_each_variable_at_its_layer_rate(classifier):
    variables = classifier.trainable_variables
    before = [v.numpy() for v in variables]
    rng = np.random.default_rng(0)
    grads = [rng.normal(0, 0.3, v.shape).astype(np.float32) for v in variables]
    optimizer = optimization.create_optimizer(1e-2, 10, 0, weight_decay_rate=0.1,
                                              layerwise_lr_decay=0.5)
    optimizer.build(variables)
    optimizer.apply_gradients(zip(grads, variables))
    multipliers = [0.5 ** _exponent(v.path) for v in variables]
    copy = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert (copy.layerwise_lr_decay, copy.bias_correction) == (0.5, True)
    assert [optimizer.lr_multiplier(v) for v in variables] == multipliers
    decayed = [v.path.rsplit("/", 1)[1] in DECAYED for v in variables]
    expected = _numpy_adamw_step(before, grads, 1e-2, multipliers, decayed, 0.1, 1.0)
    for variable, old, new in zip(variables, before, expected):
        np.testing.assert_allclose(variable.numpy() - old, new - old, rtol=2e-4,
                                   atol=1e-8, err_msg=variable.path)


def test_lamb_scales_each_rate_as_separate_optimizers_would(classifier):
    variables = classifier.trainable_variables
    before = [v.numpy() for v in variables]
    rng = np.random.default_rng(1)
    grads = [rng.normal(0, 0.01, v.shape).astype(np.float32) for v in variables]
    optimizer = optimization.create_optimizer(1e-2, 10, 0, optimizer_type="lamb",
                                              weight_decay_rate=0.0, clipnorm=None,
                                              layerwise_lr_decay=0.8)
    optimizer.apply_gradients(zip(grads, variables))
    moved = [v.numpy() for v in variables]
    copy = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert (type(copy), copy.layerwise_lr_decay) == (optimization.LayerwiseLamb, 0.8)
    for index, (variable, old) in enumerate(zip(variables, before)):
        copy = keras.Variable(old)
        reference = keras.optimizers.Lamb(learning_rate=1e-2 * 0.8 ** _exponent(
            variable.path), epsilon=1e-6)
        reference.apply_gradients([(grads[index], copy)])
        np.testing.assert_allclose(moved[index], copy.numpy(), rtol=1e-5, atol=1e-8,
                                   err_msg=variable.path)


@pytest.mark.parametrize("decay", [0.0, -0.5, 1.5, float("nan")])
def test_a_decay_outside_zero_one_is_refused_naming_the_flag(tmp_path, decay):
    with pytest.raises(ValueError, match="layerwise_lr_decay must be"):
        ClassifierOptions(task_name="SST-2", output_dir=str(tmp_path),
                          layerwise_lr_decay=decay).check()
    with pytest.raises(ValueError, match="layerwise_lr_decay"):
        optimization.create_optimizer(1e-3, 10, 1, layerwise_lr_decay=decay)


def test_reinit_gives_fresh_initializer_values_and_leaves_the_rest(classifier):
    saved = {v.path: v.numpy() for v in classifier.weights}
    paths = reinit_layers.reinitialize_top_layers(classifier, 1, seed=7)
    fresh = {v.path: v.numpy() for v in classifier.weights}
    assert set(paths) == {p for p in saved if p.startswith((PREFIX + "pooler/",
                                                            PREFIX + "layer_1/"))}
    for path, value in fresh.items():
        name = path.rsplit("/", 1)[1]
        if path not in paths:
            np.testing.assert_array_equal(value, saved[path], err_msg=path)
        elif name == "kernel":
            assert not np.allclose(value, saved[path]), path
            assert np.abs(value).max() <= 2 * 0.02 + 1e-7  # truncated at 2 stddevs
            assert 0.0155 < value.std() < 0.0195, path  # 0.88 * 0.02 = 0.0176
        else:
            np.testing.assert_array_equal(value, 1.0 if name == "gamma" else 0.0)
    again = tiny_model(BertClassifier, tiny_config(), 0, num_classes=3)
    reinit_layers.reinitialize_top_layers(again, 1, seed=7)
    for variable in again.weights:  # the seed fixes the new values
        np.testing.assert_array_equal(variable.numpy(), fresh[variable.path])


@pytest.mark.parametrize("count, message", [
    (3, r"--reinit_top_layers=3: the model has only 2 encoder layers"),
    (-1, r"reinit_top_layers must be an integer >= 0"),
])
def test_reinit_counts_outside_the_layers_are_refused_naming_the_flag(classifier, tmp_path,
                                                                      count, message):
    with pytest.raises(ValueError, match=message):
        reinit_layers.reinitialize_top_layers(classifier, count)
    if count < 0:
        with pytest.raises(ValueError, match=message):
            ClassifierOptions(task_name="SST-2", output_dir=str(tmp_path),
                              reinit_top_layers=count).check()


def test_a_run_reinitializes_then_steps_each_layer_at_its_rate(tmp_path):
    write_sst2(tmp_path / "data", train=16)
    start = tiny_model(BertEncoder, tiny_config(max_position_embeddings=16), 3)
    write_released_checkpoint(tmp_path / "released", start)
    with pytest.raises(ValueError, match="--reinit_top_layers=5: .*bert_config.json has "
                                         "only 2 encoder layers"):
        classification_task.run(options(tmp_path, do_train=True, reinit_top_layers=5,
                                        init_checkpoint=str(tmp_path / "released")))
    assert not (tmp_path / "out").exists()
    lr = 1e-3
    run = options(tmp_path, do_train=True, init_checkpoint=str(tmp_path / "released"),
                  num_train_epochs=1.0, warmup_proportion=0.0, learning_rate=lr,
                  weight_decay_rate=0.0, layerwise_lr_decay=0.5, reinit_top_layers=1,
                  allow_random_encoder=False)
    model = driver.execute(classification_task.ClassificationTask(run)).runner.model
    trained = {v.path.replace("bert_classifier/bert_encoder/", ""): v.numpy()
               for v in model.weights}
    loaded = {v.path.replace("bert_encoder/", ""): v.numpy() for v in start.weights}
    # One step of Adam moves each element by up to its variable's rate (exactly that when
    # |gradient| >> epsilon): embeddings lr * 0.5^4, layer_0 lr * 0.5^3.
    for scope, multiplier in (("embeddings/", 0.0625), ("layer_0/", 0.125)):
        moved = max(np.abs(trained[path] - loaded[path]).max() for path in loaded
                    if path.startswith(scope))
        assert 0.9 * lr * multiplier < moved <= 1.001 * lr * multiplier, scope
    # layer_1 and the pooler start afresh, then move at lr * 0.5^2 and lr.
    new = trained["layer_1/intermediate/kernel"]
    assert np.abs(new - loaded["layer_1/intermediate/kernel"]).max() > 0.01
    gamma_moved = np.abs(trained["layer_1/output_layer_norm/gamma"] - 1.0).max()
    assert 0.8 * lr * 0.25 < gamma_moved <= 1.001 * lr * 0.25
    assert 0.9 * lr < np.abs(trained["pooler/dense/bias"]).max() <= 1.001 * lr
    saved = json.loads((tmp_path / "out" / "config.json").read_text())["options"]
    assert (saved["layerwise_lr_decay"], saved["reinit_top_layers"]) == (0.5, 1)


def test_the_documented_mosbach_recipe_is_a_classifier_config():
    values = json.loads((REPO_ROOT / "docs" / "examples" / "stable_finetuning.json")
                        .read_text())
    recipe = options_from_dict(ClassifierOptions, dict(values, task_name="RTE",
                                                       output_dir="/tmp/rte"), "recipe")
    recipe.check()
    assert recipe.adam_bias_correction and recipe.warmup_proportion == 0.1
    assert recipe.num_train_epochs >= 10 and recipe.best_metric
