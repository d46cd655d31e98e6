"""A reusable, resumable training loop (pre-training and fine-tuning) and eval helpers.

API (the driver in `bert_tf.tasks.driver` calls it with each task's model, loss and
data)::

    result = loop.train(
        strategy,                      # from bert_tf.train.distribute.get_strategy
        model_fn,                      # () -> keras.Model; called inside strategy.scope()
        loss_fn,                       # (features, outputs) -> scalar or dict with
                                       #   "total_loss" (+ other scalars to log)
        train_dataset_fn,              # (tf.distribute.InputContext) -> tf.data.Dataset of
                                       #   feature dicts, batched per replica
        optimizer_fn=lambda: optimization.create_optimizer(...),  # in strategy.scope()
        settings=LoopSettings(output_dir=..., num_train_steps=..., global_batch_size=...),
        initialize=None,               # (model, optimizer) -> None: starts a fresh run
                                       #   (no checkpoint in output_dir) from its weights
        hook=None)                     # a step_hook.StepHook: called between loops, may
                                       #   stop the run (evaluation while training), and
                                       #   at the end (a task's end-of-run work)
    result.model, result.global_step, result.losses, result.history, result.stopped_early

    metrics = loop.evaluate(strategy, model, eval_dataset_fn, metrics_fn,
                            num_steps=None)      # {name: weighted mean}
    for batch in loop.predict(strategy, model, dataset_fn, passthrough_keys=()): ...
    step = loop.restore_model(model, output_dir_or_checkpoint)

The model is called with the whole feature dict (labels included) and `training=True`.
The run resumes from the latest checkpoint in `output_dir` (model, optimizer slots and
step, and the input iterator's position), so a run killed at any point (SIGKILL too) and
started again with the same arguments ends at `num_train_steps`. Checkpoints are written
every `save_checkpoints_steps` and at the end, through `tf.train.CheckpointManager`
(`output_dir/ckpt-<step>.*`, the newest `keep_checkpoint_max` kept; the `checkpoint`
state file is replaced atomically after the files are complete); a save that fails
removes its partial files (a full disk: `preemption.DiskFullError`). While it trains,
SIGINT and SIGTERM save a checkpoint at the end of the current loop of steps and raise
`preemption.TrainingInterrupted` (`bert_tf.train.preemption`). Progress is logged
once per loop with sequences/s; TensorBoard gets every loss, the learning rate and
sequences/s. See `bert_tf.train.steps` for how gradients are reduced, clipped and accumulated.
A `hook` (`bert_tf.train.step_hook`) is called between loops, which end at its
`every_steps`; it may stop the run early (a checkpoint is saved at that step).

Notes:
    * Losses are averaged over replicas and micro-batches (each replica's loss is the
      mean over its own examples, as on the original's TPU cores).
    * The optimizer `optimizer_fn` returns is owned by the loop: the loop all-reduces
      the gradients itself and turns off the optimizer's own all-reduce, so do not
      reuse that instance with `model.fit` under a multi-replica strategy.
    * The input position is checkpointed on one worker (one_device, mirrored); TPU and
      multi-worker runs restart their input with a fresh pass when resumed, as does a
      run whose input pipeline changed (other files) since the checkpoint.
"""

import contextlib
import dataclasses
import os
import time
from typing import Callable, Optional

import keras
import tensorflow as tf
from absl import logging
from tensorflow.core.framework import summary_pb2

from bert_tf import options as options_lib
from bert_tf.train import distribute
from bert_tf.train import optimization
from bert_tf.train import preemption
from bert_tf.train import progress
from bert_tf.train import step_hook as step_hook_lib
from bert_tf.train import steps

MIXED_PRECISION = (None, "none", "bfloat16", "float16")


