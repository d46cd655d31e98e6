"""Several seeds as one run (what `--seeds` / `--num_seeds` make the driver do).

    outcome = run_seeds(task, driver.execute)   # from driver.execute itself

Each seed is an ordinary run of the task in `output_dir/seed-N` (its config.json, its
checkpoints; `--seed=N`), trained, then scored on the dev data (and the test data with
--do_predict). With `--stop_bad_seeds_after=F` every seed first trains to F of its
steps and is scored there; the bottom half stop, the others resume to the end. Then the
summary (`summary`): the table, `seeds_results.json`, TensorBoard, the best seed marked.
Rerunning the command continues each seed's folder as any run does.
"""

import math
import os

import keras
from absl import logging

from bert_tf.io import fileio
from bert_tf import options as options_lib
from bert_tf.runs import best_checkpoint
from bert_tf.runs import task as task_lib
from bert_tf.runs.seeds import options as seeds_options
from bert_tf.runs.seeds import summary as summary_lib
from bert_tf.train import distribute, preemption, step_hook

# What a seed's own options leave out: the group's flags (a seed is one run).
ONE_RUN = {"seeds": [], "num_seeds": 0, "stop_bad_seeds_after": 0.0}


def check_applies(task) -> None:
    """Refuses, before any work, several seeds of a run that cannot score them."""
    options, split = task.options, task.train_eval_split
    if not (options.do_train and getattr(options, f"do_{split}", False)):
        raise ValueError(f"--seeds trains each seed and scores it on the dev data: add "
                         f"--do_train and --do_{split} (and the dev data)")
    if getattr(options, "export_dir", None):
        raise ValueError(f"--export_dir with --seeds: the best seed is known only at the "
                         f"end; export it then (bert-export-model --init_checkpoint="
                         f"{options.output_dir} exports the best seed)")


def seed_task(task, seed: int, fraction: float = 0.0):
    """A task of `task`'s class for one seed: its options with --seed=seed and
    output_dir/seed-N (with `fraction`: only what the ranking needs, and a stop there)."""
    options = task.options
    values = dict(options_lib.options_to_dict(options), **ONE_RUN, seed=seed,
                  output_dir=os.path.join(options.output_dir, f"seed-{seed}"))
    task_class = type(task)
    if fraction:
        for split in ("eval", "predict"):
            values[f"do_{split}"] = split == task.train_eval_split
        task_class = task_lib.with_mixin(task_class, StopAtFraction)
    seed_options = options_lib.options_from_dict(type(options), values, f"seed {seed}")
    seed_options.check()
    new_task = task_class(seed_options)
    new_task.stop_fraction = fraction
    return new_task


def run_seeds(task, run_one, strategy=None):
    """Runs every seed of `task.options` (see the module docstring).

    Args:
      task: The task of the whole run (its options name the seeds).
      run_one: `run_one(task, strategy)` runs one task (`driver.execute`).

    Returns:
      `run_one`'s outcome of the best seed (the first trained seed's without one), its
      results with the summary's statistics added (`<metric>_mean`, ...).
    """
    options = task.options
    seeds = seeds_options.seed_list(options)
    check_applies(task)
    fileio.check_output_dir(options.output_dir)
    os.makedirs(options.output_dir, exist_ok=True)
    fraction = options.stop_bad_seeds_after
    logging.info("Seeds %s, each a run in %s/seed-N%s", ", ".join(map(str, seeds)),
                 options.output_dir, f"; the bottom half stop at {fraction:g} of their "
                 "steps" if fraction else "")
    states = {seed: "trained" for seed in seeds}
    early = {}
    if fraction:
        early = {seed: _run_seed(seed_task(task, seed, fraction), run_one, strategy)
                 for seed in seeds}
        for seed in _bottom_half(early):
            states[seed] = "stopped"
    outcomes = {}
    for seed in seeds:
        if states[seed] == "stopped" or early.get(seed, ("",))[0] == "diverged":
            outcomes[seed] = early[seed]  # scored at the fraction, or diverged before it
        else:
            outcomes[seed] = _run_seed(seed_task(task, seed), run_one, strategy)
    return _summarize(options.output_dir, outcomes, states, early)


def _run_seed(task, run_one, strategy):
    """(state, outcome or None) of one seed's run; a diverged loss is kept, not raised."""
    logging.info("Seed %d: %s", task.options.seed, task.options.output_dir)
    try:
        outcome = run_one(task, strategy)
        outcome.runner.model = None  # seeds run one after another: restored on first use
        return "trained", outcome
    except preemption.NonFiniteLoss as error:
        logging.warning("Seed %d diverged: %s", task.options.seed, error)
        return "diverged", None
    finally:
        keras.backend.clear_session()  # the next seed builds its model anew


