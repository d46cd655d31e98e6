"""The loops of steps of one `bert_tf.train.loop.train` call: compiled calls cut to the
progress period (`progress.TrainingProgress`), checkpoints, the step hook, signals, a
non-finite loss, and the scalars each loop writes to TensorBoard.

    runner = LoopRunner(settings, strategy, train_loop, iterator, global_step,
                        optimizer, manager, hook, model)
    with preemption.StopRequests() as stop:
        result = runner.loops(stop)             # a TrainResult (model left None)
"""

import dataclasses
import os
import time

import keras
import tensorflow as tf
from absl import logging
from tensorflow.core.framework import summary_pb2

from bert_tf.train import distribute
from bert_tf.train import optimization
from bert_tf.train import preemption
from bert_tf.train import progress

# A loss function may return these keys beside its losses: the real (not padding)
# tokens and the examples of its batch (packed rows hold several). The loop reports
# useful tokens/s and examples/s from them and logs them as no loss.
USEFUL_TOKENS = "useful_tokens"
USEFUL_EXAMPLES = "useful_examples"


@dataclasses.dataclass
class TrainResult:
    """What `train` returns: the model, its step, last losses and per-loop history."""
    model: keras.Model
    global_step: int
    losses: dict
    history: list
    steps_this_run: int
    seconds: float
    checkpoint: str
    stopped_early: bool = False  # the hook stopped the run before num_train_steps


def summary_writer(strategy, output_dir):
    """The writer of the "train/" TensorBoard summaries (the chief's; a no-op elsewhere)."""
    if distribute.is_chief(strategy):
        return tf.summary.create_file_writer(os.path.join(output_dir, "train"))
    return tf.summary.create_noop_writer()


# TensorBoard's scalar-plugin metadata, so that scalars are written without the
# `tensorboard` package (tf.summary.scalar needs it installed; viewing does anyway).
_SCALAR_METADATA = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"),
    data_class=summary_pb2.DATA_CLASS_SCALAR)


def write_scalar_summary(name, value, step=None):
    """Writes one float32 scalar to the default summary writer (TensorBoard format)."""
    tf.summary.write(name, tf.constant(value, tf.float32), step=step,
                     metadata=_SCALAR_METADATA)


_TEXT_METADATA = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="text"),
    data_class=summary_pb2.DATA_CLASS_TENSOR)


def write_text_summary(name, text, step=None):
    """Writes one string (TensorBoard's text tab; markdown) to the default writer."""
    tf.summary.write(name, tf.constant(text), step=step, metadata=_TEXT_METADATA)


def write_scalars(writer, step, scalars):
    """Writes {name: float} at `step` with `writer`."""
    with writer.as_default(step=step):
        for name, value in scalars.items():
            write_scalar_summary(name, value)


def calls_run_whole(strategy) -> bool:
    """Whether a call of the compiled loop must run its loop of steps whole: on TPU (the
    loop runs on the device) and on several workers (every worker cuts its loops the
    same, and time cannot tell them where)."""
    return distribute.is_tpu(strategy) or distribute.is_multi_worker(strategy)


