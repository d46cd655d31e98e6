"""Evaluation while training, the best checkpoint and early stopping through the driver
(`--eval_every_steps`, `--best_metric`, `--early_stopping_patience`): tiny runs of the
classifier, the tagger and SQuAD.

The learning rate is made a step function (`_step_schedule`) so that the dev scores
behave as a test needs: rate 0 after the first evaluation leaves them equal (never
strictly better), a huge rate ruins the model after the best one."""

import glob
import json
import logging

import keras
import numpy as np
import pytest
import tensorflow as tf

import test_run_classifier as classifier_runs
import test_run_ner as ner_runs
import test_run_squad as squad_runs
from bert_tf.tasks.classification import task as classification_task
from bert_tf.tasks.classification.task import ClassificationTask
from bert_tf.tasks.ner import task as ner_task
from bert_tf.tasks.squad import task as squad_task
from bert_tf.train import optimization
from bert_tf.weights import training_checkpoints

# 64 examples / 16 a batch * 6 epochs: 24 steps planned.
PLANNED = 24


def _step_schedule(monkeypatch, last_step, rate, then):
    """The runs' optimizer: Adam (no weight decay) at `rate` for the updates of steps
    1..`last_step`, at `then` after."""
    def create_optimizer(*_, **__):
        schedule = keras.optimizers.schedules.PiecewiseConstantDecay([last_step - 1],
                                                                     [rate, then])
        return keras.optimizers.Adam(learning_rate=schedule)
    monkeypatch.setattr(optimization, "create_optimizer", create_optimizer)


def _options(tmp_path, **changes):
    values = dict(num_train_epochs=6.0, steps_per_loop=8, eval_every_steps=4,
                  save_checkpoints_steps=100, do_train=True, do_eval=True)
    return classifier_runs.options(tmp_path, **{**values, **changes})


