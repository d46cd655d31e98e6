"""Stopping and resuming a training run: SIGINT / SIGTERM, full disks, the restore.

`bert_tf.train.loop.train` runs its loops inside `StopRequests()`: while it trains, a
SIGINT (Ctrl-C) or SIGTERM (what a preempted VM or Kubernetes sends) only records the
request. At the end of the current call of steps (at most a progress period away) the
loop saves a checkpoint at the step reached and raises `TrainingInterrupted`, whose
message says where; a rerun of the same command resumes from that checkpoint. A loss
that becomes NaN or infinite raises `NonFiniteLoss` instead, saving nothing. The
previous handlers are restored when training ends.

    with preemption.StopRequests() as stop:
        ...                      # after each loop of steps:
        if stop.requested:
            path = preemption.save_checkpoint(manager, step, output_dir)
            raise stop.interrupted(step, path)

`save_checkpoint` saves through a `tf.train.CheckpointManager`; when the save fails it
removes the partial files of that save (`ckpt-<step>_temp/`, `ckpt-<step>.*`), so that a
full disk is not kept full by them, and a write error (a file too large for the file
system, a full disk, a read-only folder) becomes a `CheckpointNotSaved` naming the
output_dir, the file and the cause (`bert_tf.io.write_errors`). `restore_latest` resumes
a run from its latest checkpoint.
"""

import contextlib
import math
import os
import signal

import tensorflow as tf
from absl import logging

