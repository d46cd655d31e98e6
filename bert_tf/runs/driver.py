"""The one driver: train / eval / predict / export for every task (`bert_tf.runs.task`).

    results = driver.run(ClassificationTask(options))   # what bert-run-classifier runs

Order: the task checks its inputs, the run context is made once (config, vocab,
strategy: `bert_tf.runs.run_context`), the output_dir's run settings are checked, then
`do_train` (resuming from output_dir), `do_eval` and `do_predict` (each scored split
writes `<name>_results.txt` and `.json`), then the export when `export_dir` is set.
With `eval_every_steps` the dev data is also scored while training, and with
`best_metric` the best model is kept in `output_dir/best/`, which evaluation, prediction
and export then use (`bert_tf.runs.best_checkpoint`).
With `seeds` (or `num_seeds`) the run is one run per seed (`bert_tf.runs.seeds`).
With `lora_rank` the model gets LoRA adapters as it is built (`ModelRunner._model_fn`,
after the base's pre-trained weights are loaded: a LoRA run's checkpoints hold its
trained parts alone, `bert_tf.runs.lora_run`), and the export merges them.
"""

import contextlib
import dataclasses
import os
import shutil

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf.io import fileio
from bert_tf import library_logs
from bert_tf.options import option_specs
from bert_tf.serving import export
from bert_tf.runs import best_checkpoint, lora_run, run_config, run_context
from bert_tf.runs import task as task_lib
from bert_tf.runs.run_context import RunContext
from bert_tf.runs.seeds import options as seeds_options
from bert_tf.runs.seeds import runs as seed_runs
from bert_tf.train import (distribute, inference, lora, loop, loop_runner, optimization,
                           preemption, reinit_layers, step_hook)
from bert_tf.weights import training_checkpoints
from bert_tf.weights.load_report import name_list


@dataclasses.dataclass
class Outcome:
    """What a run leaves: the scored splits' results and the runner (model, train result)."""
    results: dict
    runner: "ModelRunner"


def run(task, strategy=None) -> dict:
    """Runs the steps the task's options ask for; returns the scored splits' results."""
    return execute(task, strategy).results


def execute(task, strategy=None) -> Outcome:
    """`run`, returning the runner too (the trained model and its `TrainResult`)."""
    library_logs.show_info_logs()  # called from Python: progress and load reports show
    options = task.options
    if seeds_options.seed_list(options):  # --seeds: one run of this task per seed
        return seed_runs.run_seeds(task, execute, strategy)
    steps = [spec.name for spec in option_specs(type(options))
             if spec.name in ("do_train", "do_eval", "do_predict")]
    if not any(getattr(options, name) for name in steps):
        raise ValueError("at least one of " + ", ".join(f"--{name}" for name in steps[:-1])
                         + f" or --{steps[-1]} must be set")
    if getattr(options, "export_dir", None):  # refused before training, not after it
        export.resolve_export_dir(
            options.export_dir, hint=f"use a new --export_dir, or remove that one "
            f"(bert-export-model --init_checkpoint={options.output_dir} --overwrite or "
            "--versioned exports a finished run again)")
    with undone_on_refusal(options.output_dir):
        run_context.check_run_inputs(options, task.output_patterns)
        task.check_inputs()
        context = RunContext.create(options, strategy, needs_vocab=task.needs_vocab)
        check_model_source(task, context)
        # One run per output_dir: the chief holds its lock (workers share the folder).
        with (fileio.locked_folder(options.output_dir)
              if distribute.is_chief(context.strategy) else contextlib.nullcontext()):
            return _execute_steps(task, context)


def _checkpoint_state(folder):
    """(mtime, size) of `folder`'s checkpoint state file, None without one."""
    try:
        stat = os.stat(os.path.join(folder, "checkpoint"))
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


@contextlib.contextmanager
def undone_on_refusal(folder):
    """Leaves `folder` as it was when the block fails before a training checkpoint is
    saved: a refused run (bad input found after the run settings or features were
    written) removes what it added there, and the folder when it made it. A run that
    saved a checkpoint, or whose loss diverged while training (its summaries tell how),
    keeps its files. Remote folders (`gs://`) are left alone."""
    if not folder or "://" in folder:
        yield
        return
    existed = os.path.isdir(folder)
    before = set(os.listdir(folder)) if existed else set()
    state = _checkpoint_state(folder)
    try:
        yield
    except Exception as error:
        if (not isinstance(error, preemption.NonFiniteLoss)
                and _checkpoint_state(folder) == state and os.path.isdir(folder)):
            for name in set(os.listdir(folder)) - before:
                path = os.path.join(folder, name)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        os.remove(path)
            if not existed:
                with contextlib.suppress(OSError):
                    os.rmdir(folder)
        raise


