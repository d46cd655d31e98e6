"""Evaluation while training, the best checkpoint and early stopping, for every task
(`eval_every_steps`, `best_metric`, `early_stopping_patience` of
`bert_tf.runs.options.FinetuneOptions`), through the one driver:

    hook = best_checkpoint.training_evaluation(task, runner)  # None: not asked for
    loop.train(..., hook=hook)                                # a step_hook.StepHook

Every `eval_every_steps` global steps, and at the last step, the task scores its dev
data (`Task.train_eval_split`); the scores are logged and written to TensorBoard under
`output_dir/eval` (a tag per metric). With `best_metric`, a strictly better score saves
the model to `output_dir/best/`: `ckpt-<step>` (which also records the metric, its
value and the step) and `eval_results.txt` / `.json` of that evaluation (with
`global_step` and `best_metric`). Names containing "loss" are minimised, the others
maximised; a NaN score is never better. With `early_stopping_patience`, that many
evaluations in a row without a better score stop the run (the loop saves a checkpoint
there). A resumed run reads the best so far back from `best/`, and counts the
evaluations since it (those at multiples of `eval_every_steps` after its step), so a run
that stopped early stays stopped.
"""

import math
import os
from typing import Optional

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf.runs import task as task_lib
from bert_tf.train import distribute, lora, preemption, step_hook
from bert_tf.train.loop_runner import write_scalar_summary
from bert_tf.weights import training_checkpoints

_VALUE = "{}/.ATTRIBUTES/VARIABLE_VALUE"


def resolve_metric(name: str, names, task_name: str) -> str:
    """The name among `names` that `name` means (`accuracy` is `eval_accuracy` too).

    Raises:
      ValueError: listing the metrics the task computes, when it computes no such one.
    """
    for candidate in (name, f"eval_{name}"):
        if candidate in names:
            return candidate
    raise ValueError(f"--best_metric={name}: {task_name} does not compute it; its "
                     f"evaluation computes {', '.join(names)}")


def is_minimised(metric: str) -> bool:
    """Loss-like metrics (names containing "loss") are minimised, others maximised."""
    return "loss" in metric.lower()


def default_metric(names) -> str:
    """The task's first metric that is not a loss (else its first): what a search or a
    run of several seeds scores by when no metric is named."""
    return next((name for name in names if not is_minimised(name)), names[0])


def training_evaluation(task, runner) -> Optional["TrainingEvaluation"]:
    """The hook of a run that evaluates while training, or None when it does not.

    Raises:
      ValueError: before training, when the dev data is not asked for or has no gold
        labels, or `best_metric` is not one the task computes (the list is named).
    """
    options = task.options
    if not (options.do_train and getattr(options, "eval_every_steps", 0)):
        return None
    split = task.train_eval_split
    if not getattr(options, f"do_{split}", False):
        raise ValueError(f"--eval_every_steps scores the dev data while training: add "
                         f"--do_{split} (and its data)")
    names = task.metric_names()
    if not names:
        raise ValueError(f"--eval_every_steps: {task.name} computes no metrics on its "
                         f"{split} data (it has no gold labels; run_squad: a predict_file "
                         "whose questions have answers); pass dev data with labels, or "
                         "drop --eval_every_steps")
    metric = options.best_metric and resolve_metric(options.best_metric, names, task.name)
    return TrainingEvaluation(task, runner, metric or None)


def read_best(output_dir: str) -> Optional[tuple]:
    """(metric, value, global_step) of the best checkpoint kept in `output_dir/best/`,
    or None when there is none."""
    prefix = training_checkpoints.best_checkpoint(output_dir)
    if prefix is None:
        return None
    metric = tf.train.load_variable(prefix, _VALUE.format("best_metric"))
    return (metric.decode() if isinstance(metric, bytes) else str(metric),
            float(tf.train.load_variable(prefix, _VALUE.format("best_value"))),
            int(tf.train.load_variable(prefix, _VALUE.format("global_step"))))


def _is_number(value) -> bool:
    return isinstance(value, (int, float, np.number)) and not isinstance(value, bool)