@dataclasses.dataclass
class LoopSettings:
    """How the loop runs (see the module docstring).

    Attributes:
      output_dir: Checkpoints and TensorBoard "train/" summaries.
      num_train_steps: Optimizer steps in total (resumed runs included).
      global_batch_size: Rows per optimizer step over all replicas.
      save_checkpoints_steps: Checkpoint every this many steps (and at the end).
      keep_checkpoint_max: Newest checkpoints kept.
      steps_per_loop: Steps per compiled loop call (progress is logged per call).
      gradient_accumulation_steps: Micro-batches each replica's batch is split into.
      mixed_precision: None, "none", "bfloat16" or "float16" (loss scaling).
      use_xla: XLA-compile the whole step on one replica (else forward + backward).
      checkpoint_input_iterator: Checkpoint the input position (one worker only).
    """
    output_dir: str
    num_train_steps: int
    global_batch_size: int
    save_checkpoints_steps: int = 1000
    keep_checkpoint_max: int = 5
    steps_per_loop: int = 100
    gradient_accumulation_steps: int = 1
    mixed_precision: Optional[str] = None
    use_xla: bool = False
    checkpoint_input_iterator: bool = True

    @classmethod
    def from_options(cls, options, num_train_steps, global_batch_size):
        """The settings of a runner's options (`bert_tf.tasks.options.TrainingOptions`)."""
        return cls(output_dir=options.output_dir, num_train_steps=num_train_steps,
                   global_batch_size=global_batch_size,
                   save_checkpoints_steps=options.save_checkpoints_steps,
                   keep_checkpoint_max=options.keep_checkpoint_max,
                   steps_per_loop=options.steps_per_loop,
                   gradient_accumulation_steps=options.gradient_accumulation_steps,
                   mixed_precision=options.mixed_precision, use_xla=options.use_xla)

    def check(self, strategy):
        """Raises ValueError for settings that cannot work, naming the setting (the
        loop's own guard for callers of `train`; a command's options were refused
        earlier, by the same rule, in their groups: `bert_tf.tasks.options`)."""
        for name in ("num_train_steps", "save_checkpoints_steps", "keep_checkpoint_max",
                     "steps_per_loop", "gradient_accumulation_steps"):
            options_lib.check_integer(self, name)
        if self.mixed_precision not in MIXED_PRECISION:
            raise ValueError(f"mixed_precision must be one of {MIXED_PRECISION[1:]}, "
                             f"got {self.mixed_precision!r}")
        distribute.check_global_batch_size(self.global_batch_size, strategy,
                                           micro_batches=self.gradient_accumulation_steps)


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


@contextlib.contextmanager
def dtype_policy(mixed_precision):
    """Sets Keras' global dtype policy while the model is built, then restores it."""
    if mixed_precision not in MIXED_PRECISION:
        raise ValueError(f"mixed_precision must be one of {MIXED_PRECISION[1:]}, "
                         f"got {mixed_precision!r}")
    previous = keras.config.dtype_policy()
    if mixed_precision in ("bfloat16", "float16"):
        keras.config.set_dtype_policy(f"mixed_{mixed_precision}")
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


def build_model(strategy, model_fn, element_spec):
    """Calls `model_fn` in the strategy scope and creates its variables."""
    with strategy.scope():
        model = model_fn()
        if not model.built:
            model(tf.nest.map_structure(
                lambda spec: tf.zeros([d or 1 for d in spec.shape], spec.dtype),
                element_spec), training=False)
    return model


def restore_model(model, checkpoint):
    """Restores model weights from a training checkpoint (or the latest in a folder).

    The one place a trained task model is read back: evaluation and prediction in the
    runners (`bert_tf.tasks.base`) and `export_model` both come here.

    Returns:
        The checkpoint's global step.
    Raises:
        ValueError: when no checkpoint is found, or it does not fit the model (another
            config or head).
    """
    path = checkpoint
    if tf.io.gfile.isdir(checkpoint):
        path = tf.train.latest_checkpoint(checkpoint)
    if not path:
        raise ValueError(f"no training checkpoint found in {checkpoint}")
    step = tf.Variable(0, dtype=tf.int64)
    status = None
    try:
        status = tf.train.Checkpoint(model=model, global_step=step).read(path)
        status.assert_existing_objects_matched()
    except (AssertionError, ValueError) as error:
        raise ValueError(f"training checkpoint {path} does not fit a {type(model).__name__} "
                         f"of this config and head: {str(error)[:300]}") from None
    finally:
        if status is not None:
            status.expect_partial()  # optimizer slots are not read; no warning for them
    return int(step.numpy())


def _make_train_iterator(strategy, train_dataset_fn, checkpoint_input_iterator):
    """(iterator, per-replica element spec, whether it is a checkpointable host iterator).

    tf.distribute's iterators cannot be checkpointed. On one worker (one device or
    mirrored) the loop therefore reads a plain `tf.data` iterator, which can, and hands
    one batch to each replica; TPU and multi-worker runs use the distributed iterator
    and restart their input from a fresh (reshuffled) pass when resumed.
    """
    single_worker = isinstance(strategy, (tf.distribute.OneDeviceStrategy,
                                          tf.distribute.MirroredStrategy)) or \
        not tf.distribute.has_strategy() and strategy is tf.distribute.get_strategy()
    if checkpoint_input_iterator and single_worker:
        replicas = strategy.num_replicas_in_sync
        dataset = train_dataset_fn(tf.distribute.InputContext(1, 0, replicas))
        return iter(dataset), dataset.element_spec, True
    if checkpoint_input_iterator:
        logging.info("The input position is not checkpointed under %s; a resumed run "
                     "starts a fresh pass over the data.", type(strategy).__name__)
    dataset = strategy.distribute_datasets_from_function(train_dataset_fn)
    # The per-replica element spec (the distributed one wraps it in PerReplicaSpec).
    element_spec = train_dataset_fn(tf.distribute.InputContext(
        1, 0, strategy.num_replicas_in_sync)).element_spec
    return iter(dataset), element_spec, False


