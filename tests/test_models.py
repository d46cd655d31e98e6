"""BertEncoder / BertPretrainer / task models: numpy reference, training, round trips."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.weights.checkpoints import google_variable_map
from bert_tf.models import (BertClassifier, BertEncoder, BertPretrainer, BertSpanLabeler,
                            BertTokenClassifier, pretraining_losses)
from harness import tiny_config, tiny_model
import numpy_bert

B, S, P = 3, 16, 4


def make_inputs(seed=0, batch=B, seq=S, positions=P):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(seq // 2, seq + 1, batch)
    lengths[0] = seq
    mask = (np.arange(seq)[None] < lengths[:, None]).astype("int32")
    segments = (np.arange(seq)[None] >= lengths[:, None] // 2).astype("int32") * mask
    return {
        "input_ids": (rng.integers(1, 99, (batch, seq)) * mask).astype("int32"),
        "input_mask": mask,
        "segment_ids": segments.astype("int32"),
        "masked_lm_positions": rng.integers(0, seq // 2, (batch, positions)).astype("int32"),
    }


def make_labels(seed=1, batch=B, positions=P):
    rng = np.random.default_rng(seed)
    weights = np.ones((batch, positions), "float32")
    weights[-1, -1] = 0.0
    return {"masked_lm_ids": rng.integers(0, 99, (batch, positions)).astype("int32"),
            "masked_lm_weights": weights,
            "next_sentence_labels": rng.integers(0, 2, (batch,)).astype("int32")}


def google_weights(model):
    """Model weights keyed by google-research name, in the checkpoint layout."""
    return {name: (var.numpy().T if transposed else var.numpy())
            for name, (var, transposed) in google_variable_map(model).items()}


def encoder_only(inputs):
    return {k: inputs[k] for k in ("input_ids", "input_mask", "segment_ids")}


@pytest.fixture
def pretrainer():
    model = tiny_model(BertPretrainer, tiny_config(), 0)
    rng = np.random.default_rng(5)  # non-trivial LayerNorm/bias values
    for var in model.weights:
        if var.path.endswith(("beta", "bias", "gamma")):
            var.assign(var.numpy() + rng.normal(0, 0.1, var.shape))
    return model


def test_encoder_matches_numpy_reference(pretrainer):
    inputs = make_inputs()
    outputs = pretrainer.encoder(encoder_only(inputs))
    sequence, pooled, layers = numpy_bert.encoder_forward(
        google_weights(pretrainer), 2, 4, inputs["input_ids"], inputs["input_mask"],
        inputs["segment_ids"])
    assert outputs["sequence_output"].shape == (B, S, 32)
    np.testing.assert_allclose(outputs["sequence_output"], sequence, atol=1e-5)
    np.testing.assert_allclose(outputs["pooled_output"], pooled, atol=1e-5)
    assert len(outputs["encoder_outputs"]) == 2
    np.testing.assert_allclose(outputs["encoder_outputs"][0], layers[0], atol=1e-5)


def test_pretrainer_matches_numpy_reference(pretrainer):
    inputs = make_inputs()
    outputs = pretrainer(inputs)
    weights = google_weights(pretrainer)
    sequence, pooled, _ = numpy_bert.encoder_forward(
        weights, 2, 4, inputs["input_ids"], inputs["input_mask"], inputs["segment_ids"])
    mlm, nsp = numpy_bert.pretraining_heads(weights, sequence, pooled,
                                            inputs["masked_lm_positions"])
    assert outputs["masked_lm_logits"].dtype == tf.float32
    assert outputs["masked_lm_logits"].shape == (B, P, 99)
    np.testing.assert_allclose(outputs["masked_lm_logits"], mlm, atol=1e-5)
    np.testing.assert_allclose(outputs["next_sentence_logits"], nsp, atol=1e-5)


def test_pretraining_losses_match_hand_computation():
    rng = np.random.default_rng(3)
    mlm_logits = rng.normal(size=(2, 3, 5)).astype("float32")
    nsp_logits = rng.normal(size=(2, 2)).astype("float32")
    features = {"masked_lm_ids": np.array([[1, 4, 0], [2, 2, 3]]),
                "masked_lm_weights": np.array([[1, 1, 0], [1, 0, 0]], "float32"),
                "next_sentence_labels": np.array([[1], [0]])}
    losses = pretraining_losses(features, {"masked_lm_logits": mlm_logits,
                                           "next_sentence_logits": nsp_logits})

    def nll(logits, label):
        return np.log(np.exp(logits).sum()) - logits[label]

    mlm = (nll(mlm_logits[0, 0], 1) + nll(mlm_logits[0, 1], 4)
           + nll(mlm_logits[1, 0], 2)) / (3 + 1e-5)
    nsp = (nll(nsp_logits[0], 1) + nll(nsp_logits[1], 0)) / 2
    np.testing.assert_allclose(losses["masked_lm_loss"], mlm, rtol=1e-5)
    np.testing.assert_allclose(losses["next_sentence_loss"], nsp, rtol=1e-5)
    np.testing.assert_allclose(losses["total_loss"], mlm + nsp, rtol=1e-5)
    with pytest.raises(ValueError, match="masked_lm_weights"):
        pretraining_losses({"masked_lm_ids": 0, "next_sentence_labels": 0}, {})


def _train_twice(model, jit_compile):
    inputs, labels = make_inputs(), make_labels()
    optimizer = keras.optimizers.AdamW(learning_rate=1e-2)
    variables = model.trainable_variables

    def step(features):
        with tf.GradientTape() as tape:
            loss = pretraining_losses(features, model(features, training=True))
        optimizer.apply_gradients(zip(tape.gradient(loss["total_loss"], variables),
                                      variables))
        return loss["total_loss"]

    if jit_compile is not None:
        step = tf.function(step, jit_compile=jit_compile)

    def eval_loss():
        return float(pretraining_losses(labels, model(inputs))["total_loss"])

    before = eval_loss()
    step({**inputs, **labels})
    step({**inputs, **labels})
    return before, eval_loss()


def test_training_step_lowers_loss(pretrainer):
    before, after = _train_twice(pretrainer, jit_compile=None)  # eager: quick on 2 cores
    assert after < before - 0.05


@pytest.mark.slow
def test_training_step_lowers_loss_under_jit(pretrainer):
    before, after = _train_twice(pretrainer, jit_compile=True)
    assert after < before - 0.05


def test_variable_length_and_jit_agree_with_eager(pretrainer):
    encoder = pretrainer.encoder
    spec = tf.TensorSpec([None, None], tf.int32)
    forward = tf.function(lambda x: encoder(x)["sequence_output"], jit_compile=True,
                          input_signature=[{"input_ids": spec, "input_mask": spec,
                                            "segment_ids": spec}])
    for seq in (5, 16):
        inputs = encoder_only(make_inputs(seq=seq, batch=2))
        eager = encoder(inputs)["sequence_output"]
        np.testing.assert_allclose(forward(inputs), eager, atol=1e-5)
        assert eager.shape == (2, seq, 32)


def test_dropout_only_in_training(pretrainer):
    inputs = encoder_only(make_inputs())
    a, b = (pretrainer.encoder(inputs)["sequence_output"] for _ in range(2))
    np.testing.assert_array_equal(a, b)
    c = pretrainer.encoder(inputs, training=True)["sequence_output"]
    assert not np.allclose(a, c, atol=1e-3)


def test_pretraining_losses_are_float32_for_half_precision_logits():
    # The models' dtypes under a mixed policy: tests/contract.py (check_mixed_precision).
    logits = {"masked_lm_logits": tf.random.normal((B, P, 99), dtype=tf.bfloat16),
              "next_sentence_logits": tf.random.normal((B, 2), dtype=tf.float16)}
    losses = pretraining_losses(make_labels(), logits)
    assert all(loss.dtype == tf.float32 for loss in losses.values())


def test_task_model_outputs():
    inputs = make_inputs()
    keras.utils.set_random_seed(1)
    encoder = BertEncoder(tiny_config())
    classifier = BertClassifier(BertEncoder(tiny_config()), num_classes=3, dropout_rate=0.2)
    span = BertSpanLabeler(BertEncoder(tiny_config(hidden_act="relu")),
                           head_initializer="normal")
    tagger = BertTokenClassifier(BertEncoder(tiny_config()), num_classes=5)
    assert classifier(inputs)["logits"].shape == (B, 3)
    start, end = span(inputs)["start_logits"], span(inputs)["end_logits"]
    assert start.shape == end.shape == (B, S) and start.dtype == tf.float32
    assert tagger(inputs)["logits"].shape == (B, S, 5)
    pooled = encoder(inputs)["pooled_output"]
    assert pooled.shape == (B, 32)
    with pytest.raises(ValueError, match="num_classes"):
        BertClassifier(encoder, num_classes=0)
    with pytest.raises(ValueError, match="masked_lm_positions"):
        BertPretrainer(encoder)(encoder_only(inputs))


def test_encoder_takes_a_config_dict():
    encoder = BertEncoder(tiny_config().to_dict())
    assert encoder.config == tiny_config()
    assert BertEncoder.from_config(encoder.get_config()).config == tiny_config()


def test_keras_export_serves_the_classifier(tmp_path, pretrainer):
    # tf.saved_model.save / load of every model: tests/contract.py (check_saved_model).
    spec = tf.TensorSpec([None, None], tf.int32)
    signature = {"input_ids": spec, "input_mask": spec, "segment_ids": spec}
    inputs = encoder_only(make_inputs())
    classifier = BertClassifier(pretrainer.encoder, num_classes=2)
    expected_logits = classifier(inputs)["logits"]
    export_path = str(tmp_path / "exported")
    classifier.export(export_path, input_signature=[signature], verbose=False)
    restored = tf.saved_model.load(export_path)
    np.testing.assert_allclose(restored.serve(inputs)["logits"], expected_logits,
                               atol=1e-6)


def _keras_outputs(model, inputs):
    """The model's outputs as `model.export` serves them (the encoder's list stacked)."""
    outputs = dict(model(inputs, training=False))
    if "encoder_outputs" in outputs:
        outputs["encoder_outputs"] = tf.stack(outputs["encoder_outputs"], axis=1)
    return outputs


@pytest.mark.parametrize("kind", ["encoder", "classifier", "pretrainer"])
def test_model_export_serves_int32_ids_of_any_length(tmp_path, pretrainer, kind):
    # Plain `model.export(path)`: Keras alone inferred float32 inputs of the first call's
    # length (3 here) and could not return the encoder's list `encoder_outputs`.
    model = {"encoder": pretrainer.encoder, "pretrainer": pretrainer,
             "classifier": BertClassifier(pretrainer.encoder, num_classes=2)}[kind]
    names = ["input_ids", "input_mask", "segment_ids"] + (
        ["masked_lm_positions"] if kind == "pretrainer" else [])
    pick = lambda inputs: {name: inputs[name] for name in names}  # noqa: E731
    model(pick(make_inputs(seq=3)))
    model.export(str(tmp_path / kind), verbose=False)
    restored = tf.saved_model.load(str(tmp_path / kind))
    signature = restored.signatures["serving_default"]
    assert {name: (spec.dtype, spec.shape.as_list()) for name, spec in
            signature.structured_input_signature[1].items()} == {
                name: (tf.int32, [None, None]) for name in names}
    for seq in (5, 11):
        inputs = pick(make_inputs(seed=seq, seq=seq))
        expected = _keras_outputs(model, inputs)
        for served in (restored.serve(inputs), signature(**inputs)):
            assert sorted(served) == sorted(expected)
            for key, value in expected.items():
                np.testing.assert_allclose(served[key], value, atol=1e-5, err_msg=key)
    inputs = pick(make_inputs(seq=5))
    inputs["input_mask"] = inputs["input_mask"][:1]  # would broadcast over the batch
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"input_mask has shape\] \[1 5\].*input_ids has shape\] \[3 5\]"):
        restored.serve(inputs)


@pytest.mark.parametrize("make_model, head", [
    (lambda init: BertClassifier(BertEncoder(tiny_config()), 3, head_initializer=init),
     "classifier"),
    (lambda init: BertTokenClassifier(BertEncoder(tiny_config()), 3, head_initializer=init),
     "token_classifier"),
    (lambda init: BertSpanLabeler(BertEncoder(tiny_config()), head_initializer=init),
     "span_head"),
])
def test_head_initializer_draws_the_named_distribution(make_model, head):
    # truncated_normal (google-research) never exceeds 2 r and has std 0.88 r; normal
    # (transformers) has std r with tails past 2 r. Kernels are [32, C], pooled over 20
    # models per distribution so that the figures are not one draw's.
    r = tiny_config().initializer_range
    draws = {}
    keras.utils.set_random_seed(7)
    for init in ("truncated_normal", "normal"):
        kernels = []
        for _ in range(20):
            model = make_model(init)
            model.build()
            kernels.append(model.head.dense.kernel.numpy().ravel())
            assert model.head.name == head and not model.head.dense.bias.numpy().any()
        draws[init] = np.concatenate(kernels)
    assert np.abs(draws["truncated_normal"]).max() <= 2 * r + 1e-7
    assert draws["truncated_normal"].std() == pytest.approx(0.88 * r, rel=0.05)
    assert draws["normal"].std() == pytest.approx(r, rel=0.05)
    assert np.abs(draws["normal"]).max() > 2 * r
    with pytest.raises(ValueError, match="kernel distribution"):
        make_model("uniform")
