"""One trial of a search: the task with its trial's options, whose dev scores while
training (`--eval_every_steps`) go to Optuna, and which stops when the pruner says so.

    task = trial_task(entry.task_class)(options)
    task.search_trial, task.asked_metric = trial, "eval_accuracy"
    results = driver.run(task)       # task.pruned_at: the step it stopped at, or None
"""

import math

from absl import logging

from bert_tf.runs import best_checkpoint
from bert_tf.runs import task as task_lib
from bert_tf.train import step_hook


class TrialMixin:
    """Added before a task class: keeps the dev scores of each evaluation, adds the
    pruning hook, and resolves the metric as soon as the task knows its metrics."""
    search_trial = None  # the Optuna trial
    asked_metric = None  # --search_metric / --best_metric (None: the task's first)
    search_metric = None  # the resolved name (after setup)
    search_scores = None  # the latest dev scores, until the hook reads them
    pruned_at = None  # the global step the pruner stopped the trial at

    def setup(self, context) -> None:
        """The task's setup, then the metric (refused when the task lacks it)."""
        super().setup(context)
        names = self.metric_names()
        if not names:
            raise ValueError(f"--search scores each trial on the {self.train_eval_split} "
                             f"data, and {self.name} computes no metrics there (no gold "
                             "labels): pass dev data with labels")
        if self.asked_metric is None:
            self.search_metric = best_checkpoint.default_metric(names)
            return
        try:
            self.search_metric = best_checkpoint.resolve_metric(self.asked_metric, names,
                                                                self.name)
        except ValueError:
            raise ValueError(f"--search_metric={self.asked_metric}: {self.name} does not "
                             f"compute it; its evaluation computes {', '.join(names)}") \
                from None

    def evaluate(self, split: str, runner) -> dict:
        """The task's scores, kept for the pruning hook."""
        scores = super().evaluate(split, runner)
        if split == self.train_eval_split:
            self.search_scores = scores
        return scores

    def hooks(self) -> list:
        """The task's hooks and the pruning hook (after the evaluation's)."""
        return super().hooks() + [PruningHook(self)]


def trial_task(task_class) -> type:
    """`task_class` with `TrialMixin` (same name and command)."""
    return task_lib.with_mixin(task_class, TrialMixin)


class PruningHook(step_hook.StepHook):
    """After each evaluation while training, reports the metric to the trial (at its
    global step) and stops training when the pruner prunes the trial."""

    def __init__(self, task):
        self.task = task
        self.every_steps = getattr(task.options, "eval_every_steps", 0) or 0

    def after_steps(self, step, model) -> bool:
        """Reports the newest dev score; True (stop) when the trial is pruned."""
        del model
        task, scores = self.task, self.task.search_scores
        task.search_scores = None
        if not scores or task.search_metric not in scores:
            return False
        value = float(scores[task.search_metric])
        if math.isnan(value):
            return False
        task.search_trial.report(value, step)
        if task.search_trial.should_prune():
            task.pruned_at = step
            logging.info("Trial %d pruned at global_step %d: %s = %.6g falls behind the "
                         "other trials' at this step", task.search_trial.number, step,
                         task.search_metric, value)
            return True
        return False