class TrainingEvaluation(step_hook.StepHook):
    """Scores the dev data every `eval_every_steps`, keeps the best checkpoint, stops
    early (see the module docstring).

    Attributes:
      metric: The resolved `best_metric` (None: evaluate and log only).
      best_value, best_step: The best score so far and its global step (None: none yet).
      evals_since_best: Evaluations in a row without a better score.
    """

    def __init__(self, task, runner, metric: Optional[str]):
        options = task.options
        self.task, self.runner, self.metric = task, runner, metric
        self.every_steps = options.eval_every_steps
        self.patience = options.early_stopping_patience
        self.output_dir = options.output_dir
        self.best_value, self.best_step, self.evals_since_best = None, None, 0
        self._writer = None

    def begin(self, step):
        """Reads the best so far back from `best/`; True when the run stopped early."""
        kept = read_best(self.output_dir) if self.metric else None
        if kept is None:
            return False
        metric, value, best_step = kept
        if metric != self.metric:
            logging.warning("%s holds the best checkpoint of %s; this run keeps the best "
                            "%s: its first evaluation replaces it",
                            training_checkpoints.BEST_DIR, metric, self.metric)
            return False
        self.best_value, self.best_step = value, best_step
        self.evals_since_best = max(0, step // self.every_steps - best_step // self.every_steps)
        logging.info("Best so far: %s = %.6g at global_step %d (%d evaluations since)",
                     metric, value, best_step, self.evals_since_best)
        if self.patience and self.evals_since_best >= self.patience:
            logging.info("Early stopping: this run stopped at global_step %d, %d "
                         "evaluations without a better %s; not training further (a "
                         "higher --early_stopping_patience goes on)", step,
                         self.evals_since_best, metric)
            return True
        return False

    def after_steps(self, step, model):
        """Scores the dev data at `step`; saves a better model; True: stop early."""
        self.runner.model, self.runner.global_step = model, step
        split = self.task.train_eval_split
        scores = dict(self.task.evaluate(split, self.runner), global_step=step)
        self._write_summaries(step, scores)
        text = ", ".join(f"{name} = {value:.6g}" for name, value in sorted(scores.items())
                         if _is_number(value) and name != "global_step")
        if self.metric is None:
            logging.info("Evaluation at global_step %d: %s", step, text)
            return False
        if self.metric not in scores:
            raise ValueError(f"--best_metric={self.metric}: the evaluation at global_step "
                             f"{step} did not compute it (it computed "
                             f"{', '.join(sorted(scores))})")
        value = float(scores[self.metric])
        if self._is_better(value):
            self.best_value, self.best_step, self.evals_since_best = value, step, 0
            self._save(model, step, value, dict(scores, best_metric=self.metric))
            verdict = "a new best, saved to " + training_checkpoints.BEST_DIR + "/"
        else:
            self.evals_since_best += 1
            verdict = (f"not better than {self.best_value:.6g} at global_step "
                       f"{self.best_step} ({self.evals_since_best} evaluations without "
                       "a better one)")
        logging.info("Evaluation at global_step %d: %s; %s %s", step, text, self.metric,
                     verdict)
        if self.patience and self.evals_since_best >= self.patience:
            logging.info("Early stopping at global_step %d: %s has not improved on %.6g "
                         "(global_step %d) in %d evaluations", step, self.metric,
                         self.best_value, self.best_step, self.evals_since_best)
            return True
        return False

    def _is_better(self, value: float) -> bool:
        """Strictly better than the best so far (a NaN never is)."""
        if math.isnan(value):
            return False
        if self.best_value is None:
            return True
        return value < self.best_value if is_minimised(self.metric) else \
            value > self.best_value

    def _save(self, model, step, value, scores):
        """`best/ckpt-<step>` (older ones removed) and its eval_results.txt / .json."""
        strategy = self.runner.context.strategy
        best_dir = os.path.join(self.output_dir, training_checkpoints.BEST_DIR)
        directory = distribute.worker_checkpoint_dir(strategy, best_dir)
        tf.io.gfile.makedirs(directory)
        checkpoint = tf.train.Checkpoint(
            model=lora.checkpointed(model), global_step=tf.Variable(step, dtype=tf.int64),
            best_metric=tf.Variable(self.metric), best_value=tf.Variable(value, dtype=tf.float64))
        manager = tf.train.CheckpointManager(checkpoint, directory, max_to_keep=1,
                                             checkpoint_name="ckpt")
        preemption.save_checkpoint(manager, step, self.output_dir)
        distribute.cleanup_worker_dir(strategy, directory)
        if distribute.is_chief(strategy):
            task_lib.write_results(best_dir, self.task.result_names[self.task.train_eval_split],
                                   scores, log_replaced=False)  # the better one's

    def _write_summaries(self, step, scores):
        """One TensorBoard scalar per numeric score, under output_dir/eval (the chief)."""
        if self._writer is None:
            self._writer = (tf.summary.create_file_writer(os.path.join(self.output_dir, "eval"))
                            if distribute.is_chief(self.runner.context.strategy)
                            else tf.summary.create_noop_writer())
        with self._writer.as_default(step=step):
            for name, value in scores.items():
                if _is_number(value) and name != "global_step":
                    write_scalar_summary(name, float(value))
        self._writer.flush()
