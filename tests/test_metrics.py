"""GLUE metrics against hand-computed values and scipy."""

import math

import numpy as np
import pytest

from bert_tf.tasks.classification import metrics

PREDICTIONS = [1, 0, 1, 1, 0, 1, 0, 0]
LABELS = [1, 1, 1, 0, 0, 1, 0, 1]
# tp: idx 0,2,5 = 3; fp: idx 3 = 1; fn: idx 1,7 = 2; tn: idx 4,6 = 2


def test_accuracy_and_f1_by_hand():
    assert metrics.accuracy(PREDICTIONS, LABELS) == 5 / 8
    precision, recall = 3 / 4, 3 / 5
    assert metrics.f1_score(PREDICTIONS, LABELS) == pytest.approx(
        2 * precision * recall / (precision + recall))
    # F1 of the other class: tp 2, fp 2, fn 1.
    assert metrics.f1_score(PREDICTIONS, LABELS, positive_label=0) == pytest.approx(4 / 7)
    assert metrics.f1_score([0, 0], [0, 0]) == 0.0


def test_matthews_binary_by_hand():
    tp, tn, fp, fn = 3, 2, 1, 2
    expected = (tp * tn - fp * fn) / math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    assert metrics.matthews_corrcoef(PREDICTIONS, LABELS) == pytest.approx(expected)
    assert metrics.matthews_corrcoef([1, 1, 1], [0, 1, 0]) == 0.0  # undefined -> 0
    assert metrics.matthews_corrcoef([0, 1, 0], [0, 1, 0]) == pytest.approx(1.0)


def test_matthews_multiclass_by_hand():
    labels = [0, 0, 1, 1, 2, 2]
    predictions = [0, 1, 1, 1, 2, 0]
    # Confusion (true x pred): [[1,1,0],[0,2,0],[1,0,1]]; c=4, s=6,
    # t=(2,2,2), p=(2,3,1): cov = 4*6 - (4+6+2) = 12;
    # sqrt((36 - (4+9+1)) * (36 - 12)) = sqrt(22*24)
    assert metrics.matthews_corrcoef(predictions, labels) == pytest.approx(
        12 / math.sqrt(22 * 24))


def test_pearson_and_spearman_against_scipy():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    labels = rng.uniform(0, 5, size=50)
    predictions = labels + rng.normal(0, 1, size=50)
    predictions[:10] = 2.5  # ties
    assert metrics.pearson(predictions, labels) == pytest.approx(
        stats.pearsonr(predictions, labels)[0], abs=1e-12)
    assert metrics.spearman(predictions, labels) == pytest.approx(
        stats.spearmanr(predictions, labels)[0], abs=1e-12)


def test_rank_average_by_hand():
    np.testing.assert_array_equal(metrics.rank_average([10, 20, 10, 5, 20, 20]),
                                  [2.5, 5.0, 2.5, 1.0, 5.0, 5.0])
    # Perfect monotone relation with ties on both sides.
    assert metrics.spearman([1, 2, 2, 3], [10, 20, 20, 30]) == pytest.approx(1.0)
    assert math.isnan(metrics.pearson([1, 1, 1], [1, 2, 3]))


def test_compute_metrics_combined_names():
    results = metrics.compute_metrics(["acc_and_f1"], PREDICTIONS, LABELS)
    assert results["accuracy"] == 5 / 8
    assert results["acc_and_f1"] == pytest.approx((5 / 8 + results["f1"]) / 2)
    results = metrics.compute_metrics(["pearson_and_spearman"], [1.0, 2.0, 3.0],
                                      [1.0, 2.0, 4.0])
    assert set(results) == {"pearson", "spearman", "pearson_and_spearman"}
    assert results["spearman"] == pytest.approx(1.0)


def test_bad_input():
    with pytest.raises(ValueError, match="same length"):
        metrics.accuracy([1, 0], [1])
    with pytest.raises(ValueError, match="no examples"):
        metrics.accuracy([], [])
    with pytest.raises(ValueError, match="unknown metric 'auc'"):
        metrics.compute_metrics(["auc"], [1], [1])
