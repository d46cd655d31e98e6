"""BertPretrainer (masked LM, optionally next-sentence prediction) and its losses."""

import collections.abc

import keras
import tensorflow as tf

from bert_tf.layers.heads import ClassificationHead, MaskedLMHead
from bert_tf.models.checkpoint_names import (dense_entries, layer_norm_entries,
                                             output_layer_entries)
from bert_tf.models.encoder import INPUT_NAMES, EncoderHeadModel, standardize_inputs


@keras.saving.register_keras_serializable(package="bert_tf")
class BertPretrainer(EncoderHeadModel):
    """An encoder with the masked-LM and next-sentence heads of BERT pre-training.

    Call with the encoder's inputs plus `masked_lm_positions` int [B, P]. Returns a dict
    `masked_lm_logits` [B, P, V] and `next_sentence_logits` [B, 2], both float32.
    The masked-LM logits use the encoder's word embeddings (tied) and are computed only
    at the P masked positions.

    Rows that pack several sequences (`sequence_ids`, `position_ids`, see `BertEncoder`)
    also give `next_sentence_positions` int [B, K], the position of each sequence's
    [CLS]; the next-sentence logits are then [B, K, 2], one per sequence, each from
    its own [CLS] through the pooler.

    Sub-layers: `encoder`, `predictions` (google-research `cls/predictions`),
    `seq_relationship` (`cls/seq_relationship`, absent without `next_sentence`).

    Args:
        encoder: A `BertEncoder`.
        next_sentence: Whether the model has the next-sentence head (False: masked LM
            only, as RoBERTa's full-sentence pre-training).
    """

    default_name = "bert_pretrainer"
    export_input_names = INPUT_NAMES + ("masked_lm_positions",)
    # The heads a previous pre-training run's checkpoint holds (bert_tf.train.warm_start).
    pretrained_heads = (("masked_lm", "cls/predictions/", "masked-LM head"),
                        ("next_sentence", "cls/seq_relationship/", "next-sentence head"))

    def __init__(self, encoder, next_sentence=True, **kwargs):
        super().__init__(encoder, **kwargs)
        cfg = encoder.config
        self.next_sentence_enabled = bool(next_sentence)
        self.masked_lm = MaskedLMHead(cfg.vocab_size, cfg.hidden_size, cfg.hidden_act,
                                      cfg.initializer_range, cfg.embedding_size,
                                      name="predictions", dtype=self.dtype_policy)
        self.next_sentence = None
        if self.next_sentence_enabled:
            self.next_sentence = ClassificationHead(
                2, cfg.hidden_size, dropout_rate=0.0,
                initializer_range=cfg.initializer_range, name="seq_relationship",
                dtype=self.dtype_policy)

    def heads(self):
        return [head for head in (self.masked_lm, self.next_sentence) if head is not None]

    def google_head_entries(self):
        """`cls/predictions/*` (transform, LayerNorm, output_bias; the decoder is the
        tied word embeddings) and `cls/seq_relationship/*` ([2, H], transposed)."""
        head = self.masked_lm
        entries = {**dense_entries("cls/predictions/transform/dense", head.transform),
                   **layer_norm_entries("cls/predictions/transform/LayerNorm",
                                        head.transform_layer_norm),
                   "cls/predictions/output_bias": (head.output_bias, False)}
        if self.next_sentence is not None:
            entries.update(output_layer_entries("cls/seq_relationship",
                                                self.next_sentence.dense))
        return entries

    def call(self, inputs, training=None):
        if "masked_lm_positions" not in inputs:
            raise ValueError("BertPretrainer inputs need `masked_lm_positions` [batch, "
                             f"max_predictions]; got keys {sorted(inputs)}.")
        outputs = self.encoder(standardize_inputs(inputs), training=training)
        positions = tf.cast(inputs["masked_lm_positions"], tf.int32)
        result = {"masked_lm_logits": self.masked_lm(  # [B, P, V]
            outputs["sequence_output"], positions, self.encoder.embeddings.embedding_table)}
        if self.next_sentence is not None:
            pooled = outputs["pooled_output"]  # [B, H]
            if inputs.get("next_sentence_positions") is not None:
                pooled = self.encoder.pooler(  # [B, K, H]
                    outputs["sequence_output"], inputs["next_sentence_positions"])
            result["next_sentence_logits"] = self.next_sentence(  # [B, 2] or [B, K, 2]
                pooled, training=training)
        return result

    def get_config(self):
        config = super().get_config()
        config.update(next_sentence=self.next_sentence_enabled)
        return config


