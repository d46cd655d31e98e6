"""The task shape every runner's task has (as tensorflow/models' `base_task`): how to
build its model, its data per split, its loss, how to score and what to write and
export. `bert_tf.runs.driver.run` runs train / eval / predict / export for any task.

    class MyTask(Task):
        name, command, model_type = "my_task", "my_task", "classifier"
        def build_model(self): ...                      # the whole model (seeded before)
        def loss(self, features, outputs): ...          # scalar or {"total_loss": ...}
        def train_data(self): ...                       # TrainData
        def evaluate(self, split, runner): ...          # metrics dict ({}: no gold)
        def metric_names(self): ...                     # what evaluate returns
"""

import dataclasses
import json
import os
from typing import Callable, Optional

import keras
from absl import logging

from bert_tf.io import fileio
from bert_tf.runs import run_config, run_context
from bert_tf.train import finetune_packing, loop
from bert_tf.weights import checkpoints, training_checkpoints


MAX_STEPS = 2 ** 31 - 1  # the schedules count steps in int32


@dataclasses.dataclass
class TrainData:
    """What a task trains on.

    Attributes:
      dataset_fn: (tf.distribute.InputContext) -> dataset of per-replica batches.
      num_examples: Examples (features, windows) an epoch holds.
      rows_per_batch: Rows of one global batch (packed rows: fewer than examples).
      examples_per_row: Examples a row holds on average (1 unpacked).
    """
    dataset_fn: Callable
    num_examples: int
    rows_per_batch: int
    examples_per_row: float = 1.0


class Task:
    """The base every task extends; the driver calls these methods in this order:
    `check_inputs`, `setup` (with the run context), `create_model` and `initialize`
    whenever a model is needed, `train_data` / `loss` / `hooks` when training,
    `evaluate` per split, `export_options` when exporting.

    Attributes:
      name: The task's name in the run's config.json ("classification/mrpc", "ner", ...).
      command: Its name in the task registry (`bert-train --task=...`).
      model_type: A name of the model-type registry (`bert_tf.serving.registry`):
        what checkpoints and exports know the task's model as.
      result_names: The results file of each scored split (`<name>_results.txt`).
      needs_pretrained_encoder: Training starts from init_checkpoint; without one (and
        without a checkpoint to resume) the run needs allow_random_encoder.
      needs_vocab: The task tokenizes (the run context then requires a vocab).
      text_pair: Its model reads sentence pairs (True), single texts (False) or either
        (None): the run's `Preprocessor` says so to exports.
      model_options: The options of the task whose model the run trains, where they are
        not the run's own (a distillation: the teacher task's, for the student), recorded
        in config.json so that that task's command evaluates and predicts from the folder.
      records_run_settings: Check and record the output_dir's run_settings.json.
      train_eval_split: The split scored while training (`eval_every_steps`): "eval",
        the dev data of do_eval (SQuAD: "predict", its predict_file is the dev set).
    """
    name = "task"
    command = "task"
    model_type = None
    result_names = {"eval": "eval", "predict": "test"}
    train_eval_split = "eval"
    needs_pretrained_encoder = True
    needs_vocab = True
    text_pair = None
    model_options = None
    # What the run writes into output_dir (`run_context.check_run_inputs`).
    output_patterns = run_context.RUN_OUTPUT_PATTERNS + ("*.tf_record", "*predictions.*")
    records_run_settings = True  # run_settings.json guards the output_dir

    def __init__(self, options):
        self.options = options
        self.context = None

    @property
    def labels(self) -> Optional[list]:
        """Class or tag names in id order (None: regression, spans, pre-training)."""
        return None

    def check_inputs(self) -> None:
        """Refuses missing files and settings that cannot work, before the context."""

    def setup(self, context) -> None:
        """Receives the run context (config, vocab, tokenizer, strategy)."""
        self.context = context

    def schedule(self, num_examples: int):
        """(num_train_steps, num_warmup_steps): `num_train_epochs` passes over the
        examples, as Hugging Face transformers counts an epoch."""
        options = self.options
        steps = max(1, int(num_examples / options.train_batch_size * options.num_train_epochs))
        if steps > MAX_STEPS:
            raise ValueError(f"num_train_epochs={options.num_train_epochs} over "
                             f"{num_examples} examples is {steps} steps, more than a step "
                             f"counter holds ({MAX_STEPS})")
        return steps, int(steps * options.warmup_proportion)

    def create_model(self):
        """The task's whole model, built right after seeding with `options.seed`, so that
        one seed gives the same encoder weights whatever the task (not overridden)."""
        if self.options.seed is not None:
            keras.utils.set_random_seed(self.options.seed)
        return self.build_model()

    def build_model(self):
        """The task's whole model (encoder and head) on `self.context.config`."""
        raise NotImplementedError

    def initialize(self, model, optimizer=None):
        """Starts a fresh `model` from `init_checkpoint`: whole (head too) when it is a
        checkpoint of a run of this very model (`run_config.same_model`), else its
        pre-trained encoder. Pre-training overrides this (strict, optimizer moments).

        Returns:
          The `LoadReport` of a pre-trained encoder (None when restored whole or when
          there is no init_checkpoint).
        """
        del optimizer  # fine-tuning starts a new optimizer
        options = self.options
        if not options.init_checkpoint:
            return None
        saved = run_config.read(options.init_checkpoint)
        prefix = training_checkpoints.training_checkpoint(options.init_checkpoint)
        if prefix and run_config.same_model(saved, self.model_type, self.name, self.labels):
            step = loop.restore_model(model, prefix)
            logging.info("Started from %s (global_step %d), a run of this task: its %s "
                         "head too", prefix, step, self.model_type)
            return None
        # The loader logs its report (loaded / newly initialised / unmatched).
        return checkpoints.load_pretrained_weights(
            model, options.init_checkpoint,
            allow_random_encoder=options.allow_random_encoder)

    def hooks(self) -> list:
        """`StepHook`s of the training loop that the task adds (end-of-run work)."""
        return []

    def loss(self, features, outputs):
        """Scalar loss, or a dict with "total_loss" and other scalars to log."""
        raise NotImplementedError

    def train_data(self) -> TrainData:
        raise NotImplementedError

    def evaluate(self, split: str, runner) -> dict:
        """Predicts `split` ("eval" or "predict"), writes its prediction files and returns
        its metrics ({} when the data has no gold labels)."""
        raise NotImplementedError

    def metric_names(self) -> list:
        """The metrics `evaluate(train_eval_split, ...)` returns, by their names in
        eval_results.txt (known after `setup`; [] when that data has no gold labels):
        what `best_metric` may name."""
        return []

    def baseline_scores(self) -> dict:
        """The scores of the best constant prediction on the `train_eval_split` data, by
        their names in eval_results.txt (known after `setup`; {}: none): a run of
        several seeds counts a seed at or below them as failed."""
        return {}

    def explain_bad_input(self, error) -> None:
        """Called when training fails on its input; may log or raise a clearer error."""

    def export_options(self) -> dict:
        """Keyword arguments of `serving.export.export_finetuned_model` for this task."""
        return {}


