"""Classification and regression metrics as GLUE reports them (numpy only).

Each function takes 1-D arrays (lists work) of equal length and returns a Python float.
`compute_metrics(names, predictions, labels)` returns a dict for a task's metric names:
`accuracy`, `f1`, `matthews_corrcoef`, `pearson`, `spearman`, `acc_and_f1`,
`pearson_and_spearman`. `multi_label_metrics(predicted, labels, label_names)` scores
multi-label predictions ([N, C] 0/1 arrays): micro and macro F1, subset accuracy and
each label's precision, recall and F1.
"""

from typing import Sequence

import numpy as np


def _pair(predictions, labels):
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    if predictions.shape != labels.shape or predictions.ndim != 1:
        raise ValueError(f"predictions {predictions.shape} and labels {labels.shape} must be "
                         "1-D arrays of the same length")
    if predictions.size == 0:
        raise ValueError("no examples to score")
    return predictions, labels


def accuracy(predictions, labels) -> float:
    """Fraction of predictions equal to the label."""
    predictions, labels = _pair(predictions, labels)
    return float(np.mean(predictions == labels))


def f1_score(predictions, labels, positive_label=1) -> float:
    """Binary F1 of the positive class (0.0 when it is never predicted nor present)."""
    predictions, labels = _pair(predictions, labels)
    predicted_positive = predictions == positive_label
    actual_positive = labels == positive_label
    true_positive = np.sum(predicted_positive & actual_positive)
    denominator = np.sum(predicted_positive) + np.sum(actual_positive)
    return float(2.0 * true_positive / denominator) if denominator else 0.0


def matthews_corrcoef(predictions, labels) -> float:
    """Matthews correlation coefficient (multi-class R_K form; binary MCC for 2 classes).

    Returns 0.0 when it is undefined (all predictions or all labels one class).
    """
    predictions, labels = _pair(predictions, labels)
    classes = np.union1d(predictions, labels)
    confusion = np.zeros((len(classes), len(classes)), dtype=np.float64)  # [true, pred]
    np.add.at(confusion, (np.searchsorted(classes, labels),
                          np.searchsorted(classes, predictions)), 1.0)
    true_counts, predicted_counts = confusion.sum(axis=1), confusion.sum(axis=0)
    total, correct = confusion.sum(), np.trace(confusion)
    covariance = correct * total - np.dot(predicted_counts, true_counts)
    denominator = np.sqrt((total ** 2 - np.dot(predicted_counts, predicted_counts))
                          * (total ** 2 - np.dot(true_counts, true_counts)))
    return float(covariance / denominator) if denominator else 0.0


def pearson(predictions, labels) -> float:
    """Pearson correlation coefficient (nan when either side is constant)."""
    predictions, labels = _pair(predictions, labels)
    x = predictions.astype(np.float64) - np.mean(predictions)
    y = labels.astype(np.float64) - np.mean(labels)
    denominator = np.sqrt(np.dot(x, x) * np.dot(y, y))
    return float(np.dot(x, y) / denominator) if denominator else float("nan")


def rank_average(values) -> np.ndarray:
    """Ranks starting at 1, ties get the mean of their ranks (as scipy.stats.rankdata)."""
    values = np.asarray(values)
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    # Start index of each run of equal values.
    new_run = np.concatenate([[True], sorted_values[1:] != sorted_values[:-1]])
    run_ids = np.cumsum(new_run) - 1
    run_starts = np.flatnonzero(new_run)
    run_ends = np.concatenate([run_starts[1:], [len(values)]])
    mean_rank = (run_starts + run_ends + 1) / 2.0  # mean of ranks start+1 .. end
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = mean_rank[run_ids]
    return ranks


def spearman(predictions, labels) -> float:
    """Spearman rank correlation: Pearson of tie-averaged ranks."""
    predictions, labels = _pair(predictions, labels)
    return pearson(rank_average(predictions), rank_average(labels))


_METRICS = {
    "accuracy": accuracy,
    "f1": f1_score,
    "matthews_corrcoef": matthews_corrcoef,
    "pearson": pearson,
    "spearman": spearman,
}
_COMBINED = {
    "acc_and_f1": ("accuracy", "f1"),
    "pearson_and_spearman": ("pearson", "spearman"),
}


def compute_metrics(names: Sequence[str], predictions, labels) -> dict:
    """Computes the named metrics; combined names add their parts and their mean."""
    results = {}
    for name in names:
        if name in _METRICS:
            results[name] = _METRICS[name](predictions, labels)
        elif name in _COMBINED:
            parts = [_METRICS[part](predictions, labels) for part in _COMBINED[name]]
            results.update(zip(_COMBINED[name], parts))
            results[name] = float(np.mean(parts))
        else:
            raise ValueError(f"unknown metric {name!r}; known: "
                             f"{sorted(list(_METRICS) + list(_COMBINED))}")
    return results


def _ratio(numerator, denominator) -> float:
    """numerator / denominator, 0.0 when the denominator is 0 (scikit-learn's
    zero_division=0)."""
    return float(numerator / denominator) if denominator else 0.0


def multi_label_metrics(predicted, labels, label_names: Sequence[str]) -> dict:
    """Multi-label scores as scikit-learn computes them (zero_division=0).

    Args:
      predicted, labels: [N, C] arrays, nonzero where a label is predicted / present.
      label_names: the C label names (keys `precision/<name>`, ...).

    Returns:
      `f1_micro`, `precision_micro`, `recall_micro` (over all N x C decisions),
      `f1_macro` (the mean of the labels' F1), `subset_accuracy` (rows whose predicted
      set equals the gold set) and `precision/<label>`, `recall/<label>`, `f1/<label>`.
    """
    predicted, labels = np.asarray(predicted) != 0, np.asarray(labels) != 0
    if predicted.shape != labels.shape or predicted.ndim != 2 or \
            predicted.shape[1] != len(label_names):
        raise ValueError(f"predicted {predicted.shape} and labels {labels.shape} must be "
                         f"[N, C] arrays of the same shape, C = {len(label_names)} labels")
    if predicted.shape[0] == 0:
        raise ValueError("no examples to score")
    true_positive = np.sum(predicted & labels, axis=0)  # [C]
    predicted_count, gold_count = predicted.sum(axis=0), labels.sum(axis=0)
    results = {
        "precision_micro": _ratio(true_positive.sum(), predicted_count.sum()),
        "recall_micro": _ratio(true_positive.sum(), gold_count.sum()),
        "f1_micro": _ratio(2 * true_positive.sum(), predicted_count.sum() + gold_count.sum()),
        "subset_accuracy": float(np.mean(np.all(predicted == labels, axis=1))),
    }
    f1_scores = []
    for index, name in enumerate(label_names):
        f1 = _ratio(2 * true_positive[index], predicted_count[index] + gold_count[index])
        results[f"precision/{name}"] = _ratio(true_positive[index], predicted_count[index])
        results[f"recall/{name}"] = _ratio(true_positive[index], gold_count[index])
        results[f"f1/{name}"] = f1
        f1_scores.append(f1)
    results["f1_macro"] = float(np.mean(f1_scores))
    return results
