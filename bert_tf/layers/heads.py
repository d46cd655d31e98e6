"""Output heads: pooler, masked LM, next sentence, classification, span, tagging.

Every head returns float32 logits, also under a mixed-precision policy.
"""

import keras
import tensorflow as tf

from bert_tf.layers.dense import Projection
from bert_tf.layers.dropout import Dropout
from bert_tf.layers.embeddings import LAYER_NORM_EPSILON


class _Head(keras.layers.Layer):
    """Base: stores constructor args for `get_config`."""

    _config_keys = ()

    def get_config(self):
        config = super().get_config()
        config.update({key: getattr(self, key) for key in self._config_keys})
        return config


@keras.saving.register_keras_serializable(package="bert_tf")
class Pooler(_Head):
    """tanh(W h_[CLS] + b): dense on the first token (google-research `bert/pooler/dense`),
    or on given positions.

    Args:
        hidden_size: Width H.
        initializer_range: Stddev of the truncated-normal initializer.
    """

    _config_keys = ("hidden_size", "initializer_range")

    def __init__(self, hidden_size, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range
        self.dense = Projection(hidden_size, activation="tanh",
                                initializer_range=initializer_range, name="dense",
                                dtype=self.dtype_policy)

    def build(self, input_shape=None):
        self.dense.build((None, self.hidden_size))
        self.built = True

    def call(self, sequence_output, positions=None):
        """Args: sequence_output [B, S, H]; positions int [B, K] or None. Returns the
        pooled first token [B, H], or with `positions` the pooled tokens there
        [B, K, H] (the [CLS] of each sequence packed into a row)."""
        if positions is None:
            return self.dense(sequence_output[:, 0])  # [B, H]
        gathered = tf.gather(sequence_output, tf.cast(positions, tf.int32),
                             batch_dims=1)  # [B, K, H]
        return self.dense(gathered)  # [B, K, H]


@keras.saving.register_keras_serializable(package="bert_tf")
class MaskedLMHead(_Head):
    """Masked-LM logits at the given positions only, via the tied word embeddings.

    gather h at `masked_lm_positions` -> dense + activation (`transform`) -> LayerNorm
    (`transform_layer_norm`) -> h E^T + `output_bias`. google-research names:
    `cls/predictions/transform/dense`, `cls/predictions/transform/LayerNorm`,
    `cls/predictions/output_bias`.

    Args:
        vocab_size, hidden_size, hidden_act, initializer_range, embedding_size: as in
            `BertConfig`; with `embedding_size` the transform maps H to E, the width of
            the tied embeddings (ELECTRA's generator).
    """

    _config_keys = ("vocab_size", "hidden_size", "hidden_act", "initializer_range",
                    "embedding_size")

    def __init__(self, vocab_size, hidden_size, hidden_act="gelu", initializer_range=0.02,
                 embedding_size=None, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.embedding_size = embedding_size
        self.transform = Projection(embedding_size or hidden_size, activation=hidden_act,
                                    initializer_range=initializer_range, name="transform",
                                    dtype=self.dtype_policy)
        self.transform_layer_norm = keras.layers.LayerNormalization(
            epsilon=LAYER_NORM_EPSILON, name="transform_layer_norm",
            dtype=self.dtype_policy)

    def build(self, input_shape=None):
        self.transform.build((None, self.hidden_size))
        self.transform_layer_norm.build((None, self.embedding_size or self.hidden_size))
        self.output_bias = self.add_weight(name="output_bias", shape=(self.vocab_size,),
                                           initializer="zeros", autocast=False)
        self.built = True

    def call(self, sequence_output, masked_lm_positions, embedding_table):
        """Args: sequence_output [B, S, H]; masked_lm_positions int [B, P];
        embedding_table [V, E]. Returns float32 logits [B, P, V]."""
        gathered = tf.gather(sequence_output, masked_lm_positions, batch_dims=1)  # [B, P, H]
        shape = tf.shape(gathered)
        flat = tf.reshape(gathered, [-1, self.hidden_size])  # [B*P, H]
        flat = self.transform_layer_norm(self.transform(flat))  # [B*P, E]
        table = tf.cast(embedding_table, self.compute_dtype)  # [V, E]
        logits = tf.matmul(flat, table, transpose_b=True)  # [B*P, V]
        logits = tf.nn.bias_add(tf.cast(logits, tf.float32), self.output_bias)
        return tf.reshape(logits, [shape[0], shape[1], self.vocab_size])


@keras.saving.register_keras_serializable(package="bert_tf")
class ClassificationHead(_Head):
    """Dropout then a dense layer; float32 logits [..., num_classes].

    Used for the next-sentence head (2 classes on the pooled output), sentence
    classification (on the pooled output) and token tagging (on every token).

    Args:
        num_classes: Output width (1 for regression).
        hidden_size: Input width H.
        dropout_rate: Dropout before the dense layer.
        initializer_range: Scale of the kernel initializer.
        kernel_distribution: "truncated_normal" or "normal" (see `Projection`).
    """

    _config_keys = ("num_classes", "hidden_size", "dropout_rate", "initializer_range",
                    "kernel_distribution")

    def __init__(self, num_classes, hidden_size, dropout_rate=0.1, initializer_range=0.02,
                 kernel_distribution="truncated_normal", **kwargs):
        super().__init__(**kwargs)
        self.num_classes = num_classes
        self.hidden_size = hidden_size
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range
        self.kernel_distribution = kernel_distribution
        self.dropout = Dropout(dropout_rate, name="dropout", dtype=self.dtype_policy)
        self.dense = Projection(num_classes, initializer_range=initializer_range,
                                kernel_distribution=kernel_distribution,
                                name="dense", dtype=self.dtype_policy)

    def build(self, input_shape=None):
        self.dropout.build()
        self.dense.build((None, self.hidden_size))
        self.built = True

    def call(self, features, training=None):
        features = self.dropout(features, training=training)
        return tf.cast(self.dense(features), tf.float32)


@keras.saving.register_keras_serializable(package="bert_tf")
class SpanHead(_Head):
    """Start/end logits for extractive QA: one dense layer to 2 units per token.

    google-research run_squad names: `cls/squad/output_weights` [2, H] and
    `cls/squad/output_bias`.

    Args:
        hidden_size: Input width H.
        initializer_range: Scale of the kernel initializer.
        kernel_distribution: "truncated_normal" or "normal" (see `Projection`).
    """

    _config_keys = ("hidden_size", "initializer_range", "kernel_distribution")

    def __init__(self, hidden_size, initializer_range=0.02,
                 kernel_distribution="truncated_normal", **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range
        self.kernel_distribution = kernel_distribution
        self.dense = Projection(2, initializer_range=initializer_range,
                                kernel_distribution=kernel_distribution, name="dense",
                                dtype=self.dtype_policy)

    def build(self, input_shape=None):
        self.dense.build((None, self.hidden_size))
        self.built = True

    def call(self, sequence_output):
        """Returns float32 (start_logits, end_logits), each [B, S]."""
        logits = tf.cast(self.dense(sequence_output), tf.float32)  # [B, S, 2]
        return logits[..., 0], logits[..., 1]