def next_sentence_weights(features):
    """Float32 [N] weights of the next-sentence slots, flat (1.0 each when not packed)."""
    labels = tf.reshape(features["next_sentence_labels"], [-1])
    weights = features.get("next_sentence_weights")
    if weights is None:
        return tf.ones_like(labels, tf.float32)
    return tf.reshape(tf.cast(weights, tf.float32), [-1])


def pretraining_losses(features, outputs):
    """The BERT pre-training losses, in float32, and their sum.

    masked_lm_loss = sum_i w_i * CE(logits_i, id_i) / (sum_i w_i + 1e-5) over all masked
    slots (padding slots have weight 0), as in google-research/bert;
    next_sentence_loss = mean cross-entropy of the 2-way NSP logits over the sequences
    (packed rows: weighted by `next_sentence_weights`, 0 for empty slots), present when
    the model has a next-sentence head.

    Args:
        features: dict with `masked_lm_ids` int [B, P], `masked_lm_weights` float [B, P]
            and, with a next-sentence head, `next_sentence_labels` int [B], [B, 1] or
            (packed) [B, K] with `next_sentence_weights` float [B, K].
        outputs: `BertPretrainer` outputs (`masked_lm_logits`, `next_sentence_logits`).

    Returns:
        dict of scalar float32 `total_loss`, `masked_lm_loss` and `next_sentence_loss`
        (the last only with a next-sentence head).
    """
    for name, value in (("features", features), ("outputs", outputs)):
        if not isinstance(value, collections.abc.Mapping):
            raise TypeError(f"pretraining_losses: {name} must be a dict of tensors, got "
                            f"{type(value).__name__}")
    keys = ["masked_lm_ids", "masked_lm_weights"]
    if "next_sentence_logits" in outputs:
        keys.append("next_sentence_labels")
    for key in keys:
        if key not in features:
            raise ValueError(f"pretraining_losses: features lack `{key}`; got "
                             f"{sorted(features)}.")
    if "masked_lm_logits" not in outputs:
        raise ValueError("pretraining_losses: outputs lack `masked_lm_logits` (a "
                         f"BertPretrainer's outputs); got {sorted(outputs)}.")
    mlm_logits = tf.cast(outputs["masked_lm_logits"], tf.float32)  # [B, P, V]
    mlm_ids = tf.cast(features["masked_lm_ids"], tf.int32)  # [B, P]
    mlm_weights = tf.cast(features["masked_lm_weights"], tf.float32)  # [B, P]
    per_slot = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=mlm_ids, logits=mlm_logits)  # [B, P]
    masked_lm_loss = tf.reduce_sum(per_slot * mlm_weights) / (
        tf.reduce_sum(mlm_weights) + 1e-5)
    if "next_sentence_logits" not in outputs:
        return {"total_loss": masked_lm_loss, "masked_lm_loss": masked_lm_loss}
    nsp_logits = tf.reshape(tf.cast(outputs["next_sentence_logits"], tf.float32),
                            [-1, 2])  # [N, 2]
    nsp_labels = tf.reshape(tf.cast(features["next_sentence_labels"], tf.int32), [-1])
    nsp_weights = next_sentence_weights(features)  # [N]
    per_sequence = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=nsp_labels, logits=nsp_logits)  # [N]
    next_sentence_loss = tf.reduce_sum(per_sequence * nsp_weights) / tf.maximum(
        tf.reduce_sum(nsp_weights), 1e-5)
    return {"total_loss": masked_lm_loss + next_sentence_loss,
            "masked_lm_loss": masked_lm_loss,
            "next_sentence_loss": next_sentence_loss}
