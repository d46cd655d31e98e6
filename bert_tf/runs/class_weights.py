"""Class weights in the loss of the classification and tagging tasks: `--class_weights`.

    spec = parse_class_weights("pos:3,neg:1")             # or "balanced"; checks syntax
    weights = resolve_class_weights(spec, ["neg", "pos"], counts)   # float32 [C]
    loss = weighted_cross_entropy(label_ids, logits, weights, mask)

`balanced` is scikit-learn's `compute_class_weight("balanced")`: n_samples /
(n_classes * count_c), counted over the training examples (classification) or their
tagged words (NER). Explicit `label:weight` pairs give those labels their weight, the
others 1. The weighted loss is normalised as torch's `CrossEntropyLoss(weight=...)`:
sum(w_i * ce_i) / sum(w_i), over the examples (or real tokens) of a batch.

Multi-label classification weighs the positive term of each label's binary
cross-entropy instead (torch's `BCEWithLogitsLoss(pos_weight=...)`): `balanced` is
negatives / positives per label (`balanced_pos_weights`), explicit pairs are used as given.
"""

from typing import Optional, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf.runs.option_groups import BALANCED, parse_class_weights


def resolve_class_weights(spec, labels: Sequence[str], counts=None,
                          origin: str = "the training data") -> Optional[np.ndarray]:
    """The weight of each label (float64 [C], label-id order) for a parsed spec.

    Args:
      spec: `parse_class_weights`' result.
      labels: class names in id order.
      counts: examples (or tokens) of each label [C]; needed for `BALANCED`.
      origin: what `counts` were counted over, for messages.

    Raises:
      ValueError: an explicit label that is not one of `labels` (listing them), or a
        label without any example under `BALANCED`.
    """
    if spec is None:
        return None
    labels = [str(label) for label in labels]
    if spec == BALANCED:
        counts = np.asarray(counts, np.float64)
        _refuse_absent(labels, counts, f"has no example in {origin}: its weight "
                       "n_samples / (n_classes * count) would be infinite")
        return counts.sum() / (len(labels) * counts)
    unknown = [label for label in spec if label not in labels]
    if unknown:
        raise ValueError(f"class_weights names {unknown[0]!r}, which is not a label; "
                         f"the labels are {labels}")
    return np.array([spec.get(label, 1.0) for label in labels], np.float64)


def balanced_pos_weights(positives, num_examples: int, labels: Sequence[str],
                         origin: str = "the training data") -> np.ndarray:
    """torch's pos_weight for multi-label: negatives / positives of each label [C].

    Raises:
      ValueError: for a label on no example, or on every example (weight 0).
    """
    positives = np.asarray(positives, np.float64)
    _refuse_absent(labels, positives, f"has no example in {origin}: its pos_weight "
                   "negatives / positives would be infinite")
    _refuse_absent(labels, num_examples - positives, f"is on every example of {origin}: "
                   "its pos_weight negatives / positives would be 0")
    return (num_examples - positives) / positives


def _refuse_absent(labels, counts, what):
    absent = [label for label, count in zip(labels, counts) if count <= 0]
    if absent:
        raise ValueError(f"class_weights=balanced: label {absent[0]!r} {what}; give "
                         "explicit label:weight pairs instead")


def training_weights(text: Optional[str], labels: Sequence[str], do_train: bool,
                     count_fn, origin: str, pos_weight: bool = False):
    """The weights a run trains with (float64 [C]), logged; None without `text`.

    Without training they are not used: explicit labels are still checked, and a
    warning says so.

    Args:
      text: the `--class_weights` value.
      labels: class names (tags) in id order.
      do_train: whether the run trains.
      count_fn: () -> (count of each label [C], number of examples); called for
        `BALANCED` only.
      origin: what `count_fn` counts, for messages ("the train file train.tsv").
      pos_weight: multi-label: each label's positive-term weight (`balanced_pos_weights`).
    """
    spec = parse_class_weights(text)
    if spec is None:
        return None
    if not do_train:
        if spec != BALANCED:
            resolve_class_weights(spec, labels)
        logging.warning("class_weights weigh the training loss; without do_train they "
                        "are not used")
        return None
    if spec == BALANCED and pos_weight:
        weights = balanced_pos_weights(*count_fn(), labels, origin)
    elif spec == BALANCED:
        weights = resolve_class_weights(spec, labels, count_fn()[0], origin)
    else:
        weights = resolve_class_weights(spec, labels)
    log_weights(weights, labels, spec, "pos_weight" if pos_weight else "Class weights")
    return weights


def results(weights, labels, key: str = "class_weight") -> dict:
    """`<key>/<label>` entries of the results files for the weights used ({} for none)."""
    if weights is None:
        return {}
    return {f"{key}/{label}": float(weight) for label, weight in zip(labels, weights)}


def log_weights(weights, labels, spec, what: str = "Class weights") -> None:
    """Logs the weights used at INFO, with how they were made."""
    if weights is None:
        return
    how = ("balanced: negatives / positives" if what == "pos_weight" else
           "balanced: n_samples / (n_classes * count)") if spec == BALANCED else "given"
    logging.info("%s (%s): %s", what, how,
                 ", ".join(f"{label} {weight:.4g}" for label, weight in zip(labels, weights)))


def weighted_cross_entropy(label_ids, logits, class_weights, mask):
    """sum(w[y] * ce * mask) / sum(w[y] * mask): softmax cross-entropy weighted by each
    label's weight, as torch's CrossEntropyLoss(weight=...) (0 when nothing is scored).

    Args:
      label_ids: int [...] (e.g. [B], [B, K] packed, [B, S] tokens).
      logits: float [..., C].
      class_weights: float [C].
      mask: [...] 1 for a real example or scored token, 0 otherwise.
    """
    logits = tf.cast(logits, tf.float32)
    label_ids = tf.cast(label_ids, tf.int32)
    per_item = tf.nn.sparse_softmax_cross_entropy_with_logits(label_ids, logits)
    weights = tf.gather(tf.constant(class_weights, tf.float32), label_ids)
    weights *= tf.cast(mask, tf.float32)
    return tf.math.divide_no_nan(tf.reduce_sum(per_item * weights), tf.reduce_sum(weights))
