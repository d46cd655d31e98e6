"""--class_weights: parsing, balanced weights as scikit-learn / torch compute them, the
weighted loss of the classifier and of NER (torch's CrossEntropyLoss(weight=...)
normalisation), the weights in the results, bad input."""

import math

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.runs import class_weights
from bert_tf.runs.option_groups import parse_class_weights
from bert_tf.tasks.classification import task as classification_task
from bert_tf.tasks.ner import task as ner_task
import test_multi_label
import test_run_classifier
import test_run_ner


def independent_weighted_ce(logits, labels, weights, mask):
    """sum(w[y] * -log softmax(x)[y]) / sum(w[y]) over the unmasked items, plain Python."""
    total = norm = 0.0
    for row, label, keep in zip(logits, labels, mask):
        if not keep:
            continue
        log_sum = math.log(sum(math.exp(x) for x in row))
        total += weights[label] * (log_sum - row[label])
        norm += weights[label]
    return total / norm


def test_parse_balanced_and_pairs():
    assert parse_class_weights(None) is None
    assert parse_class_weights(" Balanced ") == "balanced"
    assert parse_class_weights("pos:3, neg:1.5") == {"pos": 3.0, "neg": 1.5}
    assert parse_class_weights("a:b:2") == {"a:b": 2.0}  # last colon splits


@pytest.mark.parametrize("text, message", [
    ("", "class_weights is empty"),
    ("pos", "'pos' is not a label:weight pair"),
    (":3", "':3' is not a label:weight pair"),
    ("pos:x", "the weight of 'pos' is 'x'; expected a finite number > 0"),
    ("pos:-1", "the weight of 'pos' is '-1'"),
    ("pos:0", "the weight of 'pos' is '0'"),
    ("pos:inf", "the weight of 'pos' is 'inf'"),
    ("pos:1,pos:2", "label 'pos' is given twice"),
])
def test_malformed_values_are_refused(text, message):
    with pytest.raises(ValueError, match=message):
        parse_class_weights(text)


def test_resolved_weights():
    labels = ["neg", "neutral", "pos"]
    explicit = class_weights.resolve_class_weights({"pos": 3.0}, labels)
    np.testing.assert_array_equal(explicit, [1.0, 1.0, 3.0])  # unlisted: 1
    # scikit-learn's balanced: n_samples / (n_classes * count) = 10 / (3 * [5, 3, 2]).
    balanced = class_weights.resolve_class_weights("balanced", labels, [5, 3, 2])
    np.testing.assert_allclose(balanced, [10 / 15, 10 / 9, 10 / 6], rtol=1e-6)
    with pytest.raises(ValueError, match=r"class_weights names 'Pos', which is not a "
                                         r"label; the labels are \['neg', 'neutral', 'pos'\]"):
        class_weights.resolve_class_weights({"Pos": 3.0}, labels)
    with pytest.raises(ValueError, match=r"label 'neutral' has no example in train.tsv: "
                                         r"its weight .* would be infinite"):
        class_weights.resolve_class_weights("balanced", labels, [5, 0, 2], "train.tsv")
    # torch's pos_weight, negatives / positives: 4 examples, labels on 1 and 3 of them.
    np.testing.assert_allclose(class_weights.balanced_pos_weights([1, 3], 4, ["a", "b"]),
                               [3.0, 1 / 3], rtol=1e-6)
    for positives, message in (([0, 3], "'a' has no example"),
                               ([1, 4], "'b' is on every example")):
        with pytest.raises(ValueError, match=message):
            class_weights.balanced_pos_weights(positives, 4, ["a", "b"])


def test_weighted_cross_entropy_is_torchs_normalisation():
    logits = np.array([[2.0, -1.0, 0.5], [0.1, 0.2, 3.0], [-2.0, 1.0, 0.0],
                       [1.0, 1.0, 1.0]], np.float32)
    labels, weights = [0, 2, 1, 1], [0.5, 2.0, 4.0]
    mask = [1, 1, 1, 0]
    got = class_weights.weighted_cross_entropy(tf.constant(labels), tf.constant(logits),
                                               np.array(weights, np.float32),
                                               tf.constant(mask))
    assert float(got) == pytest.approx(independent_weighted_ce(logits, labels, weights,
                                                                mask), rel=1e-5)
    # The classifier's loss takes them (packed rows: masked by their real examples).
    features = {"label_ids": tf.constant([labels]), "sequence_weights": tf.constant([mask])}
    loss_fn = classification_task.classifier_loss_fn(False, np.array(weights, np.float32))
    assert float(loss_fn(features, {"logits": tf.constant(logits[None])})) == \
        pytest.approx(float(got), rel=1e-6)


def write_imbalanced_sst2(folder):
    """The SST-2 rows of test_run_classifier (32 of each label) and 32 more of label 0."""
    test_run_classifier.write_sst2(folder)
    rows = test_run_classifier.sentiment_rows(64, 0)
    rows += [row for row in test_run_classifier.sentiment_rows(64, 5) if row[1] == "0"]
    test_run_classifier.write_tsv(folder / "train.tsv", [("sentence", "label")] + rows)


