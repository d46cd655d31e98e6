"""Several seeds as one run (`--seeds`, bert_tf.runs.seeds) of a tiny classifier: one
run folder per seed, the summary (statistics recomputed here from each seed's own
results), the best seed marked and exported, the bottom half stopped early, a diverged
seed counted as failed, and bad input named before any work."""

import json
import os
import statistics
import subprocess
import sys

import numpy as np
import pytest

import test_run_classifier
from bert_tf.runs import driver, export_checkpoint, run_groups
from bert_tf.tasks.classification import task as classification_task
from bert_tf.tasks.distillation import teacher as teacher_lib
from bert_tf.tasks.electra.options import ElectraOptions
from bert_tf.tasks.pretraining.options import PretrainingOptions
from bert_tf.runs.seeds import options as seeds_options
from bert_tf.runs.seeds import runs, summary as summary_lib
from bert_tf.train import preemption, step_hook


def _options(tmp_path, **changes):
    test_run_classifier.write_sst2(tmp_path / "data")
    return test_run_classifier.options(tmp_path, **dict(dict(
        do_train=True, do_eval=True, num_train_epochs=6.0, learning_rate=5e-3), **changes))


def _seed_results(out, seed):
    return json.loads((out / f"seed-{seed}" / "eval_results.json").read_text())


def test_seeds_train_a_folder_each_summarize_and_the_best_exports(tmp_path, capsys):
    results = classification_task.run(_options(tmp_path, seeds=["3", "1"]))
    out = tmp_path / "out"
    scores = {}
    for seed in (3, 1):  # each an ordinary run with its own seed
        config = json.loads((out / f"seed-{seed}" / "config.json").read_text())["options"]
        assert config["seed"] == seed and config["seeds"] == []
        assert config["output_dir"] == str(out / f"seed-{seed}")
        scores[seed] = _seed_results(out, seed)["eval_accuracy"]
    summary = json.loads((out / "seeds_results.json").read_text())
    values = [scores[seed] for seed in (3, 1)]
    assert summary["metric"] == "eval_accuracy"
    assert [row["value"] for row in summary["seeds"]] == values
    stats = summary["statistics"]
    assert stats["mean"] == pytest.approx(np.mean(values))
    assert stats["std"] == pytest.approx(np.std(values, ddof=1))
    assert stats["median"] == pytest.approx(np.median(values))
    assert (stats["min"], stats["max"]) == (min(values), max(values))
    assert summary["baseline"] == 0.5  # 8 of the 16 dev rows are each class
    best = max((3, 1), key=lambda seed: (scores[seed], -[3, 1].index(seed)))
    assert summary["best_seed"] == best and results["best_seed"] == best
    assert results["eval_accuracy_mean"] == pytest.approx(np.mean(values))
    assert results["eval_accuracy"] == scores[best]
    assert os.readlink(out / "best_seed") == f"seed-{best}"
    assert run_groups.best_run(str(out)) == str(out / f"seed-{best}")
    assert teacher_lib.read_teacher(str(out)).folder == str(out / f"seed-{best}")
    assert list((out / "seeds").glob("events.out.tfevents.*"))  # TensorBoard
    run = _options(tmp_path)
    exported = export_checkpoint.export_from_checkpoint(export_checkpoint.ExportOptions(
        init_checkpoint=str(out), export_dir=str(tmp_path / "export"),
        vocab_file=run.vocab_file, max_seq_length=12))
    assert os.path.isfile(os.path.join(exported, "saved_model.pb"))


def test_the_bottom_half_stop_at_the_fraction_and_the_rest_train_on(tmp_path):
    classification_task.run(_options(tmp_path, num_seeds=3, stop_bad_seeds_after=0.5))
    summary = json.loads((tmp_path / "out" / "seeds_results.json").read_text())
    rows = {row["seed"]: row for row in summary["seeds"]}
    stopped = sorted(summary["stopped"])
    kept = sorted(set(rows) - set(stopped))
    assert len(stopped) == 1 and len(kept) == 2  # 64 rows / 16 x 6 epochs = 24 steps
    assert {rows[seed]["global_step"] for seed in stopped} == {12}
    assert {rows[seed]["global_step"] for seed in kept} == {24}
    assert min(rows[seed]["value_at_stop"] for seed in kept) >= max(
        rows[seed]["value_at_stop"] for seed in stopped)
    assert summary["best_seed"] in kept and summary["statistics"]["count"] == 2


