"""Packing fine-tuning examples: plan, packed rows, and parity with unpacked examples."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.models import BertClassifier, BertTokenClassifier
from bert_tf.tasks.classification import data as classification_data
from bert_tf.runs.text_files import InputExample
from bert_tf.tasks.classification import task as classification_task
from bert_tf.tasks.ner import task as ner_task
from bert_tf.train import finetune_packing, sequence_packing
from harness import CLS_ID, SPECIAL_TOKENS, random_sequences, tiny_config, tiny_model
import test_run_classifier
import test_run_ner

SEQ_IN, ROW_LENGTH, PER_ROW, CLASSES, TAGS = 16, 40, 3, 3, 5
VOCAB = SPECIAL_TOKENS + ["good", "bad"]  # the `tokenizer` fixture's


def _examples(count, seed=0, min_length=4, max_length=SEQ_IN):
    """Unpacked examples [count, SEQ_IN] of random lengths, a label each and token tags."""
    rng = np.random.default_rng(seed)
    rows = random_sequences(rng, count, SEQ_IN, min_length, max_length)
    # Tags on some real tokens (a word's first sub-token), weight 0 elsewhere.
    tag_weights = (rng.random((count, SEQ_IN)) < 0.6).astype(np.int32) * rows["input_mask"]
    tag_weights[:, 0] = 0
    return {"input_ids": rows["input_ids"], "input_mask": rows["input_mask"],
            "segment_ids": rows["segment_ids"],
            "label_ids": rng.integers(0, CLASSES, count).astype(np.int32),
            "tag_ids": rng.integers(0, TAGS, (count, SEQ_IN)).astype(np.int32) * tag_weights,
            "tag_weights": tag_weights}


def test_plan_packing_sizes_a_batch_of_rows_by_hand():
    # [10, 7, 6, 5, 3] fill two rows of 16 (10+6, 7+5+3): 2.5 examples a row, so a batch
    # of 10 examples is 4 rows; 2 replicas x 3 micro-batches round it to 6.
    plan = finetune_packing.plan_packing([10, 7, 6, 5, 3], 16, 3, train_batch_size=10)
    assert (plan.examples, plan.rows, plan.rows_per_batch) == (5, 2, 4)
    assert plan.padding_share == pytest.approx(1 - 31 / 32)
    assert plan.unpacked_padding_share == pytest.approx(1 - 31 / 80)
    assert finetune_packing.plan_packing([10, 7, 6, 5, 3], 16, 3, 10, 6).rows_per_batch == 6
    # Windows pack separately: two windows of [10, 6] and [10, 6] make 2 rows, but a
    # window of 1 makes 4.
    assert finetune_packing.plan_packing([10, 6, 10, 6], 16, 3, 4, window=1).rows == 4
    assert "2.50 a row" in plan.describe()
    with pytest.raises(ValueError, match="at least one sequence"):
        finetune_packing.plan_packing([5], 16, 0, 4)


def test_pack_rows_moves_token_and_example_features_by_hand():
    features = _examples(6, seed=3)
    packed, (row, offset, slot, num_rows) = sequence_packing.pack_rows(
        features, ROW_LENGTH, PER_ROW, token_features=("tag_ids", "tag_weights"),
        instance_features=("label_ids",))
    lengths = features["input_mask"].sum(axis=1)
    assert num_rows < 6 and packed["input_mask"].sum() == lengths.sum()
    for index, length in enumerate(lengths):
        r, start = row[index], offset[index]
        tokens = slice(start, start + length)
        assert (packed["input_ids"][r, tokens] == features["input_ids"][index, :length]).all()
        assert (packed["tag_ids"][r, tokens] == features["tag_ids"][index, :length]).all()
        assert (packed["tag_weights"][r, tokens] == features["tag_weights"][index, :length]).all()
        assert (packed["position_ids"][r, tokens] == np.arange(length)).all()
        assert (packed["sequence_ids"][r, tokens] == slot[index] + 1).all()
        assert packed["cls_positions"][r, slot[index]] == start
        assert packed["label_ids"][r, slot[index]] == features["label_ids"][index]
    assert packed["sequence_weights"].sum() == 6
    # Empty slots weigh 0, and nothing of an example lies outside its tokens.
    assert (packed["tag_weights"].sum() == features["tag_weights"].sum())


def _unpacked_model_inputs(features):
    return {name: tf.constant(features[name])
            for name in ("input_ids", "input_mask", "segment_ids")}


def _packed_model_inputs(packed):
    names = sequence_packing.ROW_FEATURES + ("cls_positions",)
    return {name: tf.constant(packed[name]) for name in names}


def test_packed_classifier_logits_and_loss_equal_the_unpacked_ones():
    features = _examples(11, seed=5)
    model = tiny_model(BertClassifier, tiny_config(), seed=2, num_classes=CLASSES)
    packed, (row, _, slot, _) = sequence_packing.pack_rows(
        features, ROW_LENGTH, PER_ROW, instance_features=("label_ids",))
    alone = model(_unpacked_model_inputs(features))["logits"].numpy()  # [N, C]
    together = model(_packed_model_inputs(packed))["logits"].numpy()  # [R, K, C]
    assert together.shape == (len(packed["input_ids"]), PER_ROW, CLASSES)
    np.testing.assert_allclose(together[row, slot], alone, atol=1e-5)
    loss_fn = classification_task.classifier_loss_fn(is_regression=False)
    unpacked_loss = loss_fn({"label_ids": tf.constant(features["label_ids"])},
                            {"logits": tf.constant(alone)})
    packed_loss = loss_fn({name: tf.constant(packed[name])
                           for name in ("label_ids", "sequence_weights")},
                          {"logits": tf.constant(together)})
    np.testing.assert_allclose(packed_loss.numpy(), unpacked_loss.numpy(), rtol=1e-6)
    # Without the block-diagonal mask the examples see each other: the check above fails.
    leaky = _packed_model_inputs(packed)
    del leaky["sequence_ids"]
    assert np.abs(model(leaky)["logits"].numpy()[row, slot] - alone).max() > 1e-5


def test_packed_regression_loss_is_the_mean_over_real_examples():
    loss_fn = classification_task.classifier_loss_fn(is_regression=True)
    logits = tf.constant([[[1.0], [3.0], [9.0]], [[2.0], [0.0], [0.0]]])  # [R=2, K=3, 1]
    features = {"label_ids": tf.constant([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]),
                "sequence_weights": tf.constant([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])}
    # (1 + 4 + 1) / 3 real examples; the empty slot's 81 does not count.
    assert float(loss_fn(features, {"logits": logits})) == pytest.approx(2.0)


def test_packed_token_classifier_logits_and_loss_equal_the_unpacked_ones():
    features = _examples(9, seed=7)
    model = tiny_model(BertTokenClassifier, tiny_config(), seed=4, num_classes=TAGS)
    packed, (row, offset, _, _) = sequence_packing.pack_rows(
        features, ROW_LENGTH, PER_ROW, token_features=("tag_ids", "tag_weights"))
    alone = model(_unpacked_model_inputs(features))["logits"].numpy()  # [N, S_in, C]
    together = model(_packed_model_inputs(packed))["logits"].numpy()  # [R, S, C]
    for index, length in enumerate(features["input_mask"].sum(axis=1)):
        np.testing.assert_allclose(
            together[row[index], offset[index]:offset[index] + length],
            alone[index, :length], atol=1e-5)
    unpacked_loss = ner_task.token_loss_fn(
        {"label_ids": features["tag_ids"], "label_weights": features["tag_weights"]},
        {"logits": tf.constant(alone)})
    packed_loss = ner_task.token_loss_fn(
        {"label_ids": packed["tag_ids"], "label_weights": packed["tag_weights"]},
        {"logits": tf.constant(together)})
    np.testing.assert_allclose(packed_loss.numpy(), unpacked_loss.numpy(), rtol=1e-6)


def test_packed_classifier_dataset_keeps_every_example_with_less_padding(tmp_path,
                                                                          tokenizer):
    examples = [InputExample(f"train-{i}", "good " * (1 + i % 4),
                             None, str(i % 2)) for i in range(40)]
    path = str(tmp_path / "train.tf_record")
    classification_data.write_example_features(examples, ["0", "1"], 16, tokenizer, path)
    lengths = classification_data.record_lengths(path, 16, is_regression=False)
    assert lengths.tolist() == [3 + i % 4 for i in range(40)]
    dataset = classification_data.classifier_dataset(
        path, 16, 4, True, False, seed=1, max_sequences_per_row=3)
    batch = next(iter(dataset))
    assert batch["input_ids"].shape == (4, 16) and batch["label_ids"].shape == (4, 3)
    weights = batch["sequence_weights"].numpy()
    assert weights.sum() > 4  # more than one example a row
    # Each example's [CLS] is where its label's slot says, and its segment is 0.
    cls = np.take_along_axis(batch["input_ids"].numpy(), batch["cls_positions"].numpy(), 1)
    assert (cls[weights > 0] == CLS_ID).all()


def test_classifier_run_trains_on_packed_rows(tmp_path):
    test_run_classifier.write_sst2(tmp_path / "data")
    results = classification_task.run(test_run_classifier.options(
        tmp_path, do_train=True, do_eval=True, max_seq_length=16, pack_sequences=True,
        max_sequences_per_row=2))
    # 7-token sentences, two a row: 8 rows a batch for 16 examples; the steps are those
    # of the unpacked run (64 / 16 * 30) and the rule is learnt.
    assert results["global_step"] == 120
    assert results["eval_accuracy"] == 1.0, results


def test_ner_run_trains_on_packed_rows(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    test_run_ner.write_conll(data / "eng.train", 64, 0)
    test_run_ner.write_conll(data / "eng.testa", 12, 1)
    results = ner_task.run(test_run_ner.options(
        tmp_path, do_train=True, do_eval=True, max_seq_length=16, pack_sequences=True))
    assert results["eval_f1"] == 100.0, results


@pytest.mark.parametrize("value", [0, -1])
def test_max_sequences_per_row_below_one_is_refused_before_any_work(tmp_path, value):
    test_run_classifier.write_sst2(tmp_path / "data")
    with pytest.raises(ValueError, match="max_sequences_per_row=.*at least one"):
        classification_task.run(test_run_classifier.options(
            tmp_path, do_train=True, pack_sequences=True, max_sequences_per_row=value))
    assert not (tmp_path / "out").exists()


_MIRRORED_PACKED_RUN = """
import pathlib, sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import test_run_classifier
from bert_tf.tasks.classification import task
folder = pathlib.Path(sys.argv[1])
test_run_classifier.write_sst2(folder / "data")
results = task.run(test_run_classifier.options(
    folder, do_train=True, do_eval=True, max_seq_length=16, pack_sequences=True,
    max_sequences_per_row=2, distribution_strategy="mirrored",
    gradient_accumulation_steps=2, eval_batch_size=4))
print("RESULTS", results["global_step"], results["eval_accuracy"])
"""


@pytest.mark.slow
def test_packed_rows_split_over_two_replicas_and_two_micro_batches(tmp_path):
    # The batch of rows is rounded to a multiple of 2 replicas x 2 micro-batches.
    completed = subprocess.run(
        [sys.executable, "-c", _MIRRORED_PACKED_RUN, str(tmp_path)], capture_output=True,
        text=True, timeout=600, cwd=os.path.dirname(__file__), check=False)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "RESULTS 120 1.0" in completed.stdout
