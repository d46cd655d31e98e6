"""Tests for bert_tf.train.optimization: schedule, weight-decay exclusions, clipping."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.train import optimization


def _original_schedule(step, peak, total, warmup):
    """google-research/bert's learning rate, written out independently."""
    decayed = peak * (1.0 - min(step, total) / total)
    if warmup and step < warmup:
        return peak * step / warmup
    return decayed


@pytest.mark.parametrize("warmup", [0, 3, 10])
def test_google_research_schedule_matches_original_formula(warmup):
    schedule = optimization.WarmupLinearDecay(2e-4, 10, warmup, decay_from="start")
    got = [float(schedule(step)) for step in range(13)]
    want = [_original_schedule(step, 2e-4, 10, warmup) for step in range(13)]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-12)
    assert got[10] == 0.0 and got[12] == 0.0


def test_linear_schedule_decays_from_the_peak_after_warmup():
    # transformers' get_linear_schedule_with_warmup(warmup=2, total=10), peak 1e-3, by hand:
    # 0, 0.5 peak, then (10 - step) / 8 of the peak.
    schedule = optimization.WarmupLinearDecay(1e-3, 10, 2)
    want = [0.0, 5e-4, 1e-3, 7/8 * 1e-3, 6/8 * 1e-3, 5/8 * 1e-3, 4/8 * 1e-3, 3/8 * 1e-3,
            2/8 * 1e-3, 1/8 * 1e-3, 0.0, 0.0]
    got = [float(schedule(step)) for step in range(12)]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-12)
    # No warm-up: the same decay from step 0.
    no_warmup = optimization.WarmupLinearDecay(1e-3, 4, 0)
    np.testing.assert_allclose([float(no_warmup(s)) for s in range(5)],
                               [1e-3, 7.5e-4, 5e-4, 2.5e-4, 0.0], rtol=1e-6, atol=1e-12)


def test_create_optimizer_picks_the_schedule():
    linear = optimization.create_optimizer(1e-3, 10, 2)
    original = optimization.create_optimizer(1e-3, 10, 2, lr_schedule="google_research")
    assert float(linear.learning_rate) == 0.0
    assert float(linear._learning_rate(2)) == pytest.approx(1e-3)  # pylint: disable=protected-access
    assert float(original._learning_rate(2)) == pytest.approx(8e-4)  # pylint: disable=protected-access
    with pytest.raises(ValueError, match="lr_schedule"):
        optimization.create_optimizer(1e-3, 10, 2, lr_schedule="cosine")


def test_schedule_round_trips_through_keras_serialization():
    schedule = optimization.WarmupLinearDecay(1e-4, 100, 10, decay_from="start")
    restored = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(schedule))
    assert isinstance(restored, optimization.WarmupLinearDecay)
    assert restored.get_config() == {
        "peak_learning_rate": 1e-4, "num_train_steps": 100, "num_warmup_steps": 10,
        "decay_from": "start"}
    assert float(restored(5)) == pytest.approx(5e-5)
    assert float(restored(55)) == pytest.approx(4.5e-5)


@pytest.mark.parametrize("kwargs, match", [
    (dict(num_train_steps=10, num_warmup_steps=11), "num_warmup_steps"),
    (dict(num_train_steps=0, num_warmup_steps=0), "num_train_steps"),
    (dict(num_train_steps=10, num_warmup_steps=-1), "num_warmup_steps"),
])
def test_bad_schedule_is_rejected(kwargs, match):
    with pytest.raises(ValueError, match=match):
        optimization.create_optimizer(1e-4, **kwargs)


def test_bad_optimizer_type_is_rejected():
    with pytest.raises(ValueError, match="optimizer_type"):
        optimization.create_optimizer(1e-4, 10, 1, optimizer_type="sgd")


def _tiny_model():
    inputs = keras.Input((3,))
    hidden = keras.layers.Dense(3, name="dense")(inputs)
    outputs = keras.layers.LayerNormalization(name="LayerNorm")(hidden)
    return keras.Model(inputs, outputs)


def test_weight_decay_skips_layer_norm_and_bias():
    model = _tiny_model()
    lr, decay = 0.1, 0.01
    # warmup 0 and a long schedule: the first update uses lr * (1 - 0/1000) = lr.
    optimizer = optimization.create_optimizer(lr, 1000, 0, weight_decay_rate=decay,
                                              clipnorm=None)
    before = {v.path: v.numpy().copy() for v in model.trainable_variables}
    for variable in model.trainable_variables:  # non-zero values everywhere
        variable.assign(np.full(variable.shape, 2.0, "float32"))
    zero_grads = [tf.zeros(v.shape) for v in model.trainable_variables]
    optimizer.apply_gradients(zip(zero_grads, model.trainable_variables))
    after = {v.path: v.numpy() for v in model.trainable_variables}
    assert set(after) == set(before)
    for path, value in after.items():
        if path.endswith("kernel"):
            # Zero gradient: the only change is the decoupled decay w -= lr * wd * w.
            np.testing.assert_allclose(value, 2.0 * (1 - lr * decay), rtol=1e-6)
        else:  # bias, gamma, beta
            np.testing.assert_allclose(value, 2.0, rtol=0, atol=0)


