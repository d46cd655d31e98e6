"""Multi-head self-attention with an additive mask (Vaswani et al., sec. 3.2).

The mask is a padding mask [B, S] (1 for real tokens) or a 3-D attention mask
[B, S, S] (1 where query i may attend to key j), e.g. the block-diagonal mask of rows
that pack several sequences (`packed_attention_mask`).
"""

import math

import keras
import tensorflow as tf

from bert_tf.layers.dense import Projection
from bert_tf.layers.dropout import Dropout

# Added to the scores of padded keys, as in google-research/bert.
MASK_ADDER = -10000.0


def attention_bias_from_mask(input_mask):
    """Additive float32 bias: 0 where attention is allowed, -10000 elsewhere.

    Args:
        input_mask: integer or boolean tensor, [B, S] (1 for real tokens; gives a bias
            [B, 1, 1, S]) or [B, S, S] (1 where query i may attend to key j; gives
            [B, 1, S, S]).
    """
    mask = tf.cast(input_mask, tf.float32)
    if mask.shape.rank == 3:
        mask = mask[:, tf.newaxis]  # [B, 1, S, S]
    else:
        mask = mask[:, tf.newaxis, tf.newaxis, :]  # [B, 1, 1, S]
    return (1.0 - mask) * MASK_ADDER


def packed_attention_mask(sequence_ids):
    """Block-diagonal attention mask [B, S, S] int32 of rows packing several sequences.

    Args:
        sequence_ids: int [B, S], the 1-based index of the sequence each token belongs
            to within its row, 0 for padding.

    Returns:
        1 where query i and key j belong to the same sequence (padding attends nothing).
    """
    sequence_ids = tf.cast(sequence_ids, tf.int32)
    same = tf.equal(sequence_ids[:, :, tf.newaxis], sequence_ids[:, tf.newaxis, :])
    real_key = tf.greater(sequence_ids, 0)[:, tf.newaxis, :]  # [B, 1, S]
    return tf.cast(tf.logical_and(same, real_key), tf.int32)  # [B, S, S]


@keras.saving.register_keras_serializable(package="bert_tf")
class MultiHeadSelfAttention(keras.layers.Layer):
    """Scaled dot-product self-attention over A heads, returning the concatenated heads.

    Sub-layers `query`, `key`, `value` (google-research: `attention/self/query` ...)
    keep separate [H, H] kernels; the call concatenates them into one [H, 3H]
    projection so that the three matmuls run as one (their LoRA adapters, when
    enabled, add their low-rank updates to it). Scores, mask and softmax are
    float32 under mixed precision.

    Args:
        hidden_size: Model width H.
        num_heads: Number of heads A (divides H).
        dropout_rate: Dropout on the attention probabilities.
        initializer_range: Stddev of the truncated-normal initializer.
    """

    def __init__(self, hidden_size, num_heads, dropout_rate=0.1, initializer_range=0.02,
                 **kwargs):
        super().__init__(**kwargs)
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size ({hidden_size}) must be divisible by "
                             f"num_heads ({num_heads}).")
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range
        self.head_size = hidden_size // num_heads
        self.query, self.key, self.value = (
            Projection(hidden_size, initializer_range=initializer_range, name=name,
                       dtype=self.dtype_policy) for name in ("query", "key", "value"))
        self.dropout = Dropout(dropout_rate, name="dropout", dtype=self.dtype_policy)

    def build(self, input_shape=None):
        for projection in (self.query, self.key, self.value):
            projection.build((None, self.hidden_size))
        self.dropout.build()
        self.built = True

    def call(self, hidden_states, input_mask, training=None):
        """Args: hidden_states [B, S, H]; input_mask int [B, S] (1 for real tokens) or
        [B, S, S] (1 where query i may attend to key j).

        Returns: [B, S, H], the heads' context vectors side by side.
        """
        shape = tf.shape(hidden_states)
        batch_size, seq_length = shape[0], shape[1]
        dtype = self.compute_dtype
        kernel = tf.concat([tf.cast(p.kernel, dtype) for p in (
            self.query, self.key, self.value)], axis=1)  # [H, 3H]
        bias = tf.concat([tf.cast(p.bias, dtype) for p in (
            self.query, self.key, self.value)], axis=0)  # [3H]
        flat = tf.reshape(hidden_states, [-1, self.hidden_size])  # [B*S, H]
        qkv = tf.nn.bias_add(tf.matmul(flat, kernel), bias)  # [B*S, 3H]
        qkv = self._add_lora_updates(qkv, flat, training)
        qkv = tf.reshape(qkv, [batch_size, seq_length, 3, self.num_heads, self.head_size])
        qkv = tf.transpose(qkv, [2, 0, 3, 1, 4])  # [3, B, A, S, d]
        query = qkv[0] * tf.cast(1.0 / math.sqrt(self.head_size), dtype)  # [B, A, S, d]
        scores = tf.matmul(query, qkv[1], transpose_b=True)  # [B, A, S, S]
        # The mask goes in as integers: Keras would cast a float bias to bfloat16.
        scores = tf.cast(scores, tf.float32) + attention_bias_from_mask(input_mask)
        probs = tf.cast(tf.nn.softmax(scores, axis=-1), dtype)
        probs = self.dropout(probs, training=training)
        context = tf.matmul(probs, qkv[2])  # [B, A, S, d]
        context = tf.transpose(context, [0, 2, 1, 3])  # [B, S, A, d]
        return tf.reshape(context, [batch_size, seq_length, self.hidden_size])

    def _add_lora_updates(self, qkv, flat, training):
        """qkv [N, 3H] plus the LoRA updates (dropout(x) A B alpha/R) of those of
        `query`, `key`, `value` that have adapters (`Projection.enable_lora`); the
        low-rank path, so that no [H, 3H] kernel gradient is computed."""
        projections = (self.query, self.key, self.value)
        if not any(p.lora_enabled for p in projections):
            return qkv
        updates = [p.lora_update(flat, training) if p.lora_enabled
                   else tf.zeros_like(qkv[:, :self.hidden_size]) for p in projections]
        return qkv + tf.concat(updates, axis=1)

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, num_heads=self.num_heads,
                      dropout_rate=self.dropout_rate,
                      initializer_range=self.initializer_range)
        return config
