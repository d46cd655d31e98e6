"""BERT input embeddings: word + segment + position, LayerNorm, dropout."""

import keras
import tensorflow as tf

from bert_tf.layers.dense import truncated_normal
from bert_tf.layers.dropout import Dropout

LAYER_NORM_EPSILON = 1e-12


@keras.saving.register_keras_serializable(package="bert_tf")
class PositionEmbedding(keras.layers.Layer):
    """Learned absolute position embeddings: rows [S, H] for inputs [B, S, ...], or the
    rows of given position ids.

    Args:
        max_length: Rows of the table (`max_position_embeddings`).
        width: Embedding width H.
        initializer_range: Stddev of the truncated-normal initializer.
    """

    def __init__(self, max_length, width, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.max_length = max_length
        self.width = width
        self.initializer_range = initializer_range

    def build(self, input_shape=None):
        self.embeddings = self.add_weight(
            name="embeddings", shape=(self.max_length, self.width),
            initializer=truncated_normal(self.initializer_range))
        self.built = True

    def call(self, inputs, position_ids=None):
        """Rows [S, H] for inputs [B, S, ...]; with `position_ids` int [B, S] (e.g.
        restarting at 0 for every sequence packed into a row), their rows [B, S, H]."""
        table = tf.cast(self.embeddings, self.compute_dtype)
        if position_ids is not None:
            return tf.gather(table, tf.cast(position_ids, tf.int32))  # [B, S, H]
        seq_length = inputs.shape[1]
        if seq_length is None:
            seq_length = tf.shape(inputs)[1]
        message = (f"sequence length must be at most max_position_embeddings "
                   f"({self.max_length})")
        if isinstance(seq_length, int):
            if seq_length > self.max_length:
                raise ValueError(f"{message}, got {seq_length}.")
        else:
            # The slice waits for the check: else the model's add of [S, H] rows can fail
            # first, with a shape error that does not name the limit.
            check = tf.debugging.assert_less_equal(seq_length, self.max_length,
                                                   message=message)
            with tf.control_dependencies([check] if check is not None else []):
                seq_length = tf.identity(seq_length)
        return table[:seq_length]  # [S, H]

    def get_config(self):
        config = super().get_config()
        config.update(max_length=self.max_length, width=self.width,
                      initializer_range=self.initializer_range)
        return config


@keras.saving.register_keras_serializable(package="bert_tf")
class BertEmbeddings(keras.layers.Layer):
    """Sum of word, segment (token type) and position embeddings, then LayerNorm, dropout.

    Sub-layers (google-research names in brackets): `word_embeddings`
    [bert/embeddings/word_embeddings], `token_type_embeddings`, `position_embeddings`,
    `LayerNorm`.

    Args:
        vocab_size, hidden_size, max_position_embeddings, type_vocab_size,
        dropout_rate, initializer_range: as in `BertConfig`.
    """

    def __init__(self, vocab_size, hidden_size, max_position_embeddings=512,
                 type_vocab_size=16, dropout_rate=0.1, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range
        self.word_embeddings = keras.layers.Embedding(
            vocab_size, hidden_size, embeddings_initializer=truncated_normal(
                initializer_range), name="word_embeddings", dtype=self.dtype_policy)
        self.token_type_embeddings = keras.layers.Embedding(
            type_vocab_size, hidden_size, embeddings_initializer=truncated_normal(
                initializer_range), name="token_type_embeddings", dtype=self.dtype_policy)
        self.position_embeddings = PositionEmbedding(
            max_position_embeddings, hidden_size, initializer_range,
            name="position_embeddings", dtype=self.dtype_policy)
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=LAYER_NORM_EPSILON, name="LayerNorm", dtype=self.dtype_policy)
        self.dropout = Dropout(dropout_rate, name="dropout", dtype=self.dtype_policy)

    def build(self, input_shape=None):
        self.word_embeddings.build((None, None))
        self.token_type_embeddings.build((None, None))
        self.position_embeddings.build()
        self.layer_norm.build((None, None, self.hidden_size))
        self.dropout.build()
        self.built = True

    @property
    def embedding_table(self):
        """The word-embedding matrix [V, H] (tied with the masked-LM output layer)."""
        return self.word_embeddings.embeddings

    def call(self, input_ids, segment_ids, position_ids=None, training=None):
        """Args: input_ids, segment_ids int [B, S]; position_ids int [B, S] or None
        (0 ... S-1 in every row). Returns [B, S, H]."""
        embeddings = self.word_embeddings(input_ids)  # [B, S, H]
        embeddings += self.token_type_embeddings(segment_ids)  # [B, S, H]
        if position_ids is None:
            embeddings += self.position_embeddings(input_ids)[tf.newaxis]  # [1, S, H]
        else:
            embeddings += self.position_embeddings(input_ids, position_ids)  # [B, S, H]
        embeddings = self.layer_norm(embeddings)
        return self.dropout(embeddings, training=training)

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, hidden_size=self.hidden_size,
                      max_position_embeddings=self.max_position_embeddings,
                      type_vocab_size=self.type_vocab_size,
                      dropout_rate=self.dropout_rate,
                      initializer_range=self.initializer_range)
        return config