def _execute_steps(task, context) -> Outcome:
    """Setup, then training, the scored splits and the export the options ask for."""
    options = context.options
    if options.seed is not None:  # data order; the model is seeded again as it is built
        keras.utils.set_random_seed(options.seed)
    task.setup(context)
    runner = ModelRunner(context, task)
    hook = best_checkpoint.training_evaluation(task, runner)  # refuses bad flags first
    if task.records_run_settings:
        context.check_run_settings(task.model_type, task.name, task.labels)
    if options.do_train:  # continues output_dir's run only with its settings
        run_config.check_continuation(options.output_dir, run_config.describe(task, context),
                                      context.latest_checkpoint())
    if options.do_train or not os.path.exists(os.path.join(options.output_dir,
                                                           run_config.CONFIG_FILE)):
        if distribute.is_chief(context.strategy):  # an eval-only run keeps the trained one
            run_config.write(options.output_dir, run_config.describe(task, context))
    if options.do_train and distribute.is_chief(context.strategy):
        context.write_model_files()
    if options.do_train:
        runner.train(hook)
    results, written = {}, []
    for split in ("eval", "predict"):
        if getattr(options, f"do_{split}", False):
            runner.phase = "Evaluating" if split == "eval" else "Predicting"
            scores = task.evaluate(split, runner)
            if scores:
                scores = dict(scores, global_step=runner.global_step)
                if distribute.is_chief(context.strategy):
                    written.append(task_lib.write_results(
                        options.output_dir, task.result_names[split], scores))
            results.update(scores)
    export_dir = getattr(options, "export_dir", None)
    if export_dir and runner.model is not None:
        logging.info("Exporting the model of global_step %d%s", runner.global_step,
                     f" (the best checkpoint, {runner.best})" if runner.best else "")
        lora.merge_adapters(runner.model)  # an ordinary model in every format
        written.append(export.export_finetuned_model(
            runner.model, context.preprocessor(task.text_pair), export_dir,
            task.model_type, **task.export_options()))
    logging.info("Done: %s at global_step %d in %s%s", task.name, runner.global_step,
                 options.output_dir, "; wrote " + ", ".join(written) if written else "")
    return Outcome(results, runner)


def check_model_source(task, context) -> None:
    """Refuses, before any work, a run without a model to start from: fine-tuning a
    random encoder (no init_checkpoint and nothing to resume, unless
    `allow_random_encoder`), or evaluating / predicting without training and with
    neither a checkpoint in output_dir nor an init_checkpoint; and --reinit_top_layers
    above the config's layer count."""
    options = context.options
    if (not options.do_train and not options.init_checkpoint
            and context.latest_checkpoint() is None):
        raise ValueError(f"no training checkpoint in output_dir {options.output_dir} and "
                         "no init_checkpoint: nothing to evaluate or predict with; train "
                         "first (do_train), or pass init_checkpoint (a fine-tuned run's "
                         "output_dir)")
    if (options.do_train and task.needs_pretrained_encoder and not options.init_checkpoint
            and not options.allow_random_encoder and context.latest_checkpoint() is None):
        raise ValueError(
            f"no --init_checkpoint: {task.name} would fine-tune a random encoder (results "
            "near chance). Pass --init_checkpoint=<a released BERT folder, a Hugging Face "
            "folder or a pre-training output_dir>, or --allow_random_encoder to train "
            "from random weights on purpose")
    if options.do_train and getattr(options, "reinit_top_layers", 0):
        reinit_layers.check_reinit_top_layers(
            options.reinit_top_layers, context.config.num_hidden_layers,
            context.config_file or "the model's config")
    check_lora(options, context)