class LoopRunner:
    """The loops of steps of one `train` call: progress, checkpoints, hook, signals."""

    def __init__(self, settings, strategy, train_loop, iterator, global_step, optimizer,
                 manager, hook, model):
        self.settings, self.train_loop, self.iterator = settings, train_loop, iterator
        self.global_step, self.optimizer, self.manager = global_step, optimizer, manager
        self.hook, self.model = hook, model
        self.summary_writer = summary_writer(strategy, settings.output_dir)
        # The loss function's counts are means over replicas and micro-batches.
        self.count_scale = (strategy.num_replicas_in_sync
                            * settings.gradient_accumulation_steps)
        self.whole_calls = calls_run_whole(strategy)
        if self.whole_calls:
            logging.info("%s runs each loop of steps_per_loop=%d steps whole: progress "
                         "is reported once per loop (a lower steps_per_loop reports more "
                         "often)", type(strategy).__name__, settings.steps_per_loop)

    def loops(self, stop):
        """Runs loops of steps up to `num_train_steps`, saving on the way; returns a
        TrainResult.

        After a loop, the hook is called when due; a stop it asks for, or one requested
        by a signal (`preemption.StopRequests`), saves a checkpoint at the step reached
        and ends the loops early.
        """
        settings, hook = self.settings, self.hook
        num_train_steps = settings.num_train_steps
        every_save = settings.save_checkpoints_steps
        start_step = step = int(self.global_step.numpy())
        shown = progress.TrainingProgress(
            num_train_steps, step, settings.global_batch_size, settings.examples_per_row,
            settings.progress_every_seconds, per_loop=self.whole_calls)
        history, train_seconds, examples, started = [], 0.0, 0.0, time.time()
        stopped_early = hook.begin(step)
        try:
            while step < num_train_steps and not stopped_early:
                next_save = (step // every_save + 1) * every_save
                num_steps = min(settings.steps_per_loop, num_train_steps - step,
                                next_save - step,
                                hook.steps_to_next(step) or settings.steps_per_loop)
                entry, seconds = self._loop(num_steps, shown, stop)
                history.append(entry)
                train_seconds += seconds
                examples += entry["examples_per_second"] * seconds
                step = entry["step"]
                # A signal asks for a quick stop: the hook waits for the resumed run.
                stopped_early = (not stop.requested and hook.is_due(step, num_train_steps)
                                 and hook.after_steps(step, self.model))
                if (step % every_save == 0 or step >= num_train_steps or stop.requested
                        or stopped_early):
                    preemption.save_checkpoint(self.manager, step, settings.output_dir)
                    if stop.requested:  # a signal during that save is honoured here too
                        break
        finally:
            self.summary_writer.flush()
        self._log_end(step, step - start_step, history,
                      examples / max(train_seconds, 1e-9), time.time() - started, stop,
                      stopped_early)
        return TrainResult(model=None, global_step=step,
                           losses=_losses_of(history[-1]) if history else {},
                           history=history, steps_this_run=step - start_step,
                           seconds=train_seconds, checkpoint=self.manager.latest_checkpoint,
                           stopped_early=stopped_early)

    def _loop(self, num_steps, shown, stop):
        """Runs one loop of `num_steps` steps in calls of `shown.next_call` steps (fewer
        when a signal asks to stop); writes its scalars to TensorBoard.

        Returns:
          (its history entry: mean losses, step, learning_rate, sequences_per_second,
          examples_per_second; its seconds in the compiled calls).
        Raises:
          preemption.NonFiniteLoss: when a call's mean loss is NaN or infinite.
        """
        done, seconds, sums = 0, 0.0, {}
        while done < num_steps and not (done and stop.requested):
            count = shown.next_call(num_steps - done)
            tick = time.time()
            losses = {name: float(value) for name, value in self.train_loop(
                self.iterator, tf.constant(count, tf.int32)).items()}
            elapsed = time.time() - tick
            step = int(self.global_step.numpy())
            tokens, examples = self._counts(losses)
            preemption.check_finite_losses(losses, step, count,
                                           self.manager.latest_checkpoint)
            learning_rate = float(optimization.current_learning_rate(self.optimizer))
            line = shown.after_call(step, count, elapsed, losses, learning_rate, tokens,
                                    examples)
            done, seconds = done + count, seconds + elapsed
            if line and done < num_steps:  # the loop's own scalars follow at its end
                write_scalars(self.summary_writer, step, line)
            for name, value in dict(losses, examples=examples).items():
                if value is not None:
                    sums[name] = sums.get(name, 0.0) + value * count
        rate = done * self.settings.global_batch_size / max(seconds, 1e-9)
        examples = sums.pop("examples", None)
        entry = dict({name: total / done for name, total in sums.items()}, step=step,
                     learning_rate=learning_rate, sequences_per_second=rate,
                     examples_per_second=(rate * self.settings.examples_per_row
                                          if examples is None
                                          else examples / max(seconds, 1e-9)))
        write_scalars(self.summary_writer, step,
                       {name: value for name, value in entry.items() if name != "step"})
        return entry, seconds

    def _counts(self, losses):
        """(useful tokens, examples) of one step, popped from a call's `losses` (None:
        the loss function does not count them)."""
        values = [losses.pop(key, None) for key in (USEFUL_TOKENS, USEFUL_EXAMPLES)]
        return [None if value is None else value * self.count_scale for value in values]

    def _log_end(self, step, done, history, rate, seconds, stop, stopped_early):
        """Logs how training ended: steps, seconds, examples/s, last losses, checkpoint."""
        num_train_steps = self.settings.num_train_steps
        checkpoint = self.manager.latest_checkpoint
        if not done:
            logging.info("Training: the checkpoint is at step %d of %d: nothing to train "
                         "(checkpoint %s)", step, num_train_steps, checkpoint)
            return
        logging.info(
            "Training %s: global_step %d of %d planned (%d steps this run) in %.1f s, %.1f "
            "examples/s in the train loop; final %s; checkpoint %s",
            "stopped" if stop.requested else "stopped early" if stopped_early else "done",
            step, num_train_steps, done, seconds, rate,
            ", ".join(f"{name} = {value:.4f}"
                      for name, value in sorted(_losses_of(history[-1]).items())),
            checkpoint)


_NOT_LOSSES = ("step", "learning_rate", "sequences_per_second", "examples_per_second")


def _losses_of(entry):
    return {name: value for name, value in entry.items() if name not in _NOT_LOSSES}
