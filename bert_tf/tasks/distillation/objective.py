"""The student's training loss: the weighted sum of the distillation losses
(`bert_tf.tasks.distillation.losses`) on one batch.

    objective = Objective(settings, Head.of_model_type("classifier"), mapping=[0, 2, 4, 6])
    losses = objective(features, student_outputs, teacher_outputs, hard_loss)
    losses["total_loss"], losses["soft_loss"], ...
"""

import dataclasses

import tensorflow as tf

from bert_tf.layers.attention import attention_bias_from_mask
from bert_tf.serving import registry
from bert_tf.tasks.distillation import losses as losses_lib

# A span head's logits at padded positions are left out of its softmax.
_PADDING_LOGIT = -10000.0
# The batch's per-token weights of the task's own loss (NER: each word's first piece in
# its window); without them, every real token.
TOKEN_WEIGHTS = "label_weights"
LOSS_NAMES = ("soft_loss", "hard_loss", "hidden_loss", "attention_loss")


@dataclasses.dataclass(frozen=True)
class Head:
    """What the soft targets of a head are, from its model type's declared outputs.

    Attributes:
      outputs: The head's logits outputs (a `ModelType`'s `outputs`).
      over_positions: Those of `outputs` that are a softmax over the sequence's
        positions (a span head's start and end), not over labels.
      per_token: Those of `outputs` that are a softmax over labels at each position
        (a token classifier's tags), scored where the task's loss is: the batch's
        `label_weights` (a word's first piece), else every real token. The teacher's
        outputs elsewhere (continuation pieces, [CLS], [SEP]) were never trained.
      is_regression: A classifier of one score (soft target: the teacher's score, MSE).
      multi_label: Per-label sigmoid outputs (soft targets per label).
    """
    outputs: tuple = ("logits",)
    over_positions: tuple = ()
    per_token: tuple = ()
    is_regression: bool = False
    multi_label: bool = False

    @classmethod
    def of_model_type(cls, name, is_regression=False, multi_label=False) -> "Head":
        """The head of the registered model type `name`: its outputs with a position
        axis are per token when the head is labelled (one logit per label), else a
        softmax over the positions."""
        entry = registry.get(name)
        sequence = tuple(o for o in entry.outputs if o in entry.sequence_outputs)
        return cls(outputs=tuple(entry.outputs),
                   over_positions=() if entry.labelled else sequence,
                   per_token=sequence if entry.labelled else (),
                   is_regression=is_regression, multi_label=multi_label)


def soft_loss(head: Head, features, student, teacher, temperature):
    """The soft-target loss of `head` on the student's and teacher's outputs."""
    mask = tf.cast(features["input_mask"], tf.float32)
    values = []
    for name in head.outputs:
        student_logits = tf.cast(student[name], tf.float32)
        teacher_logits = tf.reshape(tf.cast(teacher[name], tf.float32),
                                    tf.shape(student_logits))
        if name in head.over_positions:  # a softmax over the real positions
            padding = (1.0 - mask) * _PADDING_LOGIT
            values.append(losses_lib.soft_target_loss(
                student_logits + padding, teacher_logits + padding, temperature))
        elif name in head.per_token:  # at the positions the task's own loss scores
            weights = tf.cast(features.get(TOKEN_WEIGHTS, mask), tf.float32)
            values.append(losses_lib.soft_target_loss(student_logits, teacher_logits,
                                                      temperature, weights=weights))
        elif head.is_regression:
            values.append(losses_lib.regression_soft_loss(student_logits, teacher_logits))
        elif head.multi_label:
            values.append(losses_lib.sigmoid_soft_target_loss(
                student_logits, teacher_logits, temperature))
        else:
            values.append(losses_lib.soft_target_loss(student_logits, teacher_logits,
                                                      temperature))
    return tf.add_n(values) / len(values)