def check_lora(options, context) -> None:
    """Refuses LoRA settings that cannot work before any work: a --lora_rank above a
    target projection's width, or without an init_checkpoint (the base its run folder
    names); a checkpoint to restore from output_dir that was trained with other LoRA
    settings, or whose base checkpoint is not there with its recorded digest
    (`lora_run.check_base`: a run without --init_checkpoint then reads that base); a
    LoRA run as the init_checkpoint of a new model (its adapters would not load:
    export it, merged, first)."""
    settings = lora.settings_from_options(options)
    if settings is not None:
        lora.check_rank(settings, context.config, context.config_file or "the model's config")
    latest = context.latest_checkpoint()
    saved = run_config.read(options.output_dir) if latest is not None else {}
    if latest is not None and not options.do_train:  # training: check_continuation
        if saved.get("options") is not None:
            trained = lora.settings_from_options(saved["options"])
            if trained != settings:
                raise ValueError(
                    f"output_dir {options.output_dir} was trained with "
                    + (f"--lora_rank={trained.rank} (LoRA settings {trained})"
                       if trained else "--lora_rank=0 (no LoRA)")
                    + f"; this run has {settings or 'no LoRA'}: pass the run's "
                    "--lora_rank, --lora_alpha, --lora_dropout, --lora_targets and "
                    f"--lora_train (its {saved['path']} lists them)")
    if settings is not None and latest is not None:
        given = options.init_checkpoint  # the run's own folder: its base is meant
        if given and run_config.run_folder(given) == run_config.run_folder(
                options.output_dir):
            given = None
        options.init_checkpoint = lora_run.check_base(options.output_dir, saved, given)
    elif settings is not None and not options.init_checkpoint:
        raise ValueError(
            f"--lora_rank={settings.rank} needs --init_checkpoint: the base model whose "
            "frozen weights the adapters train beside (a LoRA run folder holds the "
            "adapters and the head alone, and names its base)")
    if latest is None and options.init_checkpoint:
        init = run_config.read(options.init_checkpoint)
        if lora.settings_from_options(init.get("options") or {}) is not None:
            raise ValueError(
                f"--init_checkpoint={options.init_checkpoint} is a LoRA run: its adapters "
                "are not part of the weights a new run loads. Export it merged first "
                "(bert-export-model --export_format=huggingface), and start from that folder")


def with_useful_tokens(loss_fn):
    """`loss_fn` that also returns the real tokens of its batch (`loop_runner.USEFUL_TOKENS`,
    the sum of its input_mask) and its examples (`loop_runner.USEFUL_EXAMPLES`, each row's
    highest sequence id), so that a packed run reports useful tokens/s and examples/s."""
    def loss(features, outputs):
        losses = loss_fn(features, outputs)
        losses = dict(losses) if isinstance(losses, dict) else {"total_loss": losses}
        if "input_mask" in features:
            losses[loop_runner.USEFUL_TOKENS] = tf.reduce_sum(
                tf.cast(features["input_mask"], tf.float32))
        if "sequence_ids" in features:
            losses[loop_runner.USEFUL_EXAMPLES] = tf.reduce_sum(tf.cast(
                tf.reduce_max(features["sequence_ids"], axis=-1), tf.float32))
        return losses
    return loss