def _metric(outcome, options) -> str:
    """--best_metric, else the task's first metric (known after the task's setup)."""
    task = outcome.runner.task
    names = task.metric_names()
    if not names:
        raise ValueError(f"--seeds scores each seed on the {task.train_eval_split} data, "
                         f"and {task.name} computes no metrics there: pass dev data with "
                         "labels")
    asked = getattr(options, "best_metric", None)
    return (best_checkpoint.resolve_metric(asked, names, task.name) if asked
            else best_checkpoint.default_metric(names))


def _bottom_half(early: dict) -> list:
    """The seeds to stop: the lower-scoring half of those scored at the fraction."""
    scored = {seed: outcome for seed, (state, outcome) in early.items()
              if state == "trained"}
    if not scored:
        return []
    first = next(iter(scored.values()))
    metric = _metric(first, first.runner.task.options)
    ranked = sorted(scored, key=lambda seed: _value(scored[seed].results, metric),
                    reverse=not best_checkpoint.is_minimised(metric))
    stop = ranked[math.ceil(len(ranked) / 2):]
    for seed in ranked:
        logging.info("Seed %d at global_step %d: %s = %.6g%s", seed,
                     scored[seed].runner.global_step, metric,
                     _value(scored[seed].results, metric),
                     " (bottom half: stopped)" if seed in stop else "")
    return stop


def _value(results: dict, metric: str) -> float:
    """The score to rank by (NaN ranks last)."""
    value = results.get(metric, math.nan)
    return value if math.isfinite(value) else -math.inf


def _summarize(output_dir, outcomes: dict, states: dict, early: dict):
    """Writes and prints the summary; returns the best seed's outcome (see run_seeds)."""
    trained = [outcome for state, outcome in outcomes.values() if outcome is not None]
    if not trained:
        raise preemption.NonFiniteLoss(f"every seed's loss diverged (see the seed-N "
                                       f"folders in {output_dir})")
    metric = _metric(trained[0], trained[0].runner.task.options)
    baseline = trained[0].runner.task.baseline_scores()
    rows = []
    for seed, (state, outcome) in outcomes.items():
        state = states[seed] if state == "trained" else state
        row = summary_lib.seed_row(seed, os.path.join(output_dir, f"seed-{seed}"), state,
                                   outcome.results if outcome else {}, metric, baseline)
        if seed in early and early[seed][1] is not None:  # the score the ranking used
            row["value_at_stop"] = early[seed][1].results.get(metric)
        rows.append(row)
    summary = summary_lib.summarize(rows, metric, baseline)
    if distribute.is_chief(trained[0].runner.context.strategy):  # workers: the chief's
        summary_lib.write(output_dir, summary)
    logging.info("Seeds of %s:\n%s", output_dir, summary_lib.table(summary))
    best = outcomes.get(summary["best_seed"], (None, trained[0]))[1]
    stats = {f"{metric}_{name}": value for name, value in summary["statistics"].items()}
    best.results = dict(best.results, best_seed=summary["best_seed"],
                        failed_seeds=len(summary["failed"]), **stats)
    return best


class StopAtFraction:
    """Mixed into a seed's task: training stops at `stop_fraction` of its steps."""
    stop_fraction = 0.0

    def schedule(self, num_examples: int):
        """The task's schedule; the stop step is that fraction of its steps."""
        steps, warmup = super().schedule(num_examples)
        self.stop_step = max(1, math.ceil(steps * self.stop_fraction))
        return steps, warmup

    def hooks(self) -> list:
        """The task's hooks, and the stop."""
        return super().hooks() + [StopAtStep(self.stop_step)]


class StopAtStep(step_hook.StepHook):
    """Stops training at global step `stop_step` (a checkpoint is saved there)."""

    def __init__(self, stop_step: int):
        self.every_steps = stop_step

    def begin(self, step: int) -> bool:
        return step >= self.every_steps  # a rerun that reached the stop before

    def is_due(self, step: int, num_train_steps: int) -> bool:
        return step >= self.every_steps

    def steps_to_next(self, step: int) -> int:
        return max(1, self.every_steps - step) if step < self.every_steps else None

    def after_steps(self, step: int, model) -> bool:
        del model
        return step >= self.every_steps
