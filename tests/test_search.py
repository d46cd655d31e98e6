"""Hyperparameter search (`bert-search`, bert_tf.runs.search) of a tiny classifier:
trials as run folders, the table, the best trial marked and exported, the pruner, two
processes sharing one study, and bad input named before any work."""

import json
import os
import re
import subprocess
import sys

import pytest

import test_run_classifier
from bert_tf import options as options_lib
from bert_tf.runs import best_checkpoint
from bert_tf.tasks.classification.options import ClassifierOptions
from bert_tf.runs.search import options as search_options
from bert_tf.runs.search import space, trial as trial_lib

SPACE = {"learning_rate": {"low": 1e-4, "high": 1e-2, "log": True},
         "seed": {"choices": [1, 2, 3]}, "warmup_proportion": {"low": 0.0, "high": 0.2}}


def _write_space(tmp_path, content=None, name="space.json"):
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(SPACE if content is None else content))
    return str(path)


def _task_options(tmp_path, **changes):
    test_run_classifier.write_sst2(tmp_path / "data")
    return test_run_classifier.options(
        tmp_path, **dict(dict(do_train=True, do_eval=True, num_train_epochs=2.0,
                              eval_every_steps=4), **changes))


@pytest.mark.extras("optuna")
def test_a_search_writes_trial_folders_a_table_and_marks_the_best_which_exports(
        tmp_path, capsys):
    pytest.importorskip("optuna")
    from bert_tf.runs import export_checkpoint
    from bert_tf.runs.search import study
    options = _task_options(tmp_path)
    summary = study.run_search("classification", options, search_options.SearchOptions(
        search=_write_space(tmp_path), trials=3))
    out = tmp_path / "out"
    trials = summary["trials"]
    assert [row["trial"] for row in trials] == [0, 1, 2]
    assert {row["state"] for row in trials} <= {"complete", "pruned"}
    for row in trials:  # each a normal run folder, with its own options
        config = json.loads((out / row["folder"] / "config.json").read_text())["options"]
        assert config["output_dir"] == str(out / row["folder"])
        assert config["learning_rate"] == pytest.approx(row["params"]["learning_rate"])
        assert config["seed"] == row["params"]["seed"]
    scores = [row["value"] for row in trials if row["state"] == "complete"]
    best = summary["best_trial"]
    assert summary["metric"] == "eval_accuracy" and best["value"] == max(scores)
    assert json.loads((out / "search_results.json").read_text()) == summary
    assert json.loads((out / "best_trial.json").read_text())["trial"] == best["trial"]
    assert os.readlink(out / "best_trial") == best["folder"]
    printed = capsys.readouterr().out
    assert "eval_accuracy" in printed and f"best: trial {best['trial']}" in printed
    rows = [line for line in printed.splitlines() if re.search(r" trial-\d+$", line)]
    assert len(rows) == 3 and rows[best["trial"]].startswith("*")
    exported = export_checkpoint.export_from_checkpoint(export_checkpoint.ExportOptions(
        model_type="classifier", init_checkpoint=str(out),  # the study: its best trial
        export_dir=str(tmp_path / "export"), vocab_file=options.vocab_file,
        bert_config_file=options.bert_config_file, max_seq_length=12))
    assert os.path.isfile(os.path.join(exported, "saved_model.pb"))


class _Trial:
    """An Optuna trial's report / should_prune, recorded."""
    number = 7

    def __init__(self, prune):
        self.prune, self.reports = prune, []

    def report(self, value, step):
        self.reports.append((step, value))

    def should_prune(self):
        return self.prune


def test_the_pruning_hook_reports_each_dev_score_and_stops_a_pruned_trial():
    task = trial_lib.TrialMixin()
    task.options = ClassifierOptions(eval_every_steps=4)
    task.search_metric, task.search_trial = "eval_loss", _Trial(prune=False)
    hook = trial_lib.PruningHook(task)
    assert hook.every_steps == 4
    task.search_scores = {"eval_loss": 0.5, "eval_accuracy": 1.0}
    assert hook.after_steps(4, None) is False and task.search_scores is None
    assert hook.after_steps(8, None) is False  # no new evaluation: nothing reported
    task.search_trial = _Trial(prune=True)
    task.search_scores = {"eval_loss": 0.9}
    assert hook.after_steps(12, None) is True and task.pruned_at == 12
    assert task.search_trial.reports == [(12, 0.9)]
    assert best_checkpoint.default_metric(["eval_loss", "eval_f1"]) == "eval_f1"


@pytest.mark.slow
@pytest.mark.extras("optuna")
def test_a_trial_behind_the_others_is_pruned(tmp_path):
    optuna = pytest.importorskip("optuna")
    from bert_tf.runs.search import study
    options = _task_options(tmp_path, num_train_epochs=4.0, train_batch_size=16)
    out = tmp_path / "out"
    out.mkdir()
    # Two trials that learn, then one that cannot (a learning rate of ~0), in this order.
    storage = f"sqlite:///{out / 'search.db'}"
    first = optuna.create_study(storage=storage, study_name="out", direction="minimize")
    for rate in (5e-3, 5e-3, 1e-9):
        first.enqueue_trial({"learning_rate": rate})
    summary = study.run_search("classification", options, search_options.SearchOptions(
        search=_write_space(tmp_path, {"learning_rate": {"low": 1e-9, "high": 1e-2,
                                                          "log": True}}),
        trials=3, search_metric="eval_loss"))
    assert summary["direction"] == "minimize"
    assert [row["state"] for row in summary["trials"]] == ["complete", "complete", "pruned"]
    assert summary["trials"][2]["last_step_scored"] == 4
    assert summary["best_trial"]["value"] == min(row["value"] for row in summary["trials"][:2])