def test_classifier_trains_with_balanced_weights_and_states_them(tmp_path):
    write_imbalanced_sst2(tmp_path / "data")
    options = test_run_classifier.options(tmp_path, do_train=True, do_eval=True,
                                          class_weights="balanced", num_train_epochs=20.0)
    task = classification_task.ClassificationTask(options)
    results = classification_task.driver.run(task)
    # 96 examples: 64 of "0", 32 of "1" -> 96 / (2 * 64), 96 / (2 * 32).
    assert results["class_weight/0"] == pytest.approx(0.75)
    assert results["class_weight/1"] == pytest.approx(1.5)
    assert results["eval_accuracy"] == 1.0, results
    text = (tmp_path / "out" / "eval_results.txt").read_text()
    assert "class_weight/1 = 1.5" in text.splitlines()
    # The training loss is the weighted one.
    logits = tf.constant([[0.3, -0.2], [1.0, 2.0], [0.0, 0.5]])
    features = {"label_ids": tf.constant([0, 1, 1])}
    expected = independent_weighted_ce(logits.numpy(), [0, 1, 1], [0.75, 1.5], [1, 1, 1])
    assert float(task.loss(features, {"logits": logits})) == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("change, message", [
    (dict(class_weights="0:2,2:1"), r"class_weights names '2', which is not a label; the "
                                    r"labels are \['0', '1'\]"),
    (dict(class_weights="0=2"), r"'0=2' is not a label:weight pair"),
    (dict(class_weights="balanced", task_name="sts-b"), "a regression task has none"),
])
def test_classifier_refuses_bad_class_weights_before_any_work(tmp_path, change, message):
    test_run_classifier.write_sst2(tmp_path / "data")
    with pytest.raises(ValueError, match=message):
        classification_task.run(test_run_classifier.options(tmp_path, do_train=True,
                                                            **change))
    assert not (tmp_path / "out" / "train.tf_record").exists()


def test_multi_label_balanced_pos_weight(tmp_path):
    test_multi_label.write_weather(tmp_path / "data")
    options = test_multi_label.options(tmp_path, do_train=True, class_weights="balanced")
    task = classification_task.ClassificationTask(options)
    task.check_inputs()
    task.setup(classification_task.run_context.RunContext.create(options))
    # 64 rows cycle through the 8 label sets: each label on 32, so pos_weight 32 / 32.
    np.testing.assert_allclose(task.class_weights, [1.0, 1.0, 1.0])
    skewed = test_multi_label.options(tmp_path, do_train=True, class_weights="windy:4")
    task = classification_task.ClassificationTask(skewed)
    task.setup(classification_task.run_context.RunContext.create(skewed))
    np.testing.assert_allclose(task.class_weights, [1.0, 1.0, 4.0])
    logits = np.array([[1.0, -1.0, 0.5]], np.float32)
    labels = np.array([[0.0, 1.0, 1.0]], np.float32)
    loss = task.loss({"label_ids": tf.constant(labels)}, {"logits": tf.constant(logits)})
    assert float(loss) == pytest.approx(test_multi_label.independent_bce(
        logits, labels, [1.0, 1.0, 4.0]), rel=1e-5)


def test_ner_token_weights(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    test_run_ner.write_conll(data / "eng.train", 32, 0)
    test_run_ner.write_conll(data / "eng.testa", 6, 1)
    options = test_run_ner.options(tmp_path, do_train=True, do_eval=True,
                                   class_weights="balanced", num_train_epochs=2.0)
    task = ner_task.NerTask(options)
    results = ner_task.driver.run(task)
    sentences = task.train_sentences
    tags = [tag for s in sentences for tag in ner_task.ner_data.to_iob2(s.tags)]
    for tag in task.label_list:  # n_words / (n_tags * count)
        assert results[f"class_weight/{tag}"] == pytest.approx(
            len(tags) / (len(task.label_list) * tags.count(tag)), rel=1e-6)
    # Per scored token, normalised over the scored tokens only.
    logits = np.random.default_rng(0).normal(size=(1, 5, 4)).astype(np.float32)
    label_ids, scored = [[0, 2, 1, 3, 0]], [[0, 1, 1, 1, 0]]
    got = task.loss({"label_ids": tf.constant(label_ids), "label_weights": tf.constant(scored)},
                    {"logits": tf.constant(logits)})
    expected = independent_weighted_ce(logits[0], label_ids[0], task.class_weights,
                                       scored[0])
    assert float(got) == pytest.approx(expected, rel=1e-5)
    with pytest.raises(ValueError, match=r"class_weights names 'B-ORG', which is not a "
                                         r"label; the labels are \['O', 'B-LOC'"):
        ner_task.run(test_run_ner.options(tmp_path, do_train=True, class_weights="B-ORG:2",
                                          output_dir=str(tmp_path / "other")))