class ModelRunner:
    """The model of one run: the one just trained, or restored on first use."""

    def __init__(self, context, task):
        self.context, self.task = context, task
        self.model, self.global_step, self.train_result = None, 0, None
        self.best = None  # the best checkpoint (output_dir/best/) the model was read from
        self.phase = "Evaluating"  # how progress lines of its predictions start

    def _model_fn(self, start=False, reports=None):
        """Builds the task's model; with `start`, also initializes it from
        init_checkpoint (evaluation without training; a training run starts in the loop,
        once its optimizer exists; a LoRA run's start is here, before the adapters are
        added, since the loaders know the plain model only; its base is loaded before
        every restore too, its checkpoints holding the trained parts alone). With
        --lora_rank the adapters are then added and the encoder frozen, before the
        optimizer or a checkpoint sees the model."""
        settings = lora.settings_from_options(self.context.options)

        def model_fn():
            model = self.task.create_model()
            model.build()
            if start:
                report = self.task.initialize(model)
                if reports is not None and report is not None:
                    reports.append(report)
            if settings is not None:
                lora.apply_lora(model, settings)
            return model
        return model_fn

    def train(self, hook=None):
        """Trains to the task's schedule, resuming from output_dir's latest checkpoint;
        `hook` (`best_checkpoint.TrainingEvaluation`) evaluates while training. The model
        is then the best checkpoint when output_dir keeps one."""
        options, task = self.context.options, self.task
        data = task.train_data()
        num_steps, num_warmup = task.schedule(data.num_examples)
        logging.info("Training: %s%d steps (%d warm-up) of %d rows",
                     f"{data.num_examples} examples, " if data.num_examples else "",
                     num_steps, num_warmup, data.rows_per_batch)
        loss_fn = (with_useful_tokens(task.loss) if getattr(options, "pack_sequences", False)
                   else task.loss)
        try:
            result = loop.train(
                self.context.strategy,
                self._model_fn(start=self._lora is not None),
                loss_fn, data.dataset_fn,
                optimizer_fn=lambda: optimization.create_optimizer(
                    options.learning_rate, num_steps, num_warmup,
                    optimizer_type=options.optimizer,
                    weight_decay_rate=options.weight_decay_rate,
                    lr_schedule=options.lr_schedule,
                    adam_bias_correction=options.adam_bias_correction,
                    layerwise_lr_decay=getattr(options, "layerwise_lr_decay", 1.0)),
                settings=loop.LoopSettings.from_options(
                    options, num_steps, data.rows_per_batch, data.examples_per_row),
                initialize=self._initialize,
                hook=step_hook.StepHooks([hook] + task.hooks()))
        except (tf.errors.InvalidArgumentError, tf.errors.DataLossError) as error:
            task.explain_bad_input(error)
            raise
        self.model, self.global_step, self.train_result = (result.model, result.global_step,
                                                           result)
        self.best = training_checkpoints.best_checkpoint(options.output_dir)
        if self.best:
            self.global_step = loop.restore_model(self.model, self.best)
            logging.info("Evaluation, prediction and export use the best checkpoint %s "
                         "(global_step %d; training reached %d)", self.best,
                         self.global_step, result.global_step)
        return result

    @property
    def _lora(self):
        return lora.settings_from_options(self.context.options)

    def _initialize(self, model, optimizer):
        """A fresh training run's start: the task's (init_checkpoint), then the pooler
        and top layers afresh with --reinit_top_layers. A LoRA run started in
        `_model_fn`, before its adapters were added."""
        if self._lora is not None:
            return None
        report = self.task.initialize(model, optimizer)
        options = self.context.options
        reinit_layers.reinitialize_top_layers(
            model, getattr(options, "reinit_top_layers", 0), options.seed)
        return report

    def ensure_model(self, dataset_fn):
        """The trained model, else the latest checkpoint of output_dir, else init_checkpoint.

        Raises:
          ValueError: when there is no training checkpoint and init_checkpoint is missing
            or has no weights for the task head (predictions would come from a random head).
        """
        if self.model is not None:
            return self.model
        options = self.context.options
        self.best = training_checkpoints.best_checkpoint(options.output_dir)
        latest = self.best or self.context.latest_checkpoint()
        if latest is None and not options.init_checkpoint:
            raise ValueError(f"no training checkpoint in output_dir {options.output_dir} "
                             "and no init_checkpoint: train first (do_train) or pass "
                             "init_checkpoint")
        reports = []
        element_spec = dataset_fn(tf.distribute.InputContext()).element_spec
        with loop.dtype_policy(options.mixed_precision):
            model = loop.build_model(
                self.context.strategy,
                self._model_fn(latest is None or self._lora is not None, reports),
                element_spec)
        # Names outside "bert/" are the task head's (an unused pooler may be missing).
        fresh = [name for report in reports for name in report.newly_initialized
                 if not name.startswith("bert/")] if latest is None else []
        if fresh:
            raise ValueError(
                f"no training checkpoint in output_dir {options.output_dir}, and "
                f"init_checkpoint {options.init_checkpoint} has no weights for "
                f"{name_list(fresh)}: the task head would be random. Train first "
                "(do_train), or set output_dir to a fine-tuned run")
        self.global_step = loop.restore_model(model, latest) if latest else 0
        logging.info("Model: %s (global_step%s %d)", latest or options.init_checkpoint,
                     " of the best checkpoint, kept by --best_metric" if self.best else "",
                     self.global_step)
        self.model = model
        return model

    def batches(self, dataset_fn, passthrough_keys=(), num_examples=None,
                unit="examples"):
        """Yields numpy dicts of the outputs (+ passthrough features) per batch; progress
        (of `num_examples` when given, counted as `unit`) is logged every 30 seconds."""
        model = self.ensure_model(dataset_fn)
        yield from inference.predict(self.context.strategy, model, dataset_fn,
                                     passthrough_keys, num_examples, name=self.phase,
                                     unit=unit)

    def predict(self, dataset_fn, output_key="logits", keys=(), num_examples=None,
                unit="examples"):
        """Concatenated float32 numpy outputs (and passthrough features) over a dataset."""
        outputs = {name: [] for name in (output_key,) + tuple(keys)}
        for batch in self.batches(dataset_fn, keys, num_examples, unit):
            for name in outputs:
                outputs[name].append(batch[name])
        return {name: np.concatenate(values) if values else np.zeros((0,))
                for name, values in outputs.items()}