def test_a_diverged_seed_is_a_failed_seed_and_not_the_best(tmp_path):
    def run_one(task, strategy):
        if task.options.seed == 2:
            raise preemption.NonFiniteLoss({"total_loss": float("nan")}, 3, 1, None)
        return driver.execute(task, strategy)
    task = classification_task.ClassificationTask(_options(tmp_path, seeds=["1", "2"]))
    outcome = runs.run_seeds(task, run_one)
    summary = json.loads((tmp_path / "out" / "seeds_results.json").read_text())
    assert summary["failed"] == [2] and summary["best_seed"] == 1
    assert summary["seeds"][1]["state"] == "diverged"
    assert outcome.results["failed_seeds"] == 1


def test_a_seed_at_the_constant_prediction_baseline_failed():
    rows = [summary_lib.seed_row(seed, f"/o/seed-{seed}", "trained",
                                 {"eval_accuracy": value, "global_step": 9},
                                 "eval_accuracy", {"eval_accuracy": 0.684})
            for seed, value in ((1, 0.80), (2, 0.684), (3, 0.78))]
    summary = summary_lib.summarize(rows, "eval_accuracy", {"eval_accuracy": 0.684})
    assert summary["failed"] == [2] and summary["best_seed"] == 1
    assert summary["statistics"]["median"] == 0.78  # failed seeds are in the statistics
    assert summary["statistics"]["std"] == pytest.approx(statistics.stdev([0.8, 0.684, 0.78]))
    text = summary_lib.table(summary)
    assert "failed: 1 of 3 seeds (2)" in text and "best: seed 1" in text
    loss = summary_lib.seed_row(1, "/o/seed-1", "trained", {"eval_loss": 0.7}, "eval_loss",
                                {"eval_loss": 0.69})
    assert loss["failed"]  # a loss is failed at or above the constant's


def test_classification_baseline_is_the_majority_class(tmp_path):
    options = _options(tmp_path)
    test_run_classifier.write_tsv(tmp_path / "data" / "dev.tsv", [("sentence", "label")] + [
        ("good film", "1")] * 3 + [("bad film", "0")])
    task = classification_task.ClassificationTask(options)
    task.examples = {"dev": task._read_examples("dev")}
    task.label_list = ["0", "1"]
    assert task.baseline_scores() == {"eval_accuracy": 0.75}


@pytest.mark.parametrize("changes, message", [
    ({"seeds": ["1", "1"]}, "repeated: [1]"),
    ({"seeds": ["-2"]}, "negative: [-2]"),
    ({"seeds": ["x"]}, "--seeds=x: expected comma-separated integers"),
    ({"seeds": ["1"], "num_seeds": 2}, "give one of them"),
    ({"num_seeds": -1}, "num_seeds must be an integer >= 0"),
    ({"seeds": ["1", "2"], "stop_bad_seeds_after": 1.0}, "must be in [0, 1)"),
    ({"seeds": ["1"], "stop_bad_seeds_after": 0.5}, "ranks several seeds"),
    ({"seeds": ["1", "2"], "do_eval": False}, "add --do_train and --do_eval"),
    ({"seeds": ["1", "2"], "export_dir": "/tmp/x"}, "bert-export-model --init_checkpoint="),
])
def test_bad_seeds_are_refused_before_any_work(tmp_path, changes, message):
    options = _options(tmp_path, **changes)
    with pytest.raises(ValueError) as raised:
        options.check()
        classification_task.run(options)
    assert message in str(raised.value)
    assert not (tmp_path / "out").exists()


def test_pre_training_takes_no_seeds(tmp_path):
    for options_class in (PretrainingOptions, ElectraOptions):
        assert not {"seeds", "num_seeds"} & set(options_class.__dataclass_fields__)
    ran = subprocess.run([sys.executable, "-m", "bert_tf.cli.train", "--task=pretraining",
                          f"--input_file={tmp_path}/x", f"--output_dir={tmp_path}/o",
                          "--seeds=1,2"], capture_output=True, text=True, check=False)
    assert ran.returncode != 0 and "seeds" in ran.stderr
    assert not (tmp_path / "o").exists()


def test_seed_lists_parse():
    assert seeds_options.seed_list(seeds_options.Seeds(seeds=["4", " 2"])) == [4, 2]
    assert seeds_options.seed_list(seeds_options.Seeds(num_seeds=3)) == [1, 2, 3]
    assert seeds_options.seed_list(seeds_options.Seeds()) == []


def test_hooks_of_different_periods_are_each_called_at_their_steps():
    class Every(step_hook.StepHook):
        def __init__(self, every):
            self.every_steps, self.calls = every, []

        def after_steps(self, step, model):
            self.calls.append(step)
            return False
    hooks = [Every(100), Every(150)]
    combined, step = step_hook.StepHooks(hooks), 0
    while step < 300:  # as the loop: to the next due step, then the due hooks
        step += combined.steps_to_next(step)
        if combined.is_due(step, 300):
            combined.after_steps(step, None)
    assert hooks[0].calls == [100, 200, 300] and hooks[1].calls == [150, 300]
