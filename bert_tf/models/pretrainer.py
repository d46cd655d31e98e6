"""BertPretrainer (masked LM + next-sentence prediction) and its losses."""

import keras
import tensorflow as tf

from bert_tf.layers.heads import ClassificationHead, MaskedLMHead
from bert_tf.models.encoder import EncoderHeadModel, standardize_inputs


@keras.saving.register_keras_serializable(package="bert_tf")
class BertPretrainer(EncoderHeadModel):
    """An encoder with the masked-LM and next-sentence heads of BERT pre-training.

    Call with the encoder's inputs plus `masked_lm_positions` int [B, P]. Returns a dict
    `masked_lm_logits` [B, P, V] and `next_sentence_logits` [B, 2], both float32.
    The masked-LM logits use the encoder's word embeddings (tied) and are computed only
    at the P masked positions.

    Sub-layers: `encoder`, `predictions` (google-research `cls/predictions`),
    `seq_relationship` (`cls/seq_relationship`).

    Args:
        encoder: A `BertEncoder`.
    """

    def __init__(self, encoder, **kwargs):
        super().__init__(encoder, **kwargs)
        cfg = encoder.config
        self.masked_lm = MaskedLMHead(cfg.vocab_size, cfg.hidden_size, cfg.hidden_act,
                                      cfg.initializer_range, name="predictions",
                                      dtype=self.dtype_policy)
        self.next_sentence = ClassificationHead(
            2, cfg.hidden_size, dropout_rate=0.0, initializer_range=cfg.initializer_range,
            name="seq_relationship", dtype=self.dtype_policy)

    def heads(self):
        return [self.masked_lm, self.next_sentence]

    def call(self, inputs, training=None):
        if "masked_lm_positions" not in inputs:
            raise ValueError("BertPretrainer inputs need `masked_lm_positions` [batch, "
                             f"max_predictions]; got keys {sorted(inputs)}.")
        input_ids, input_mask, segment_ids = standardize_inputs(inputs)
        outputs = self.encoder({"input_ids": input_ids, "input_mask": input_mask,
                                "segment_ids": segment_ids}, training=training)
        positions = tf.cast(inputs["masked_lm_positions"], tf.int32)
        masked_lm_logits = self.masked_lm(
            outputs["sequence_output"], positions, self.encoder.embeddings.embedding_table)
        next_sentence_logits = self.next_sentence(outputs["pooled_output"],
                                                  training=training)
        return {"masked_lm_logits": masked_lm_logits,  # [B, P, V]
                "next_sentence_logits": next_sentence_logits}  # [B, 2]


def pretraining_losses(features, outputs):
    """The two BERT pre-training losses, in float32, and their sum.

    masked_lm_loss = sum_i w_i * CE(logits_i, id_i) / (sum_i w_i + 1e-5) over all masked
    slots (padding slots have weight 0), as in google-research/bert;
    next_sentence_loss = mean cross-entropy of the 2-way NSP logits.

    Args:
        features: dict with `masked_lm_ids` int [B, P], `masked_lm_weights` float [B, P]
            and `next_sentence_labels` int [B] or [B, 1].
        outputs: `BertPretrainer` outputs (`masked_lm_logits`, `next_sentence_logits`).

    Returns:
        dict of scalar float32 `total_loss`, `masked_lm_loss`, `next_sentence_loss`.
    """
    for key in ("masked_lm_ids", "masked_lm_weights", "next_sentence_labels"):
        if key not in features:
            raise ValueError(f"pretraining_losses: features lack `{key}`; got "
                             f"{sorted(features)}.")
    mlm_logits = tf.cast(outputs["masked_lm_logits"], tf.float32)  # [B, P, V]
    mlm_ids = tf.cast(features["masked_lm_ids"], tf.int32)  # [B, P]
    mlm_weights = tf.cast(features["masked_lm_weights"], tf.float32)  # [B, P]
    per_slot = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=mlm_ids, logits=mlm_logits)  # [B, P]
    masked_lm_loss = tf.reduce_sum(per_slot * mlm_weights) / (
        tf.reduce_sum(mlm_weights) + 1e-5)
    nsp_logits = tf.cast(outputs["next_sentence_logits"], tf.float32)  # [B, 2]
    nsp_labels = tf.reshape(tf.cast(features["next_sentence_labels"], tf.int32), [-1])
    next_sentence_loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=nsp_labels, logits=nsp_logits))
    return {"total_loss": masked_lm_loss + next_sentence_loss,
            "masked_lm_loss": masked_lm_loss,
            "next_sentence_loss": next_sentence_loss}