def hidden_loss(kind: str, mapping, features, student_hidden, teacher_hidden):
    """mse: the sum over student layers m = 0 (embeddings) ... M of the MSE to the
    teacher's layer mapping[m]; cosine: 1 - cos of the last layers."""
    mask = features["input_mask"]
    if kind == "cosine":
        return losses_lib.hidden_cosine(student_hidden[-1], teacher_hidden[mapping[-1]],
                                        mask)
    return tf.add_n([losses_lib.hidden_mse(student_hidden[m], teacher_hidden[mapping[m]],
                                           mask) for m in range(len(mapping))])


def attention_loss(kind: str, features, student, teacher):
    """tinybert: the sum of the score MSEs of the traced layer pairs; minilm: the
    attention KL plus the value-relation KL of the (last) traced pair."""
    if kind == "tinybert":
        return tf.add_n([losses_lib.attention_score_mse(s, t) for s, t in zip(
            student["attention_scores"], teacher["attention_scores"])])
    mask = features["input_mask"]
    bias = attention_bias_from_mask(mask)
    attention = losses_lib.relation_kl(student["attention_scores"][-1],
                                       teacher["attention_scores"][-1], mask)
    values = losses_lib.relation_kl(
        losses_lib.value_relation_logits(student["attention_values"][-1], bias),
        losses_lib.value_relation_logits(teacher["attention_values"][-1], bias), mask)
    return attention + values


def attention_layers(kind: str, mapping) -> tuple:
    """(student layers, teacher layers), 0-based, whose attention the loss compares:
    every mapped pair (tinybert) or the last layers (minilm)."""
    student = list(range(len(mapping) - 1))
    teacher = [layer - 1 for layer in mapping[1:]]
    if kind == "minilm":
        return student[-1:], teacher[-1:]
    return student, teacher


class Objective:
    """The weighted sum of the losses the settings turn on.

    Args:
      settings: The loss options: a `DistillationLosses` (or the run's options, which
        compose it).
      head: `Head`.
      mapping: The teacher layer (1-based, 0: embeddings) of each student layer 0 ... M
        (`teacher.layer_mapping`).
    """

    def __init__(self, settings, head: Head, mapping):
        self.settings, self.head, self.mapping = settings, head, list(mapping)

    @property
    def needs_teacher(self) -> bool:
        """Whether a loss that is on reads the teacher's outputs (not the gold labels
        alone: with only --hard_weight the student trains as directly fine-tuned)."""
        settings = self.settings
        return max(settings.soft_weight, settings.hidden_weight,
                   settings.attention_weight) > 0

    def __call__(self, features, student, teacher, hard):
        """The losses of a batch: `total_loss` and each of `LOSS_NAMES`.

        Args:
          features: The batch (`input_mask`).
          student: The student's outputs (training: with its traces).
          teacher: The teacher's outputs (traced when the settings need it).
          hard: The task's own loss on the gold labels (a scalar).
        """
        settings = self.settings
        zero = tf.constant(0.0)
        values = {"soft_loss": soft_loss(self.head, features, student, teacher,
                                         settings.soft_temperature)
                  if settings.soft_weight > 0 else zero,
                  "hard_loss": tf.cast(hard, tf.float32) if settings.hard_weight > 0
                  else zero,
                  "hidden_loss": zero, "attention_loss": zero}
        traced = "hidden_states" in student and "hidden_states" in teacher
        if settings.hidden_weight > 0 and traced:
            values["hidden_loss"] = hidden_loss(settings.hidden_loss, self.mapping, features,
                                                student["hidden_states"],
                                                teacher["hidden_states"])
        if settings.attention_weight > 0 and traced:
            values["attention_loss"] = attention_loss(settings.attention_loss, features,
                                                      student, teacher)
        total = (settings.soft_weight * values["soft_loss"]
                 + settings.hard_weight * values["hard_loss"]
                 + settings.hidden_weight * values["hidden_loss"]
                 + settings.attention_weight * values["attention_loss"])
        return dict(values, total_loss=total)