from bert_tf.io import write_errors
from bert_tf.process import signals as process_signals

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped on a signal after saving a checkpoint at the step reached.

    A KeyboardInterrupt, so that `except Exception` on the way up does not swallow it.

    Attributes:
      signal_name: "SIGINT" or "SIGTERM".
      signal_number: The signal's number (2, 15).
      step: The global step trained and saved (the optimizer's iterations).
      checkpoint_path: The checkpoint saved at `step` (its prefix, `.../ckpt-<step>`).
      exit_code: 128 + `signal_number` (130, 143), the status a shell expects of a
        process that ended on that signal.
    """

    def __init__(self, signal_number, step, checkpoint_path):
        self.signal_number = int(signal_number)
        self.signal_name = signal.Signals(signal_number).name
        self.step = int(step)
        self.checkpoint_path = checkpoint_path
        self.exit_code = 128 + self.signal_number
        super().__init__(
            f"interrupted by {self.signal_name} at step {self.step}; saved "
            f"{checkpoint_path}; rerun the same command to resume")

    def __str__(self):
        return self.args[0]

    def __reduce__(self):
        return type(self), (self.signal_number, self.step, self.checkpoint_path)


class CheckpointNotSaved(write_errors.WriteFailed):
    """A checkpoint could not be saved: a file too large for the file system (EFBIG), no
    space or quota left, or a folder that cannot be written (`write_errors.classify`).
    The partial files of that save are removed; the latest complete checkpoint stays.

    Attributes:
      output_dir: Where the checkpoint was being saved.
      step: The step of the checkpoint that failed.
      errno / cause: The cause (`write_errors.WriteFailed`); `filename` the file named.
    """

    def __init__(self, code, output_dir, step, filename, latest=None):
        self.output_dir, self.step, self._latest = output_dir, step, latest
        cause, advice = write_errors.cause_of(code)
        if code in write_errors.DISK_FULL:
            advice += " (or lower --keep_checkpoint_max)"
        message = (f"cannot save the checkpoint of step {step} in output_dir "
                   f"{output_dir}: {cause} (writing {filename}); its partial files were "
                   f"removed; {advice}, and rerun the same command to resume from "
                   + (latest if latest else "the start"))
        super().__init__(code, filename, message)

    def __reduce__(self):
        return type(self), (self.errno, self.output_dir, self.step, self.filename,
                            self._latest)


class DiskFullError(CheckpointNotSaved):
    """`CheckpointNotSaved` for lack of space or quota (ENOSPC, EDQUOT)."""


class NonFiniteLoss(ValueError):
    """A training loss became NaN or infinite: the run stops without saving its weights
    (as Keras' TerminateOnNaN and tf-models' trainers do).

    Attributes:
      step: The global step reached.
      losses: {name: value} of the call that ended there.
    """

    def __init__(self, losses, step, num_steps, latest_checkpoint):
        self.step, self.losses = int(step), dict(losses)
        bad = ", ".join(f"{name} = {value}" for name, value in sorted(losses.items())
                        if not math.isfinite(value))
        first = int(step) - int(num_steps) + 1
        steps = f"step {step}" if num_steps == 1 else f"steps {first}-{step}"
        super().__init__(
            f"training stopped: {bad} at {steps}; these weights are not saved (the latest "
            f"checkpoint is {latest_checkpoint or 'none: no step was saved'}). A learning "
            "rate too high, a config value (initializer_range) or data values out of range "
            "make a loss diverge: lower learning_rate or check the config and data, then "
            "rerun")


def check_finite_losses(losses, step, num_steps, latest_checkpoint=None):
    """Raises `NonFiniteLoss` when a value of `losses` (the means of the `num_steps`
    steps up to global step `step`) is NaN or infinite."""
    if not all(math.isfinite(value) for value in losses.values()):
        raise NonFiniteLoss(losses, step, num_steps, latest_checkpoint)


class StopRequests:
    """A context in which SIGINT and SIGTERM request a stop instead of ending the process.

    Handlers are installed in the main thread only (elsewhere Python cannot install
    them, and the signals keep their behaviour). A second signal while stopping (during
    the final save, say) is logged and otherwise ignored, so it cannot cut a checkpoint
    short. On exit the previous handlers are restored.

    Attributes:
      signal_number: The first signal received, or None.
    """

    def __init__(self, signals=STOP_SIGNALS):
        self.signals = tuple(signals)
        self.signal_number = None
        self._handlers = contextlib.ExitStack()

    @property
    def requested(self):
        """Whether a stop was requested."""
        return self.signal_number is not None

    def interrupted(self, step, checkpoint_path):
        """The `TrainingInterrupted` to raise (its message says where training stopped;
        the command line prints it once)."""
        return TrainingInterrupted(self.signal_number, step, checkpoint_path)

    def _handle(self, signal_number, _frame):
        name = signal.Signals(signal_number).name
        if self.signal_number is None:
            self.signal_number = signal_number
            logging.warning("%s received: saving a checkpoint at the step reached (within "
                            "a progress period), then stopping", name)
        else:
            logging.warning("%s received: already stopping (saving a checkpoint at the "
                            "step reached)", name)

    def __enter__(self):
        self._handlers = contextlib.ExitStack()
        self._handlers.enter_context(process_signals.handled(self._handle, self.signals))
        return self

    def __exit__(self, *exc_info):
        self._handlers.close()
        return False


def restore_latest(tracked, latest):
    """Restores the objects of a training run (`tracked`) from its checkpoint `latest`.

    Args:
      tracked: {name: trackable} as saved: model, optimizer, global_step and, when the
        input position is checkpointed, iterator.
      latest: The checkpoint (prefix) to resume from.

    Returns:
      False when the input position could not be restored (the pipeline changed since
      the checkpoint): the caller must then start a fresh iterator.
    Raises:
      ValueError: when the checkpoint is of another model or task.
    """
    status = None
    try:
        status = tf.train.Checkpoint(**tracked).restore(latest)
        status.assert_existing_objects_matched()
    except (AssertionError, ValueError) as error:
        if status is not None:
            status.expect_partial()  # no warning per unmatched value when it dies
        raise ValueError(
            f"checkpoint {latest} does not fit this model ({str(error)[:200]}): the "
            "output_dir holds a run of another model or task; use a new output_dir, "
            "or remove it to start over") from None
    except tf.errors.FailedPreconditionError as error:  # the input pipeline changed
        if status is not None:
            status.expect_partial()
        logging.warning("Cannot restore the input position from %s (%s); resuming "
                        "with a fresh pass over the input.", latest,
                        error.message.split("Make sure")[0].strip())
        others = {k: v for k, v in tracked.items() if k != "iterator"}
        tf.train.Checkpoint(**others).restore(latest).expect_partial()
        return False
    logging.info("Resumed from %s", latest)
    return True


def is_disk_full(error):
    """Whether `error` (raised by a file write) means no space or quota is left."""
    return write_errors.error_code(error) in write_errors.DISK_FULL


def _one_line(error, limit=200):
    text = (getattr(error, "message", None) or str(error) or type(error).__name__)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + " ..."


def _entries(directory):
    """The names in `directory`; none when the save is to make it (a worker's temporary
    folder of a multi-worker run)."""
    if not tf.io.gfile.isdir(directory):
        return set()
    return {entry.rstrip("/") for entry in tf.io.gfile.listdir(directory)}


def _remove_partial_save(directory, before, name):
    """Removes what a failed save of checkpoint `name` left in `directory`.

    Only entries that were not there before the save: `<name>_temp/` (the sharded
    write's temporary folder), `<name>.index` / `<name>.data-*` (an unfinished merge,
    or `.part` shards on S3) and `checkpoint.tmp*` (the state file's temporary).
    """
    removed = []
    for entry in sorted(_entries(directory) - before):
        if not entry.startswith((f"{name}_temp", f"{name}.", "checkpoint.tmp")):
            continue
        path = os.path.join(directory, entry)
        try:
            if tf.io.gfile.isdir(path):
                tf.io.gfile.rmtree(path)
            else:
                tf.io.gfile.remove(path)
            removed.append(entry)
        except (tf.errors.OpError, OSError) as error:  # keep the save's own error
            logging.warning("Could not remove %s after a failed save: %s", path,
                            _one_line(error))
    return removed


def save_checkpoint(manager, step, output_dir=None):
    """`manager.save(checkpoint_number=step)`, cleaning up after a failed save.

    Args:
      manager: A `tf.train.CheckpointManager` whose checkpoint_name is "ckpt".
      step: The global step; the checkpoint is `<manager.directory>/ckpt-<step>`.
      output_dir: The folder named in errors (the manager's directory by default).

    Returns:
      The saved checkpoint's path.
    Raises:
      CheckpointNotSaved: a write error (`write_errors.classify`: EFBIG, no space or
        quota, read-only; `DiskFullError` for space), naming the file and the cause;
        the partial files of this save are removed first and the latest complete
        checkpoint kept. Other errors are re-raised after the same clean-up.
    """
    directory = manager.directory
    before = _entries(directory)
    try:
        path = manager.save(checkpoint_number=step)
    except (tf.errors.OpError, OSError) as error:
        removed = _remove_partial_save(directory, before, f"ckpt-{step}")
        if removed:
            logging.warning("Removed the partial files of the failed save in %s: %s",
                            directory, ", ".join(removed))
        failed = write_errors.classify(error, directory)
        if failed is None:
            raise
        kind = DiskFullError if failed.errno in write_errors.DISK_FULL else CheckpointNotSaved
        raise kind(failed.errno, output_dir or directory, step, failed.filename,
                   manager.latest_checkpoint) from error
    logging.info("Saved checkpoint %s", path)
    return path