def test_global_norm_clipping_caps_the_update_direction():
    # With AdamW the first step is lr * m_hat / (sqrt(v_hat) + eps) = lr * sign(g):
    # insensitive to scale. Use the clipped gradient seen by the optimizer instead.
    optimizer = optimization.create_optimizer(1.0, 1000, 0, clipnorm=1.0,
                                              weight_decay_rate=0.0)
    grads = [tf.constant([3.0, 4.0]), tf.constant([12.0])]  # global norm 13
    clipped = optimizer._clip_gradients(grads)  # pylint: disable=protected-access
    np.testing.assert_allclose(clipped[0].numpy(), [3 / 13, 4 / 13], rtol=1e-6)
    np.testing.assert_allclose(clipped[1].numpy(), [12 / 13], rtol=1e-6)


def test_lamb_and_loss_scale_wrapping():
    optimizer = optimization.create_optimizer(1e-3, 10, 2, optimizer_type="lamb",
                                              loss_scale=True)
    assert isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
    inner = optimization.inner_optimizer(optimizer)
    assert isinstance(inner, keras.optimizers.Lamb)
    assert inner.global_clipnorm == 1.0
    assert float(optimization.current_learning_rate(optimizer)) == 0.0  # warm-up start


def test_adamw_first_step_matches_numpy():
    variable = keras.Variable(np.array([1.0, -2.0], "float32"), name="kernel")
    optimizer = optimization.create_optimizer(0.1, 10, 0, clipnorm=None,
                                              weight_decay_rate=0.0, epsilon=1e-6)
    grad = np.array([0.5, -0.25], "float32")
    optimizer.apply_gradients([(tf.constant(grad), variable)])
    # Adam with bias correction, step 1: m_hat = g, v_hat = g^2.
    want = np.array([1.0, -2.0]) - 0.1 * grad / (np.abs(grad) + 1e-6)
    np.testing.assert_allclose(variable.numpy(), want, rtol=1e-5)


@pytest.mark.parametrize("bias_correction", [True, False])
def test_adam_steps_match_numpy_with_small_gradients(bias_correction):
    # Gradients of 1e-6..3e-6, the size where epsilon (1e-6) matters: Keras' Adam, which
    # adds epsilon to the uncorrected root (30x larger relative to it at step 1), lands
    # 20-40% short of torch's update here.
    rng = np.random.default_rng(0)
    grads = [rng.uniform(1e-6, 3e-6, size=3).astype("float32") * [1, -1, 1]
             for _ in range(5)]
    variable = keras.Variable(np.array([0.5, -0.5, 0.25], "float32"), name="kernel")
    optimizer = optimization.create_optimizer(
        0.01, 1000, 0, clipnorm=None, weight_decay_rate=0.0,
        adam_bias_correction=bias_correction)
    for grad in grads:
        optimizer.apply_gradients([(tf.constant(grad), variable)])
    # The learning rate decays over the 1000 steps: lr(t) = 0.01 * (1 - t / 1000).
    lrs = [0.01 * (1 - t / 1000) for t in range(5)]
    want = _numpy_adam_with_lrs(grads, [0.5, -0.5, 0.25], lrs, bias_correction)
    np.testing.assert_allclose(variable.numpy(), want, rtol=1e-5)


def _numpy_adam_with_lrs(grads, start, lrs, bias_correction, beta_1=0.9, beta_2=0.999,
                         eps=1e-6):
    """torch.optim.Adam (bias_correction) or google-research's AdamWeightDecayOptimizer."""
    value, m, v = np.array(start, "float64"), 0.0, 0.0
    for step, (grad, lr) in enumerate(zip(grads, lrs), start=1):
        grad = np.asarray(grad, "float64")
        m = beta_1 * m + (1 - beta_1) * grad
        v = beta_2 * v + (1 - beta_2) * grad ** 2
        m_used, v_used = ((m / (1 - beta_1 ** step), v / (1 - beta_2 ** step))
                          if bias_correction else (m, v))
        value = value - lr * m_used / (np.sqrt(v_used) + eps)
    return value


def test_adam_weight_decay_round_trips_and_resumes_keras_adam_slots():
    optimizer = optimization.create_optimizer(1e-3, 10, 2, adam_bias_correction=False)
    assert isinstance(optimizer, optimization.AdamWeightDecay)
    restored = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(optimizer))
    assert isinstance(restored, optimization.AdamWeightDecay)
    assert restored.bias_correction is False
    assert restored.get_config()["weight_decay"] == pytest.approx(0.01)
    variable = keras.Variable(np.ones(3, "float32"), name="kernel")
    optimizer.build([variable])
    names = sorted(v.name for v in optimizer.variables)
    assert any("momentum" in n for n in names) and any("velocity" in n for n in names)
