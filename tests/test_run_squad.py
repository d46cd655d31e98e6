"""Tiny end-to-end SQuAD runs: train, predict, evaluate, resume; v2.0 null answers."""

import json
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.tasks.squad import task as squad_task
from bert_tf.tasks.squad.options import SquadOptions
from harness import write_squad_json, write_tiny_model_files

WORDS = ["red", "green", "blue", "house", "tree", "river", "stone", "bird", "road", "hill"]


def tiny_model_files(folder):
    return write_tiny_model_files(folder, ["where", "?", "café", "cafe", "."] + WORDS)


def write_squad(path, count, seed, impossible_every=0):
    """Questions "where ?" whose answer is "Café" somewhere in 7-14 random words.

    With `impossible_every`, every such question has no "Café" (SQuAD 2.0 style)."""
    rng = np.random.default_rng(seed)
    paragraphs = []
    for index in range(count):
        words = list(rng.choice(WORDS, size=int(rng.integers(7, 15))))
        qa = {"id": f"q{seed}_{index}", "question": "Where?"}
        if impossible_every and index % impossible_every == 0:
            qa.update(answers=[], is_impossible=True)
        else:
            words.insert(int(rng.integers(0, len(words) + 1)), "Café.")
            context = " ".join(words)
            qa["answers"] = [{"text": "Café", "answer_start": context.index("Café")}]
            if impossible_every:
                qa["is_impossible"] = False
        paragraphs.append({"context": " ".join(words), "qas": [qa]})
    write_squad_json(path, paragraphs, "v2.0" if impossible_every else "1.1")
    return str(path)


def options(tmp_path, **changes):
    vocab_file, config_file = tiny_model_files(tmp_path)
    values = dict(output_dir=str(tmp_path / "out"), vocab_file=vocab_file,
                  bert_config_file=config_file, max_seq_length=16, doc_stride=4,
                  max_query_length=4, train_batch_size=8, predict_batch_size=5,
                  learning_rate=3e-3, num_train_epochs=8.0, warmup_proportion=0.1,
                  save_checkpoints_steps=20, steps_per_loop=10, seed=1, max_answer_length=4)
    values.update(allow_random_encoder=True)  # tiny models train from random weights
    values.update(changes)
    return SquadOptions(**values)


def test_train_predict_evaluate_and_resume(tmp_path):
    train_file = write_squad(tmp_path / "train.json", 40, seed=0)
    dev_file = write_squad(tmp_path / "dev.json", 12, seed=1)
    evaluation = squad_task.run(options(tmp_path, do_train=True, do_predict=True,
                                        train_file=train_file, predict_file=dev_file))
    out = tmp_path / "out"
    predictions = json.loads((out / "predictions.json").read_text())
    assert sorted(predictions) == sorted(f"q1_{i}" for i in range(12))
    # The toy rule is learnt; the answer text keeps the accent and drops the full stop.
    # Every task returns (and writes) its scores with the step they were taken at.
    assert dict(evaluation, global_step=0) == {"exact_match": 100.0, "f1": 100.0,
                                               "global_step": 0}, predictions
    assert set(predictions.values()) == {"Café"}
    nbest = json.loads((out / "nbest_predictions.json").read_text())
    assert [len(v) <= 20 for v in nbest.values()] and not (out / "null_odds.json").exists()
    results = json.loads((out / "eval_results.json").read_text())
    # An epoch is a pass over the training windows, not the 40 questions: 8 epochs of
    # batch 8 over N windows are N steps.
    num_windows = sum(1 for _ in tf.data.TFRecordDataset(str(out / "train.tf_record")))
    assert num_windows > 40
    assert results == {"exact_match": 100.0, "f1": 100.0, "global_step": num_windows}
    assert (out / "eval_results.txt").read_text() == (
        f"exact_match = 100.0\nf1 = 100.0\nglobal_step = {num_windows}\n")
    # The evaluator CLI prints the same metrics for the written files.
    completed = subprocess.run(
        [sys.executable, "-m", "bert_tf.tasks.squad.evaluate", dev_file,
         str(out / "predictions.json")], capture_output=True, text=True, check=True)
    assert dict(json.loads(completed.stdout), global_step=num_windows) == evaluation
    # Predicting again restores the trained checkpoint.
    (out / "predictions.json").unlink()
    again = squad_task.run(options(tmp_path, do_predict=True, predict_file=dev_file))
    assert again == evaluation
    assert json.loads((out / "predictions.json").read_text()) == predictions


@pytest.mark.slow
def test_export_dir_answers_raw_text(tmp_path):
    train_file = write_squad(tmp_path / "train.json", 40, seed=0)
    squad_task.run(options(tmp_path, do_train=True, train_file=train_file,
                           export_dir=str(tmp_path / "export")))
    # The exported SavedModel answers raw text with plain TensorFlow.
    serving = tf.saved_model.load(str(tmp_path / "export")).signatures["serving_default"]
    answer = serving(question=tf.constant(["Where?"]),
                     context=tf.constant(["red house Café. blue tree"]))
    assert answer["answer_text"].numpy()[0].decode("utf-8") == "Café"


