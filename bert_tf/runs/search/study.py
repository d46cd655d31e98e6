"""A hyperparameter search of a task on Optuna (what `bert-search` runs).

    summary = study.run_search("classification", task_options, search_options)

Before any work: the `optuna` extra, the space file (`space`), every value it can give
through the command's checks, and the storage. Then `--trials` trials, each a normal run
folder `output_dir/trial-N` (its config.json; `bert-export-model
--init_checkpoint=output_dir/trial-N` exports it), with the dev scores of
`--eval_every_steps` reported so that the pruner stops weak trials. At the end the
trials of the whole study (every process's) are printed as a table and written to
`output_dir/search_results.json`, and the best is marked: `output_dir/best_trial.json`
and the link `output_dir/best_trial` -> `trial-N`.

The study lives in `--search_storage` (default `sqlite:///<output_dir>/search.db`);
processes started with the same command and storage URL share it (Optuna's own
distributed storage), each running its `--trials`.
"""

import json
import os
import socket
import urllib.parse

import keras
from absl import logging

from bert_tf import extras
from bert_tf.io import fileio
from bert_tf.runs import best_checkpoint, driver, registry
from bert_tf.runs.search import report, space, trial as trial_lib
from bert_tf.train import preemption

STORAGE_FILE = "search.db"
CONNECT_TIMEOUT_S = 20


def shown_url(url: str) -> str:
    """`url` with its password hidden (as errors and results name it)."""
    parts = urllib.parse.urlsplit(url)
    if not parts.password:
        return url
    netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port
                                                          else "")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def storage_url(search, output_dir: str) -> str:
    """`--search_storage`, else the SQLite file in `output_dir`."""
    return search.search_storage or "sqlite:///" + os.path.abspath(
        os.path.join(output_dir, STORAGE_FILE))


def open_storage(optuna, url: str):
    """Optuna's RDB storage at `url`, connected.

    Raises:
      ValueError: in one line naming the URL (password hidden), when it cannot be
        reached: a bad URL, a server that does not answer, a missing database driver.
    """
    if url.startswith("sqlite"):
        engine = {"connect_args": {"timeout": 60}}  # processes wait for the file's lock
    else:
        engine = {"pool_pre_ping": True, "connect_args": {"connect_timeout": CONNECT_TIMEOUT_S}}
    try:
        return optuna.storages.RDBStorage(url, engine_kwargs=engine)
    except Exception as error:  # pylint: disable=broad-except  # SQLAlchemy's, the driver's
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ValueError(f"--search_storage={shown_url(url)}: cannot be reached "
                         f"({type(error).__name__}: {first[:300]})") from None


def make_pruner(optuna, name: str):
    """The Optuna pruner of `--pruner`."""
    pruners = optuna.pruners
    return {"median": lambda: pruners.MedianPruner(n_startup_trials=2),
            "percentile": lambda: pruners.PercentilePruner(25.0, n_startup_trials=2),
            "successive_halving": pruners.SuccessiveHalvingPruner,
            "hyperband": pruners.HyperbandPruner,
            "none": pruners.NopPruner}[name]()


def direction(search, options) -> str:
    """`--search_direction`, else from the metric's name (losses are minimised)."""
    metric = search.search_metric or getattr(options, "best_metric", None)
    if search.search_direction:
        return search.search_direction
    return "minimize" if metric and best_checkpoint.is_minimised(metric) else "maximize"


def check_base(entry, options, search) -> None:
    """Refuses, before any work, a search whose trials would not train and score."""
    split = entry.task_class.train_eval_split
    if not (options.do_train and getattr(options, f"do_{split}", False)):
        raise ValueError(f"--search trains each trial and scores it on the dev data: add "
                         f"--do_train and --do_{split} (and the dev data)")
    if search.pruner != "none" and not getattr(options, "eval_every_steps", 0):
        logging.warning("--pruner=%s has no dev scores to go on without "
                        "--eval_every_steps=N: every trial trains to its end",
                        search.pruner)


def run_search(task_name: str, options, search) -> dict:
    """Runs `search.trials` trials of task `task_name` from its `options` (see the module
    docstring); returns the summary written to search_results.json.

    Raises:
      MissingExtra: without optuna. ValueError / OSError: naming the bad input (space
        file, storage, options), before the first trial.
    """
    optuna = extras.require("optuna", "--search")
    search.check()
    if not search.search:
        raise ValueError("--search is required: a JSON file of the options to search "
                         "(docs/finetuning.md, Hyperparameter search)")
    entry = registry.get(task_name)
    params = space.parse(space.read(search.search), entry.options_class, search.search)
    space.check_values(params, options, search.search)
    check_base(entry, options, search)
    output_dir = options.output_dir
    fileio.check_output_dir(output_dir)
    url = storage_url(search, output_dir)
    os.makedirs(output_dir, exist_ok=True)
    storage = open_storage(optuna, url)
    name = search.search_study_name or os.path.basename(os.path.abspath(output_dir))
    study = optuna.create_study(storage=storage, study_name=name, load_if_exists=True,
                                direction=direction(search, options),
                                pruner=make_pruner(optuna, search.pruner))
    logging.info("Study %r in %s: %d trials there so far; this process runs %d",
                 name, shown_url(url), len(study.trials), search.trials)
    asked = search.search_metric or getattr(options, "best_metric", None)
    study.optimize(lambda trial: _objective(optuna, trial, entry, options, params, asked),
                   n_trials=search.trials, catch=(preemption.NonFiniteLoss,))
    summary = report.summarize(optuna, study, shown_url(url))
    report.write(output_dir, summary)
    print(report.table(summary), flush=True)
    return summary


def _objective(optuna, trial, entry, base, params, asked_metric) -> float:
    """Runs one trial in output_dir/trial-N; its dev score (pruned: TrialPruned)."""
    values = {param.name: param.suggest(trial) for param in params}
    folder = os.path.join(base.output_dir, f"trial-{trial.number}")
    trial.set_user_attr("folder", os.path.basename(folder))
    trial.set_user_attr("host", socket.gethostname())
    options = space.trial_options(base, values, folder, f"trial {trial.number} ({folder})")
    task = trial_lib.trial_task(entry.task_class)(options)
    task.search_trial, task.asked_metric = trial, asked_metric
    logging.info("Trial %d in %s: %s", trial.number, folder, json.dumps(values))
    try:
        results = driver.run(task)
    finally:
        keras.backend.clear_session()  # the next trial builds its model anew
    trial.set_user_attr("metric", task.search_metric)
    if task.pruned_at is not None:
        raise optuna.TrialPruned(f"pruned at global_step {task.pruned_at}")
    if task.search_metric not in results:
        raise ValueError(f"trial {trial.number} ({folder}): its evaluation did not compute "
                         f"{task.search_metric} (it computed {', '.join(sorted(results))})")
    return float(results[task.search_metric])
