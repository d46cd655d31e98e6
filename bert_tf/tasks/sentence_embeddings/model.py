"""A sentence encoder: a BERT encoder whose token outputs are pooled into one vector per
text (as sentence-transformers' Transformer + Pooling (+ Normalize) modules).

    model = SentenceEncoder(BertEncoder(config), pooling="mean", normalize=True)
    vectors = model(features)["embedding"]   # float32 [B, H]
"""

import keras
import tensorflow as tf

from bert_tf.models.encoder import EncoderHeadModel, standardize_inputs

# How the token outputs become one vector: the mean or the max over the real tokens
# (input_mask), or the first token's output ([CLS], without BERT's pooler).
POOLING_MODES = ("mean", "cls", "max")


def pool_tokens(sequence_output, input_mask, pooling):
    """[B, S, H] token outputs and their int [B, S] mask -> float32 [B, H]."""
    if pooling not in POOLING_MODES:
        raise ValueError(f"pooling={pooling!r}: expected one of {', '.join(POOLING_MODES)}")
    tokens = tf.cast(sequence_output, tf.float32)  # [B, S, H]
    if pooling == "cls":
        return tokens[:, 0]  # [B, H]
    mask = tf.cast(input_mask, tf.float32)[:, :, tf.newaxis]  # [B, S, 1]
    if pooling == "max":
        # Padding gets the lowest float so that it never wins (sentence-transformers: -1e9).
        return tf.reduce_max(tokens * mask + (1.0 - mask) * -1e9, axis=1)  # [B, H]
    total = tf.reduce_sum(tokens * mask, axis=1)  # [B, H]
    return total / tf.maximum(tf.reduce_sum(mask, axis=1), 1e-9)  # [B, H]


@keras.saving.register_keras_serializable(package="bert_tf")
class SentenceEncoder(EncoderHeadModel):
    """One vector per text: the encoder's token outputs pooled over the real tokens,
    optionally L2-normalized.

    Call with the encoder's inputs (`input_ids`, `input_mask`, `segment_ids`, each
    [B, S]); returns dict `embedding` float32 [B, H] and `sequence_output` [B, S, H].
    Has no weights of its own: the pooling and normalization are computations.

    Args:
      encoder: A `BertEncoder`.
      pooling: One of `POOLING_MODES` (default "mean", as all-MiniLM-L6-v2).
      normalize: L2-normalize the vector (cosine similarity is then a dot product).
    """

    default_name = "sentence_encoder"

    def __init__(self, encoder, pooling="mean", normalize=False, **kwargs):
        super().__init__(encoder, **kwargs)
        if pooling not in POOLING_MODES:
            raise ValueError(f"pooling={pooling!r}: expected one of "
                             f"{', '.join(POOLING_MODES)}")
        self.pooling = pooling
        self.normalize = bool(normalize)
        encoder.pooler.trainable = False  # no head reads BERT's pooler

    def heads(self):
        return []

    def call(self, inputs, training=None):
        features = standardize_inputs(inputs)
        sequence_output = self.encoder(features, training=training)["sequence_output"]
        embedding = pool_tokens(sequence_output, features["input_mask"], self.pooling)
        if self.normalize:
            embedding = tf.math.l2_normalize(embedding, axis=-1)  # [B, H]
        return {"embedding": embedding, "sequence_output": sequence_output}

    def get_config(self):
        config = super().get_config()
        config.update(pooling=self.pooling, normalize=self.normalize)
        return config
