"""A reusable, resumable training loop (pre-training and fine-tuning) and eval helpers.

API (the driver in `bert_tf.runs.driver` calls it with each task's model, loss and
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
    for batch in inference.predict(strategy, model, dataset_fn, passthrough_keys=()): ...
    step = loop.restore_model(model, output_dir_or_checkpoint)

The model is called with the whole feature dict (labels included) and `training=True`.
The run resumes from the latest checkpoint in `output_dir` (model, optimizer slots and
step, and the input iterator's position), so a run killed at any point (SIGKILL too) and
started again with the same arguments ends at `num_train_steps`. Checkpoints are written
every `save_checkpoints_steps` and at the end, through `tf.train.CheckpointManager`
(`output_dir/ckpt-<step>.*`, the newest `keep_checkpoint_max` kept; the `checkpoint`
state file is replaced atomically after the files are complete); a save that fails
removes its partial files (a file too large, a full disk, a read-only folder:
`preemption.CheckpointNotSaved`, naming the file and the cause). While it trains,
SIGINT and SIGTERM save a checkpoint at the step reached (within a progress period)
and raise `preemption.TrainingInterrupted` (`bert_tf.train.preemption`); a non-finite
loss stops the run with `preemption.NonFiniteLoss` and saves nothing. A progress line
(step / total, losses, learning rate, examples/s, useful tokens/s when the loss function
returns `loop_runner.USEFUL_TOKENS` (and `USEFUL_EXAMPLES`: packed rows), time left) comes
every `progress_every_seconds`, whatever `steps_per_loop` is: the loop cuts its loops of
steps into calls that end by the next line (`progress.TrainingProgress`); on TPU and
several workers, whose calls run whole, once per loop. TensorBoard gets the same scalars
at every loop's end and every line.
See `bert_tf.train.steps` for how gradients are reduced, clipped and accumulated.
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
from typing import Callable, Optional

import keras
import tensorflow as tf
from absl import logging

from bert_tf import options as options_lib
from bert_tf.train import distribute
from bert_tf.train import lora
from bert_tf.train import loop_runner
from bert_tf.train import preemption
from bert_tf.train import step_hook as step_hook_lib
from bert_tf.train import steps
from bert_tf.train.choices import MIXED_PRECISION
# Re-exported: docs/pretraining.md ("As a library") calls `loop.evaluate`.
from bert_tf.train.inference import evaluate  # noqa: F401




@dataclasses.dataclass
class LoopSettings:
    """How the loop runs (see the module docstring).

    Attributes:
      output_dir: Checkpoints and TensorBoard "train/" summaries.
      num_train_steps: Optimizer steps in total (resumed runs included).
      global_batch_size: Rows per optimizer step over all replicas.
      save_checkpoints_steps: Checkpoint every this many steps (and at the end).
      keep_checkpoint_max: Newest checkpoints kept.
      steps_per_loop: Steps per loop of steps (one compiled call on TPU and several
        workers; elsewhere cut into calls that end by the next progress line).
      gradient_accumulation_steps: Micro-batches each replica's batch is split into.
      mixed_precision: None, "none", "bfloat16" or "float16" (loss scaling).
      use_xla: XLA-compile the whole step on one replica (else forward + backward).
      checkpoint_input_iterator: Checkpoint the input position (one worker only).
      progress_every_seconds: Seconds between progress lines.
      examples_per_row: Examples a row holds on average (packed rows: more than 1).
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
    progress_every_seconds: float = 30.0
    examples_per_row: float = 1.0

    @classmethod
    def from_options(cls, options, num_train_steps, global_batch_size,
                     examples_per_row=1.0):
        """The settings of a runner's options (`bert_tf.runs.options.TrainingOptions`)."""
        return cls(output_dir=options.output_dir, num_train_steps=num_train_steps,
                   global_batch_size=global_batch_size, examples_per_row=examples_per_row,
                   progress_every_seconds=options.progress_every_seconds,
                   save_checkpoints_steps=options.save_checkpoints_steps,
                   keep_checkpoint_max=options.keep_checkpoint_max,
                   steps_per_loop=options.steps_per_loop,
                   gradient_accumulation_steps=options.gradient_accumulation_steps,
                   mixed_precision=options.mixed_precision, use_xla=options.use_xla)

    def check(self, strategy):
        """Raises ValueError for settings that cannot work, naming the setting (the
        loop's own guard for callers of `train`; a command's options were refused
        earlier, by the same rule, in their groups: `bert_tf.runs.options`)."""
        for name in ("num_train_steps", "save_checkpoints_steps", "keep_checkpoint_max",
                     "steps_per_loop", "gradient_accumulation_steps"):
            options_lib.check_integer(self, name)
        if not 0 < self.progress_every_seconds < float("inf"):
            raise ValueError("progress_every_seconds must be a positive number, got "
                             f"{self.progress_every_seconds!r}")
        if self.mixed_precision not in MIXED_PRECISION:
            raise ValueError(f"mixed_precision must be one of {MIXED_PRECISION[1:]}, "
                             f"got {self.mixed_precision!r}")
        distribute.check_global_batch_size(self.global_batch_size, strategy,
                                           micro_batches=self.gradient_accumulation_steps)


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
    runners (`bert_tf.tasks.base`) and `export_model` both come here. A model with LoRA
    adapters reads its trained parts alone (`lora.checkpointed`): its base must be
    loaded first.

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
        status = tf.train.Checkpoint(model=lora.checkpointed(model),
                                     global_step=step).read(path)
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
        preemption.NonFiniteLoss: when a loss becomes NaN or infinite (nothing saved).
        preemption.TrainingInterrupted: on SIGINT / SIGTERM while training, after
            saving a checkpoint at the step reached (in the main thread only).
        preemption.CheckpointNotSaved: a checkpoint could not be written (EFBIG, no
            space: `DiskFullError`, read-only), naming the file and the cause.
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
    # A LoRA model's checkpoints hold its trained parts alone (`lora.checkpointed`).
    tracked = dict(model=lora.checkpointed(model), optimizer=optimizer,
                   global_step=global_step)
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
    run = loop_runner.LoopRunner(settings, strategy, train_loop, iterator, global_step,
                                 optimizer, manager, hook or step_hook_lib.StepHook(),
                                 model)
    with preemption.StopRequests() as stop:  # SIGINT, SIGTERM: save, then stop
        result = run.loops(stop)
    if stop.requested:
        raise stop.interrupted(result.global_step, result.checkpoint)
    result.model = model
    distribute.cleanup_worker_dir(strategy, checkpoint_dir)
    run.hook.end(model)
    return result