def with_mixin(task_class, mixin) -> type:
    """`task_class` extended by `mixin` (placed first, so its methods call the task's
    through super()), under the task's own name and module."""
    return type(task_class.__name__, (mixin, task_class), {"__module__": task_class.__module__})


def plan_packing(options, strategy, lengths) -> finetune_packing.PackingPlan:
    """How the training examples of `lengths` (real tokens each) pack, and the batch of
    rows that holds `train_batch_size` examples on average (logged)."""
    plan = finetune_packing.plan_packing(
        lengths, options.max_seq_length, options.max_sequences_per_row,
        options.train_batch_size,
        strategy.num_replicas_in_sync * options.gradient_accumulation_steps)
    logging.info("Packing: %s", plan.describe())
    return plan


def cached_features(record_path: str, key: dict, write_fn) -> tuple:
    """Reuses the features at `record_path` when they were made from the same inputs.

    `key` names everything the features depend on (data and vocab digests, settings); it
    is stored with the feature count beside the record as `<record_path>.json`.

    Args:
      write_fn: `write_fn(record_path)` writes the features and returns their count.

    Returns:
      (number of features, True when they were reused).
    """
    key = json.loads(json.dumps(key))  # tuples as lists, as read back
    key_path = record_path + ".json"
    if os.path.exists(record_path) and os.path.exists(key_path):
        with open(key_path, encoding="utf-8") as file:
            cached = json.load(file)
        num_features = cached.pop("num_features", None)
        if cached == key and num_features:
            return num_features, True
    logging.info("Building features: %s ...", record_path)  # tokenizing may take a while
    num_features = write_fn(record_path)
    fileio.write_text_atomic(key_path, json.dumps(dict(key, num_features=num_features),
                                                  indent=1))
    return num_features, False


def write_results(output_dir: str, name: str, results: dict,
                  log_replaced: bool = True) -> str:
    """Every task's results files: `<name>_results.txt` (`key = value` lines sorted by
    key, as the original's eval_results.txt) and the same dict as `<name>_results.json`;
    the files of an earlier run there are replaced, with a warning naming them (unless
    not `log_replaced`: `best/`, whose results go with its checkpoint).

    Returns:
      The path of the .txt file.
    """
    path = os.path.join(output_dir, f"{name}_results.txt")
    earlier = [p for p in (path, path[:-len(".txt")] + ".json") if os.path.exists(p)]
    if earlier and log_replaced:  # a rerun replaces both, and says so
        logging.warning("Replacing %s of an earlier run with this run's results (copy "
                        "them first to keep them)", " and ".join(earlier))
    lines = [f"{key} = {results[key]}\n" for key in sorted(results)]
    fileio.write_text_atomic(path, "".join(lines))
    fileio.write_text_atomic(os.path.join(output_dir, f"{name}_results.json"),
                             json.dumps(results, indent=2, sort_keys=True,
                                        default=fileio.json_default) + "\n")
    for line in lines:
        logging.info("  %s", line.rstrip())
    return path