def test_version_2_writes_null_odds(tmp_path):
    train_file = write_squad(tmp_path / "train.json", 40, seed=0, impossible_every=3)
    dev_file = write_squad(tmp_path / "dev.json", 9, seed=1, impossible_every=3)
    evaluation = squad_task.run(options(
        tmp_path, do_train=True, do_predict=True, train_file=train_file,
        predict_file=dev_file, version_2_with_negative=True, num_train_epochs=1.0))
    out = tmp_path / "out"
    null_odds = json.loads((out / "null_odds.json").read_text())
    predictions = json.loads((out / "predictions.json").read_text())
    assert sorted(null_odds) == sorted(predictions) == sorted(f"q1_{i}" for i in range(9))
    # Null answer iff null score - best non-null score > 0 (the default threshold).
    assert all((predictions[q] == "") == (null_odds[q] > 0.0) for q in predictions)
    assert evaluation["HasAns_total"] == 6 and evaluation["NoAns_total"] == 3
    assert {"best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"} <= set(
        evaluation)
    results = json.loads((out / "eval_results.json").read_text())
    num_windows = sum(1 for _ in tf.data.TFRecordDataset(str(out / "train.tf_record")))
    assert results == dict(evaluation, global_step=num_windows // 8)  # 1 epoch of windows


def test_bad_options(tmp_path):
    with pytest.raises(ValueError, match="do_train needs train_file"):
        squad_task.run(options(tmp_path, do_train=True))
    with pytest.raises(FileNotFoundError, match="predict_file not found: .*missing.json"):
        squad_task.run(options(tmp_path, do_predict=True,
                               predict_file=str(tmp_path / "missing.json")))
    with pytest.raises(ValueError, match="max_query_length"):
        squad_task.run(options(tmp_path, do_predict=True, max_query_length=13,
                               predict_file=write_squad(tmp_path / "d.json", 2, 0)))
    # No room for the question: every question would be empty (it trained before).
    with pytest.raises(ValueError, match="max_query_length must be at least 1, got 0"):
        squad_task.run(options(tmp_path, do_train=True, max_query_length=0,
                               train_file=write_squad(tmp_path / "t.json", 2, 0)))
    assert not (tmp_path / "out" / "train.tf_record").exists()


def test_cli_help_lists_original_flags():
    completed = subprocess.run([sys.executable, "run_squad.py", "--helpfull"],
                               capture_output=True, text=True, check=False,
                               cwd=str(__import__("pathlib").Path(__file__).parents[1]))
    for flag in ("train_file", "predict_file", "doc_stride", "max_query_length",
                 "n_best_size", "max_answer_length", "version_2_with_negative",
                 "null_score_diff_threshold", "verbose_logging", "export_dir",
                 "distribution_strategy", "mixed_precision"):
        assert f"--{flag}" in completed.stdout or f"--[no]{flag}" in completed.stdout, flag


def test_predict_file_without_answers_is_not_evaluated(tmp_path):
    dev_file = write_squad(tmp_path / "dev.json", 2, seed=1)
    data = json.loads(open(dev_file).read())
    predictions = {"q1_0": "Café", "q1_1": "red"}
    assert squad_task.evaluate_predictions(dev_file, predictions, None) == {
        "exact_match": 50.0, "f1": 50.0}
    del data["data"][0]["paragraphs"][1]["qas"][0]["answers"]
    (tmp_path / "test.json").write_text(json.dumps(data))
    assert squad_task.evaluate_predictions(str(tmp_path / "test.json"), predictions,
                                           None) is None


@pytest.mark.parametrize("change, message", [
    (dict(n_best_size=0), "n_best_size must be at least 1"),
    (dict(max_answer_length=0), "max_answer_length must be at least 1"),
])
def test_settings_that_cannot_work_are_refused(tmp_path, change, message):
    dev_file = write_squad(tmp_path / "dev.json", 3, seed=1)
    with pytest.raises(ValueError, match=message):
        squad_task.run(options(tmp_path, do_predict=True, predict_file=dev_file, **change))


@pytest.mark.parametrize("name", ["pack_sequences", "do_eval", "dropout_rate"])
def test_options_squad_does_not_take_are_not_options(tmp_path, name):
    # Packing (its start/end softmax covers the whole row, padding included), a dev-data
    # step (do_predict scores predict_file) and head dropout are not run_squad's.
    with pytest.raises(TypeError, match=name):
        options(tmp_path, do_predict=True, **{name: True})


def write_tiny_inputs(tmp_path):
    """The data of `tiny_options` (shared with test_commands)."""
    write_squad(tmp_path / "train.json", 24, 0)
    write_squad(tmp_path / "dev.json", 6, 1)


def tiny_options(tmp_path, **changes):
    """A short training run of this task (shared with test_commands)."""
    return options(tmp_path, **{"do_train": True, "num_train_epochs": 1.0,
                                "train_file": str(tmp_path / "train.json"),
                                "predict_file": str(tmp_path / "dev.json"), **changes})