def _eval_scalars(output_dir):
    """{tag: [(step, value)]} of the TensorBoard summaries under output_dir/eval."""
    series = {}
    for path in sorted(glob.glob(f"{output_dir}/eval/events.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                series.setdefault(value.tag, []).append(
                    (event.step, float(tf.make_ndarray(value.tensor))))
    return series


def _best_results(output_dir, name="eval"):
    with open(f"{output_dir}/best/{name}_results.json", encoding="utf-8") as file:
        return json.load(file)


def _first_best(series, minimise=False):
    """(step, value) of the first strictly best value of a [(step, value)] series."""
    best = None
    for step, value in series:
        if best is None or (value < best[1] if minimise else value > best[1]):
            best = (step, value)
    return best


@pytest.mark.slow
def test_best_checkpoint_is_the_best_evaluation_and_what_eval_predict_and_export_use(
        tmp_path, monkeypatch, caplog):
    classifier_runs.write_sst2(tmp_path / "data")
    # Learns for 8 steps, then a rate of 1.0 ruins it: the best is not the last model.
    _step_schedule(monkeypatch, 8, 2e-3, 1.0)
    caplog.set_level(logging.INFO, logger="absl")
    results = classification_task.run(_options(tmp_path, best_metric="loss",
                                               do_predict=True))
    out = tmp_path / "out"
    losses = _eval_scalars(out)["eval_loss"]
    # Every 4 steps although a loop is 8 steps, and at the last step.
    assert [step for step, _ in losses] == list(range(4, PLANNED + 1, 4))
    best_step, best_loss = _first_best(losses, minimise=True)
    assert best_step <= 8 and losses[-1][1] > 2 * best_loss
    kept = _best_results(out)
    assert kept["global_step"] == best_step and kept["best_metric"] == "eval_loss"
    assert kept["eval_loss"] == pytest.approx(best_loss, rel=1e-6)
    assert f"global_step = {best_step}" in (out / "best" / "eval_results.txt").read_text()
    assert tf.train.latest_checkpoint(str(out / "best")).endswith(f"ckpt-{best_step}")
    # do_eval after training scores best/, not the model of step 24.
    assert results["global_step"] == best_step
    assert results["eval_loss"] == pytest.approx(kept["eval_loss"], rel=1e-5)
    assert "Evaluation, prediction and export use the best checkpoint" in caplog.text
    # A later eval-only run, and export from the output_dir, read best/ back.
    again = classification_task.run(classifier_runs.options(tmp_path, do_eval=True))
    assert again["global_step"] == best_step
    assert again["eval_loss"] == pytest.approx(kept["eval_loss"], rel=1e-5)
    assert again["eval_accuracy"] == kept["eval_accuracy"]
    assert (training_checkpoints.training_checkpoint(str(out))
            == str(out / "best" / f"ckpt-{best_step}"))
    assert "using its best checkpoint" in caplog.text


@pytest.mark.slow
def test_early_stopping_stops_keeps_the_best_and_stays_stopped(tmp_path, monkeypatch,
                                                               caplog):
    classifier_runs.write_sst2(tmp_path / "data")
    # Rate 0 after step 4: the scores at 8, 12, ... equal step 4's, never strictly better.
    _step_schedule(monkeypatch, 4, 2e-3, 0.0)
    caplog.set_level(logging.INFO, logger="absl")
    outcome_options = _options(tmp_path, best_metric="accuracy", early_stopping_patience=2,
                               do_predict=True)
    results = classification_task.run(outcome_options)
    out = tmp_path / "out"
    assert [step for step, _ in _eval_scalars(out)["eval_accuracy"]] == [4, 8, 12]
    assert tf.train.latest_checkpoint(str(out)).endswith("ckpt-12")
    assert f"Training stopped early: global_step 12 of {PLANNED} planned" in caplog.text
    assert "Early stopping at global_step 12: eval_accuracy has not improved" in caplog.text
    assert _best_results(out)["global_step"] == 4 and results["global_step"] == 4
    assert "Evaluation, prediction and export use the best checkpoint" in caplog.text
    predictions = (out / "test_results.tsv").read_text()
    # The same command again trains no further; more patience goes on from step 12 and
    # counts the evaluations since the best kept in best/ (8 and 12): it stops at 20.
    caplog.clear()
    assert classification_task.run(outcome_options)["global_step"] == 4
    assert "not training further" in caplog.text
    assert tf.train.latest_checkpoint(str(out)).endswith("ckpt-12")
    classification_task.run(_options(tmp_path, best_metric="accuracy",
                                     early_stopping_patience=4, do_predict=True))
    assert tf.train.latest_checkpoint(str(out)).endswith("ckpt-20")
    assert _best_results(out)["global_step"] == 4
    assert (out / "test_results.tsv").read_text() == predictions


def test_bad_flags_are_refused_before_training_naming_what_to_add(tmp_path):
    classifier_runs.write_sst2(tmp_path / "data")
    refusals = [
        (dict(best_metric="bleu"), r"--best_metric=bleu: classification/sst-2 does not "
         r"compute it; its evaluation computes eval_accuracy, eval_loss"),
        (dict(best_metric="accuracy", eval_every_steps=0), "add --eval_every_steps=N"),
        (dict(early_stopping_patience=2, eval_every_steps=0), "add --eval_every_steps=N"),
        (dict(early_stopping_patience=2), "add --best_metric="),
        (dict(do_eval=False), "add --do_eval"),
        (dict(eval_every_steps=-4), "eval_every_steps must be an integer >= 0"),
    ]
    for change, message in refusals:
        with pytest.raises(ValueError, match=message):
            classification_task.run(_options(tmp_path, **change))
    assert not glob.glob(str(tmp_path / "out" / "ckpt-*"))
    assert not (tmp_path / "out" / "train.tf_record").exists()


@pytest.mark.parametrize("task_name, names", [
    ("MRPC", ["eval_accuracy", "eval_f1", "eval_acc_and_f1", "eval_loss"]),
    ("CoLA", ["eval_matthews_corrcoef", "eval_accuracy", "eval_loss"]),
    ("STS-B", ["eval_pearson", "eval_spearman", "eval_pearson_and_spearman", "eval_loss"]),
])
def test_classification_metric_names_are_the_keys_of_its_eval_results(tmp_path, task_name,
                                                                      names):
    task = ClassificationTask(classifier_runs.options(tmp_path, task_name=task_name))
    assert task.metric_names() == names
    # The keys the task's scoring gives (regression: one score a row), plus eval_loss.
    task.label_list = task.processor.get_labels()
    logits = np.array([[0.2, 0.9], [0.7, 0.1], [0.3, 0.4]])[:, :1 if task.is_regression else 2]
    scores, _ = task._score(logits, np.array([1, 0, 0]))
    assert sorted(names) == sorted(list(scores) + ["eval_loss"])


def test_ner_evaluates_while_training_and_keeps_the_best_f1(tmp_path):
    ner_runs.write_tiny_inputs(tmp_path)
    # 40 sentences / 16 a batch * 14 epochs: 35 steps; evaluations every 10 and at 35.
    results = ner_task.run(ner_runs.options(
        tmp_path, do_train=True, do_eval=True, num_train_epochs=14.0, eval_every_steps=10,
        best_metric="f1"))
    f1 = _eval_scalars(tmp_path / "out")["eval_f1"]
    assert [step for step, _ in f1] == [10, 20, 30, 35]
    best_step, best_f1 = _first_best(f1)
    assert best_f1 > f1[0][1]  # it learns: the best is not the first evaluation
    kept = _best_results(tmp_path / "out")
    assert (kept["global_step"], kept["best_metric"]) == (best_step, "eval_f1")
    assert kept["eval_f1"] == pytest.approx(best_f1, rel=1e-6)
    assert results["global_step"] == best_step and results["eval_f1"] == kept["eval_f1"]


def test_squad_scores_its_predict_file_while_training(tmp_path):
    squad_runs.write_tiny_inputs(tmp_path)
    base = squad_runs.tiny_options(tmp_path, do_predict=True, num_train_epochs=2.0,
                                   eval_every_steps=2, best_metric="exact_match")
    results = squad_task.run(base)
    # 46 windows / 8 a batch * 2 epochs: 11 steps.
    scores = _eval_scalars(tmp_path / "out")
    assert [step for step, _ in scores["f1"]] == [2, 4, 6, 8, 10, 11]
    best_step, best_exact = _first_best(scores["exact_match"])
    kept = _best_results(tmp_path / "out")
    assert kept["global_step"] == best_step == results["global_step"]
    assert results["exact_match"] == pytest.approx(best_exact, rel=1e-6)
    with pytest.raises(ValueError, match="its evaluation computes exact_match, f1"):
        squad_task.run(squad_runs.tiny_options(tmp_path, do_predict=True,
                                               eval_every_steps=2, best_metric="loss"))
    np.testing.assert_equal(kept["f1"], results["f1"])
