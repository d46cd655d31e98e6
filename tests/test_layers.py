"""Layers: activations, projection, attention, Transformer block, heads, configs."""

import math

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import layers
from bert_tf.layers.activations import get_activation
from bert_tf.layers.dropout import in_xla_context

H, A = 32, 4


def test_activations_against_closed_forms():
    x = np.array([-3.0, -1.0, -0.25, 0.0, 0.5, 1.0, 2.5], "float32")
    erf = np.array([math.erf(v / math.sqrt(2.0)) for v in x])
    np.testing.assert_allclose(get_activation("gelu")(x), 0.5 * x * (1 + erf), atol=1e-6)
    # The exact and tanh forms differ: the config name must pick the right one.
    tanh_form = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    np.testing.assert_allclose(get_activation("gelu_tanh")(x), tanh_form, atol=1e-6)
    assert abs(float(get_activation("gelu")(1.0)) - 0.8413447460685429) < 1e-6
    assert abs(float(get_activation("gelu_tanh")(1.0)) - 0.8411919906082768) < 1e-6
    np.testing.assert_allclose(get_activation("relu")(x), np.maximum(x, 0))
    np.testing.assert_allclose(get_activation("swish")(x), x / (1 + np.exp(-x)), atol=1e-6)
    assert get_activation(None) is None
    with pytest.raises(ValueError, match="'gelu_new'"):
        get_activation("gelu_new")


def test_projection_on_rank3_input():
    projection = layers.Projection(5, activation="relu", name="p")
    x = np.random.default_rng(0).normal(size=(2, 3, 4)).astype("float32")
    y = projection(x)
    expected = np.maximum(x @ projection.kernel.numpy() + projection.bias.numpy(), 0)
    assert y.shape == (2, 3, 5)
    np.testing.assert_allclose(y, expected, atol=1e-6)


def test_attention_bias_from_mask():
    bias = layers.attention_bias_from_mask(np.array([[1, 1, 0]]))
    assert bias.shape == (1, 1, 1, 3) and bias.dtype == tf.float32
    np.testing.assert_array_equal(bias.numpy().ravel(), [0.0, 0.0, -10000.0])


def test_attention_matches_per_head_numpy():
    rng = np.random.default_rng(1)
    attention = layers.MultiHeadSelfAttention(H, A, dropout_rate=0.0, name="self")
    x = rng.normal(size=(2, 6, H)).astype("float32")
    mask = np.array([[1] * 6, [1, 1, 1, 1, 0, 0]], "int32")
    got = attention(x, mask).numpy()
    q, k, v = (x @ p.kernel.numpy() + p.bias.numpy()
               for p in (attention.query, attention.key, attention.value))
    d = H // A
    for b in range(2):
        real = mask[b].astype(bool)
        for head in range(A):
            cols = slice(head * d, (head + 1) * d)
            scores = q[b, :, cols] @ k[b][real][:, cols].T / math.sqrt(d)
            probs = np.exp(scores - scores.max(-1, keepdims=True))
            probs /= probs.sum(-1, keepdims=True)
            np.testing.assert_allclose(got[b, :, cols], probs @ v[b][real][:, cols],
                                       atol=1e-5)


def test_transformer_block_is_post_layer_norm():
    rng = np.random.default_rng(2)
    block = layers.TransformerBlock(H, A, 37, hidden_dropout_prob=0.0,
                                    attention_probs_dropout_prob=0.0, name="layer_0")
    x = rng.normal(size=(2, 5, H)).astype("float32")
    mask = np.ones((2, 5), "int32")
    out = block(x, mask).numpy()
    # Every block output is LayerNorm'ed with gamma=1, beta=0 at initialisation.
    np.testing.assert_allclose(out.mean(-1), 0.0, atol=1e-5)
    np.testing.assert_allclose(out.std(-1), 1.0, atol=1e-3)
    context = block.self_attention(x, mask).numpy()
    attended = context @ block.attention_output.kernel.numpy()
    attended = x + attended + block.attention_output.bias.numpy()
    attended = (attended - attended.mean(-1, keepdims=True)) / attended.std(-1, keepdims=True)
    inner = get_activation("gelu")(attended @ block.intermediate.kernel.numpy()).numpy()
    final = attended + inner @ block.output_dense.kernel.numpy()
    final = (final - final.mean(-1, keepdims=True)) / final.std(-1, keepdims=True)
    np.testing.assert_allclose(out, final, atol=1e-4)