def _summary_writer(strategy, output_dir):
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


def _log_progress(step, num_train_steps, losses, learning_rate, rate, summary_writer):
    text = ", ".join(f"{k} = {v:.4f}" for k, v in sorted(losses.items()))
    logging.info("step %d/%d (%.1f%%): %s, learning_rate = %.3g, %.1f sequences/s",
                 step, num_train_steps, 100.0 * step / num_train_steps, text,
                 learning_rate, rate)
    with summary_writer.as_default(step=step):
        for name, value in dict(losses, learning_rate=learning_rate,
                                sequences_per_second=rate).items():
            write_scalar_summary(name, value)


def train(strategy, model_fn, loss_fn, train_dataset_fn, *, optimizer_fn,
          settings: LoopSettings, initialize: Optional[Callable] = None,
          hook: Optional[step_hook_lib.StepHook] = None):
    """Trains (or resumes training) to `settings.num_train_steps`; see the module docstring.

    A fresh run (no checkpoint in `settings.output_dir`) calls `initialize(model,
    optimizer)` once both are built: the task's own start (pre-trained weights, optimizer
    moments). `hook` (`step_hook.StepHook`) is called between loops of steps; when it
    asks to stop, a checkpoint is saved at the step reached and the result says
    `stopped_early`. Its `end(model)` is called after the last step.

    Returns:
        A `TrainResult`.
    Raises:
        ValueError: for settings that cannot work, before any training step.
        preemption.TrainingInterrupted: on SIGINT / SIGTERM while training, after
            saving a checkpoint at the step reached (in the main thread only).
        preemption.DiskFullError: when a checkpoint cannot be saved for lack of space.
    """
    settings.check(strategy)
    output_dir, mixed_precision = settings.output_dir, settings.mixed_precision
    checkpoint_input_iterator = settings.checkpoint_input_iterator
    tf.io.gfile.makedirs(output_dir)
    iterator, element_spec, host_iterator = _make_train_iterator(
        strategy, train_dataset_fn, checkpoint_input_iterator)
    with dtype_policy(mixed_precision):
        model = build_model(strategy, model_fn, element_spec)
    with strategy.scope():
        names = steps.loss_names(model, loss_fn, element_spec)
        optimizer = optimizer_fn()
        if mixed_precision == "float16" and not isinstance(
                optimizer, keras.optimizers.LossScaleOptimizer):
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        optimizer.build(model.trainable_variables)
        global_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step",
                                  aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
    tracked = dict(model=model, optimizer=optimizer, global_step=global_step)
    if host_iterator:
        tracked["iterator"] = iterator
    latest = tf.train.latest_checkpoint(output_dir)  # every worker reads the chief's files
    if latest and not preemption.restore_latest(tracked, latest):  # the input changed
        iterator = tracked["iterator"] = _make_train_iterator(
            strategy, train_dataset_fn, checkpoint_input_iterator)[0]
    elif not latest and initialize is not None:
        initialize(model, optimizer)
    checkpoint_dir = distribute.worker_checkpoint_dir(strategy, output_dir)
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(**tracked), checkpoint_dir, settings.keep_checkpoint_max,
        step_counter=global_step, checkpoint_name="ckpt")
    train_loop = steps.make_train_loop(
        strategy, model, loss_fn, optimizer, global_step, names,
        gradient_accumulation_steps=settings.gradient_accumulation_steps,
        use_xla=settings.use_xla, host_iterator=host_iterator)
    hook = hook or step_hook_lib.StepHook()
    with preemption.StopRequests() as stop:  # SIGINT, SIGTERM: save, then stop
        result = _run_loops(train_loop, iterator, global_step, manager, optimizer,
                            _summary_writer(strategy, output_dir), settings, stop,
                            hook, model)
    if stop.requested:
        raise stop.interrupted(result.global_step, result.checkpoint)
    result.model = model
    distribute.cleanup_worker_dir(strategy, checkpoint_dir)
    hook.end(model)
    return result


