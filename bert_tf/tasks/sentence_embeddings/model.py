"""A sentence encoder: a BERT encoder whose token outputs are pooled into one vector per
text (as sentence-transformers' Transformer + Pooling (+ Normalize) modules).

    model = SentenceEncoder(BertEncoder(config), pooling="mean", normalize=True)
    vectors = model(features)["embedding"]   # float32 [B, H]
"""

import keras
import tensorflow as tf

from bert_tf.models.encoder import EncoderHeadModel, standardize_inputs
from bert_tf.tasks.sentence_embeddings.options import POOLING_MODES


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


def pool_packed_tokens(sequence_output, features, pooling):
    """Token outputs of packed rows [R, S, H] -> one vector per text, in the batch's text
    order, float32 [T, H] (`data.pack_batch`: `sequence_ids` [R, S] say which slot a token
    is in, `cls_positions` [R, K] where each slot's text starts, `text_number` [R, K] the
    1-based position of each slot's text, 0 for an empty slot).
    """
    tokens = tf.cast(sequence_output, tf.float32)  # [R, S, H]
    numbers = tf.cast(features["text_number"], tf.int32)  # [R, K]
    if pooling == "cls":
        pooled = tf.gather(tokens, tf.cast(features["cls_positions"], tf.int32),
                           batch_dims=1)  # [R, K, H]
    else:
        slots = tf.range(1, tf.shape(numbers)[1] + 1)  # [K]
        member = tf.cast(tf.equal(tf.cast(features["sequence_ids"], tf.int32)[:, None, :],
                                  slots[None, :, None]), tf.float32)  # [R, K, S]
        if pooling == "max":
            member = member[..., tf.newaxis]  # [R, K, S, 1]
            pooled = tf.reduce_max(tokens[:, tf.newaxis] * member + (1.0 - member) * -1e9,
                                   axis=2)  # [R, K, H]
        else:
            pooled = tf.einsum("rks,rsh->rkh", member, tokens) / tf.maximum(
                tf.reduce_sum(member, axis=-1, keepdims=True), 1e-9)  # [R, K, H]
    real = numbers > 0
    vectors = tf.boolean_mask(pooled, real)  # [T, H], in slot order
    order = tf.boolean_mask(numbers, real) - 1  # [T]: each vector's text position
    return tf.gather(vectors, tf.math.invert_permutation(order))  # [T, H]


@keras.saving.register_keras_serializable(package="bert_tf")
class SentenceEncoder(EncoderHeadModel):
    """One vector per text: the encoder's token outputs pooled over the real tokens,
    optionally L2-normalized.

    Call with the encoder's inputs (`input_ids`, `input_mask`, `segment_ids`, each
    [B, S]); returns dict `embedding` float32 [B, H] and `sequence_output` [B, S, H].
    Rows that pack several texts (`data.pack_batch`) give `embedding` [T, H], one vector
    per text in the order of the texts before packing.
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
        if "text_number" in inputs:  # rows packing several texts (data.pack_batch)
            embedding = pool_packed_tokens(sequence_output, inputs, self.pooling)  # [T, H]
        else:
            embedding = pool_tokens(sequence_output, features["input_mask"],
                                    self.pooling)  # [B, H]
        if self.normalize:
            embedding = tf.math.l2_normalize(embedding, axis=-1)  # [B, H]
        return {"embedding": embedding, "sequence_output": sequence_output}

    def get_config(self):
        config = super().get_config()
        config.update(pooling=self.pooling, normalize=self.normalize)
        return config
