"""The distillation losses, as pure functions of tensors (no model, no options).

    soft = soft_target_loss(student_logits, teacher_logits, temperature=2.0)
    hidden = hidden_mse(student_hidden, teacher_hidden, weights=input_mask)

Each follows a published implementation, so that `bench/distillation_loss_check.py` can
compare it with the reference code on the same tensors:

- `soft_target_loss`: transformers' DistilBERT distiller, `KLDivLoss(reduction=
  "batchmean")(log_softmax(s / T), softmax(t / T)) * T**2` (Hinton et al., 2015).
- `sigmoid_soft_target_loss`: the same per label, for multi-label heads: the KL of two
  Bernoulli distributions sigmoid(t / T) and sigmoid(s / T), times T**2.
- `hidden_mse`: TinyBERT's `MSELoss()` of two hidden states (after the student's
  projection to the teacher's width).
- `hidden_cosine`: DistilBERT's `CosineEmbeddingLoss` with target 1: 1 - cos per token.
- `attention_score_mse`: TinyBERT's attention loss: the MSE of the attention scores
  (before softmax), the masked ones (<= -100) set to 0 on both sides.
- `relation_kl`: MiniLM's self-attention (and value-relation) distillation: the KL of
  the teacher's and the student's attention distributions, per head and query.

`weights` (optional, per row or per token: 1 real, 0 padding or not counted) turn a
plain mean into a mean over the weighted rows; all ones gives the reference's value.
Everything is computed in float32.
"""

import math

import tensorflow as tf

# TinyBERT sets attention scores at or below this (masked keys) to 0 before the MSE.
MASKED_SCORE = -1e2


def _float(tensor):
    return tf.cast(tensor, tf.float32)


def weighted_mean(values, weights=None):
    """Mean of `values`, or sum(values * weights) / sum(weights) (0 when no weight)."""
    values = _float(values)
    if weights is None:
        return tf.reduce_mean(values)
    weights = tf.broadcast_to(_float(weights), tf.shape(values))
    return tf.math.divide_no_nan(tf.reduce_sum(values * weights), tf.reduce_sum(weights))


def soft_target_loss(student_logits, teacher_logits, temperature, weights=None):
    """KL(softmax(t / T) || softmax(s / T)) * T**2, summed over the last axis (classes,
    or positions of a span), averaged over the rows (batchmean).

    Args:
      student_logits, teacher_logits: float [..., C].
      temperature: T > 0.
      weights: optional [...] (one per row: NER tokens, real examples).

    Returns:
      A float32 scalar.
    """
    temperature = float(temperature)
    teacher_log = tf.nn.log_softmax(_float(teacher_logits) / temperature, axis=-1)
    student_log = tf.nn.log_softmax(_float(student_logits) / temperature, axis=-1)
    kl = tf.reduce_sum(tf.exp(teacher_log) * (teacher_log - student_log), axis=-1)
    return weighted_mean(kl, weights) * temperature ** 2


def sigmoid_soft_target_loss(student_logits, teacher_logits, temperature, weights=None):
    """Per-label soft targets of a multi-label head: KL(Bernoulli(sigmoid(t / T)) ||
    Bernoulli(sigmoid(s / T))) * T**2, averaged over labels and rows.

    Args:
      student_logits, teacher_logits: float [B, C].
      temperature: T > 0.
      weights: optional [B].
    """
    temperature = float(temperature)
    teacher, student = _float(teacher_logits) / temperature, _float(student_logits) / temperature
    p_log, p_not_log = tf.math.log_sigmoid(teacher), tf.math.log_sigmoid(-teacher)
    q_log, q_not_log = tf.math.log_sigmoid(student), tf.math.log_sigmoid(-student)
    kl = tf.exp(p_log) * (p_log - q_log) + tf.exp(p_not_log) * (p_not_log - q_not_log)
    if weights is not None:
        weights = _float(weights)[:, tf.newaxis]
    return weighted_mean(kl, weights) * temperature ** 2


def regression_soft_loss(student_scores, teacher_scores, weights=None):
    """A regression head's soft target: the MSE of the student's score to the teacher's."""
    return weighted_mean(tf.square(_float(student_scores) - _float(teacher_scores)), weights)


def hidden_mse(student_hidden, teacher_hidden, weights=None):
    """Mean squared difference of two hidden states [B, S, H] (the student's projected
    to the teacher's width H); `weights` [B, S] counts only real tokens."""
    squared = tf.square(_float(student_hidden) - _float(teacher_hidden))
    if weights is None:
        return tf.reduce_mean(squared)
    per_token = tf.reduce_mean(squared, axis=-1)  # [B, S]
    return weighted_mean(per_token, weights)


def hidden_cosine(student_hidden, teacher_hidden, weights=None):
    """Mean of 1 - cos(student, teacher) over the tokens [B, S] (weighted: real ones),
    as torch's CosineEmbeddingLoss with target 1."""
    student, teacher = _float(student_hidden), _float(teacher_hidden)
    dot = tf.reduce_sum(student * teacher, axis=-1)
    norms = tf.sqrt((tf.reduce_sum(tf.square(student), axis=-1) + 1e-12)
                    * (tf.reduce_sum(tf.square(teacher), axis=-1) + 1e-12))
    return weighted_mean(1.0 - dot / norms, weights)


def attention_score_mse(student_scores, teacher_scores):
    """TinyBERT's attention loss: MSE of the scores [B, A, S, S] (before softmax, mask
    added), each side's masked scores (<= -100) set to 0 first."""
    student, teacher = _float(student_scores), _float(teacher_scores)
    student = tf.where(student <= MASKED_SCORE, tf.zeros_like(student), student)
    teacher = tf.where(teacher <= MASKED_SCORE, tf.zeros_like(teacher), teacher)
    return tf.reduce_mean(tf.square(student - teacher))


def relation_kl(student_logits, teacher_logits, query_weights=None):
    """MiniLM's relation distillation: sum over keys of KL(teacher || student), averaged
    over the batch, heads and (real) queries.

    Args:
      student_logits, teacher_logits: [B, A, S, S] scores before softmax (attention
        scores, or `value_relation_logits`), the mask added.
      query_weights: optional [B, S] (the input mask: padded queries are not counted).
    """
    teacher_log = tf.nn.log_softmax(_float(teacher_logits), axis=-1)
    student_log = tf.nn.log_softmax(_float(student_logits), axis=-1)
    kl = tf.reduce_sum(tf.exp(teacher_log) * (teacher_log - student_log), axis=-1)  # [B,A,S]
    if query_weights is not None:
        query_weights = _float(query_weights)[:, tf.newaxis, :]
    return weighted_mean(kl, query_weights)


def value_relation_logits(values, mask_bias=None):
    """MiniLM's value relation before softmax: V V^T / sqrt(d) per head.

    Args:
      values: [B, A, S, d], a layer's attention values split by head.
      mask_bias: optional additive bias broadcastable to [B, A, S, S] (-10000 at padded
        keys).
    """
    values = _float(values)
    logits = tf.matmul(values, values, transpose_b=True) / math.sqrt(values.shape[-1])
    return logits if mask_bias is None else logits + _float(mask_bias)