def test_masked_lm_head_uses_positions_and_tied_table():
    rng = np.random.default_rng(3)
    head = layers.MaskedLMHead(vocab_size=11, hidden_size=H, hidden_act="relu",
                               name="predictions")
    head.build()
    head.output_bias.assign(rng.normal(size=11))
    sequence = rng.normal(size=(2, 7, H)).astype("float32")
    positions = np.array([[0, 6], [3, 3]], "int32")
    table = rng.normal(size=(11, H)).astype("float32")
    logits = head(sequence, positions, table).numpy()
    assert logits.shape == (2, 2, 11) and logits.dtype == np.float32
    gathered = np.stack([sequence[0, [0, 6]], sequence[1, [3, 3]]])
    h = np.maximum(gathered @ head.transform.kernel.numpy(), 0)
    h = (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-12)
    np.testing.assert_allclose(logits, h @ table.T + head.output_bias.numpy(), atol=1e-4)


def test_embeddings_sum_and_variable_length():
    embeddings = layers.BertEmbeddings(99, H, max_position_embeddings=16, type_vocab_size=2,
                                       dropout_rate=0.0, name="embeddings")
    embeddings.build()
    ids = np.array([[5, 6, 7]], "int32")
    segments = np.array([[0, 1, 1]], "int32")
    out = embeddings(ids, segments).numpy()
    summed = (embeddings.word_embeddings.embeddings.numpy()[ids[0]]
              + embeddings.token_type_embeddings.embeddings.numpy()[segments[0]]
              + embeddings.position_embeddings.embeddings.numpy()[:3])
    normed = (summed - summed.mean(-1, keepdims=True)) / np.sqrt(
        summed.var(-1, keepdims=True) + 1e-12)
    np.testing.assert_allclose(out[0], normed, atol=1e-5)
    with pytest.raises(ValueError, match=r"max_position_embeddings \(16\), got 17"):
        embeddings(np.ones((1, 17), "int32"), np.zeros((1, 17), "int32"))
    dynamic = tf.function(embeddings, input_signature=[tf.TensorSpec([None, None], tf.int32)] * 2)
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_position_embeddings"):
        dynamic(tf.ones((1, 17), tf.int32), tf.zeros((1, 17), tf.int32))


def test_heads_must_divide_hidden():
    with pytest.raises(ValueError, match="divisible"):
        layers.MultiHeadSelfAttention(30, 4)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_dropout_drops_rate_and_rescales_in_graph_and_xla(jit_compile):
    dropout = layers.Dropout(0.25, seed=3)
    inputs = tf.ones([64, 99, 37])  # 234,432 values
    step = tf.function(lambda x: dropout(x, training=True), jit_compile=jit_compile)
    first, second = step(inputs).numpy(), step(inputs).numpy()
    kept = first != 0
    assert abs(1 - kept.mean() - 0.25) < 0.005  # binomial sd ~0.0009
    np.testing.assert_allclose(first[kept], 1 / 0.75, rtol=1e-6)
    assert (kept != (second != 0)).mean() > 0.2  # a fresh mask on every call
    assert np.array_equal(dropout(inputs, training=False).numpy(), inputs.numpy())


def test_dropout_keeps_dtype_under_mixed_policy_in_training():
    dropout = layers.Dropout(0.1, seed=5, dtype="mixed_bfloat16", name="drop")
    outputs = dropout(tf.ones([8, 32]), training=True)
    assert outputs.dtype == tf.bfloat16
    assert isinstance(layers.MultiHeadSelfAttention(32, 4).dropout, layers.Dropout)


def _random_algorithms(jit_compile):
    """The `alg` of every stateless uniform draw in a training-mode Dropout's graph."""
    dropout = layers.Dropout(0.25, seed=3, name="drop")
    dropout.build()

    def step(x):
        return dropout(x, training=True)

    graph = tf.function(step, jit_compile=jit_compile, autograph=False).get_concrete_function(
        tf.TensorSpec([4, 8])).graph
    return [int(tf.get_static_value(op.inputs[-1])) for op in graph.get_operations()
            if op.type == "StatelessRandomUniformV2"]


def test_dropout_draws_with_threefry_under_xla_only():
    # tf.random.Algorithm: PHILOX 1, THREEFRY 2, AUTO_SELECT 3. XLA:CPU compiles the
    # automatic choice to a slow Philox; TensorFlow's CPU kernels have no ThreeFry.
    assert _random_algorithms(jit_compile=True) == [tf.random.Algorithm.THREEFRY.value]
    assert _random_algorithms(jit_compile=False) == [tf.random.Algorithm.AUTO_SELECT.value]
    with tf.Graph().as_default():  # a TF1 graph: no XLA context either
        assert not in_xla_context()


def test_dropout_makes_its_seed_generator_in_build():
    with pytest.raises(ValueError, match="rate"):
        layers.Dropout(1.5)
    dropout = layers.Dropout(0.2, seed=4, name="drop")
    assert not dropout.variables and not dropout.built
    dropout.build()
    assert [v.path for v in dropout.variables] == ["drop/seed_generator/seed_generator_state"]
    no_op = layers.Dropout(0.0, name="none")
    no_op.build()
    assert not no_op.variables