def _run_loops(train_loop, iterator, global_step, manager, optimizer, summary_writer,
               settings, stop, hook, model):
    """Runs loop calls up to `num_train_steps`, saving on the way; returns a TrainResult.

    After a loop call, the hook is called when due; a stop it asks for, or one requested
    by a signal (`preemption.StopRequests`), saves a checkpoint at the step reached and
    ends the loops early.
    """
    num_train_steps, global_batch_size = settings.num_train_steps, settings.global_batch_size
    steps_per_loop, save_checkpoints_steps = (settings.steps_per_loop,
                                              settings.save_checkpoints_steps)
    start_step = step = int(global_step.numpy())
    if step >= num_train_steps:
        logging.info("Checkpoint at step %d >= num_train_steps %d: nothing to train.",
                     step, num_train_steps)
    history, losses, train_seconds, started = [], {}, 0.0, time.time()
    stopped_early = hook.begin(step)
    while step < num_train_steps and not stopped_early:
        next_save = (step // save_checkpoints_steps + 1) * save_checkpoints_steps
        num_steps = min(steps_per_loop, num_train_steps - step, next_save - step,
                        hook.steps_to_next(step) or steps_per_loop)
        tick = time.time()
        losses = {k: float(v) for k, v in
                  train_loop(iterator, tf.constant(num_steps, tf.int32)).items()}
        elapsed = time.time() - tick
        # The rate at the step reached (what the schedule gives `step`), not the loop's first.
        learning_rate = float(optimization.current_learning_rate(optimizer))
        train_seconds += elapsed
        step = int(global_step.numpy())
        rate = num_steps * global_batch_size / max(elapsed, 1e-9)
        _log_progress(step, num_train_steps, losses, learning_rate, rate, summary_writer)
        history.append(dict(losses, step=step, learning_rate=learning_rate,
                            sequences_per_second=rate))
        # A signal asks for a quick stop: the hook waits for the resumed run.
        stopped_early = (not stop.requested and hook.is_due(step, num_train_steps)
                         and hook.after_steps(step, model))
        if (step % save_checkpoints_steps == 0 or step >= num_train_steps or stop.requested
                or stopped_early):
            preemption.save_checkpoint(manager, step, settings.output_dir)
            if stop.requested:  # a signal during that save is honoured here too
                break
    summary_writer.flush()
    done = step - start_step
    throughput = done * global_batch_size / train_seconds if train_seconds else 0.0
    logging.info(
        "Training %s: global_step %d of %d planned (%d steps this run) in %.1f s, %.1f "
        "sequences/s in the train loop; final %s; checkpoint %s",
        "stopped" if stop.requested else "stopped early" if stopped_early else "done",
        step, num_train_steps, done, time.time() - started, throughput,
        ", ".join(f"{k} = {v:.4f}" for k, v in sorted(losses.items())),
        manager.latest_checkpoint)
    return TrainResult(model=None, global_step=step, losses=losses, history=history,
                       steps_this_run=done, seconds=train_seconds,
                       checkpoint=manager.latest_checkpoint, stopped_early=stopped_early)


def evaluate(strategy, model, eval_dataset_fn, metrics_fn, num_steps=None):
    """Weighted means of `metrics_fn(features, outputs)` over an eval dataset.

    Args:
        strategy: The strategy `model` was built under.
        model: A built model.
        eval_dataset_fn: (InputContext) -> dataset of feature dicts (finite, or capped by
            `num_steps`).
        metrics_fn: (features, outputs) -> {name: values or (values, weights)}.
        num_steps: Stop after this many batches (None: the whole dataset).

    Returns:
        {name: float} weighted means, plus "eval_steps".
    """
    dataset = strategy.distribute_datasets_from_function(eval_dataset_fn)
    eval_step = steps.make_eval_step(strategy, model, metrics_fn)
    totals, num_batches = {}, 0
    shown = progress.PhaseProgress("Evaluating", num_steps, unit="batches")
    for features in dataset:
        if num_steps is not None and num_batches >= num_steps:
            break
        sums = eval_step(features)
        for name, (value, weight) in sums.items():
            total = totals.setdefault(name, [0.0, 0.0])
            total[0] += float(value)
            total[1] += float(weight)
        num_batches += 1
        shown.update(1)
    shown.finish()
    results = {name: value / weight if weight else 0.0
               for name, (value, weight) in totals.items()}
    results["eval_steps"] = num_batches
    return results


def predict(strategy, model, dataset_fn, passthrough_keys=(), num_examples=None):
    """Yields numpy dicts of model outputs (+ `passthrough_keys` features) per batch,
    logging progress (of `num_examples`, when given) every 30 seconds."""
    dataset = strategy.distribute_datasets_from_function(dataset_fn)
    predict_step = steps.make_predict_step(strategy, model, passthrough_keys)
    shown = progress.PhaseProgress("Predicting", num_examples)
    for features in dataset:
        per_replica = predict_step(features)
        batch = {name: tf.concat(strategy.experimental_local_results(value), axis=0).numpy()
                 for name, value in per_replica.items()}
        shown.update(len(next(iter(batch.values()))))
        yield batch
    shown.finish()