def _search_command(tmp_path, *flags):
    """bert-search of the tiny classifier's options (as a --config file)."""
    options = _task_options(tmp_path)
    config = tmp_path / "config.json"
    config.write_text(json.dumps(options_lib.options_to_dict(options)))
    return [sys.executable, "-m", "bert_tf.cli.search", "--task=classification",
            f"--config={config}", f"--search={_write_space(tmp_path)}", *flags]


@pytest.mark.slow
@pytest.mark.extras("optuna")
def test_two_processes_sharing_one_storage_run_one_study(tmp_path):
    optuna = pytest.importorskip("optuna")
    storage = f"sqlite:///{tmp_path / 'shared.db'}"
    command = _search_command(tmp_path, "--trials=2", f"--search_storage={storage}",
                              "--search_study_name=shared")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    runs = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [run.communicate(timeout=600) for run in runs]
    for run, (_, stderr) in zip(runs, outputs):
        assert run.returncode == 0, stderr[-3000:]
    trials = optuna.load_study(study_name="shared", storage=storage).trials
    assert sorted(trial.number for trial in trials) == [0, 1, 2, 3]
    assert all(trial.state.name in ("COMPLETE", "PRUNED") for trial in trials)
    out = tmp_path / "out"
    assert sorted(path.name for path in out.glob("trial-*")) == [
        "trial-0", "trial-1", "trial-2", "trial-3"]
    results = json.loads((out / "search_results.json").read_text())
    assert len(results["trials"]) == 4 and (out / "best_trial").is_dir()


# ------------------------------------------------------------------------ bad input
@pytest.mark.parametrize("content, message", [
    ({"learning_rat": {"low": 1e-5, "high": 1e-4}},
     r"space.json: learning_rat: not an option of this command"),
    ({"learning_rate": {"low": 1e-4, "high": 1e-4}},
     r"space.json: learning_rate: an empty range \(low=0.0001, high=0.0001\): expected "
     r"low < high"),
    ({"warmup_proportion": {"low": 0.0, "high": 0.2, "log": True}},
     r"space.json: warmup_proportion: a log range must lie above zero, got low=0.0"),
    ({"seed": {"choices": []}}, r"space.json: seed: choices must be a non-empty list"),
    ({"train_batch_size": {"low": 8.5, "high": 32}},
     r"train_batch_size: low must be an integer, got 8.5"),
    ({"task_name": {"low": 1, "high": 2}}, r"task_name: a range needs an option that is a "
                                           r"number"),
    ({"output_dir": {"choices": ["a"]}}, r"output_dir: set by the search itself"),
    ({"dropout_rate": {"low": 0.0, "high": 1.0}},
     r"space.json: dropout_rate=1.0: dropout_rate must be in \[0, 1\), got 1.0"),
    ({"seed": {"choices": ["x"]}}, r"option seed: expected an integer or null, got 'x'"),
    ([], r"space.json: expected a JSON object of the options to search"),
    ("{not json", r"space.json: not a JSON file"),
])
def test_a_bad_space_file_is_named_with_its_key(tmp_path, content, message):
    path = _write_space(tmp_path, content)
    base = test_run_classifier.options(tmp_path, do_train=True, do_eval=True)
    with pytest.raises(ValueError, match=message):
        space.check_values(space.parse(space.read(path), ClassifierOptions, path), base,
                           path)


def test_a_missing_space_file_is_named(tmp_path):
    with pytest.raises(OSError, match=r"--search=.*nowhere.json: cannot read the search "
                                      r"space file"):
        space.read(str(tmp_path / "nowhere.json"))


@pytest.mark.extras("optuna")
def test_an_unreachable_storage_is_one_line_naming_it(tmp_path):
    pytest.importorskip("optuna")
    url = "postgresql://user:secret@127.0.0.1:9/nodb"  # nothing listens on port 9
    done = subprocess.run(_search_command(tmp_path, f"--search_storage={url}"),
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
                          capture_output=True, text=True, timeout=300)
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert last.startswith("bert-search: error: --search_storage=postgresql://user:***@"
                           "127.0.0.1:9/nodb: cannot be reached (")
    assert not list((tmp_path / "out").glob("trial-*"))


@pytest.mark.extras("optuna")
def test_a_search_without_dev_scores_is_refused(tmp_path):
    pytest.importorskip("optuna")
    from bert_tf.runs.search import study
    options = test_run_classifier.options(tmp_path, do_train=True)
    with pytest.raises(ValueError, match=r"--search trains each trial and scores it on the "
                                         r"dev data: add --do_train and --do_eval"):
        study.run_search("classification", options, search_options.SearchOptions(
            search=_write_space(tmp_path)))
