"""The task shape every runner's task has (as tensorflow/models' `base_task`): how to
build its model, its data per split, its loss, how to score and what to write and
export. `bert_tf.tasks.driver.run` runs train / eval / predict / export for any task.

    class MyTask(Task):
        name, model_type = "my_task", "classifier"
        def build_model(self, encoder): ...             # encoder -> head model
        def loss(self, features, outputs): ...          # scalar or {"total_loss": ...}
        def train_data(self): ...                       # TrainData
        def evaluate(self, split, runner): ...          # metrics dict ({}: no gold)
        def metric_names(self): ...                     # what evaluate returns
"""

import dataclasses
import json
import os
from typing import Callable, Optional

from absl import logging

from bert_tf import fileio
from bert_tf.train import finetune_packing


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
    `check_inputs`, `setup` (with the run context), `train_data` / `loss` /
    `build_model` when training, `evaluate` per split, `export_options` when exporting.

    Attributes:
      name: The task's name in run_settings.json ("classification/mrpc", "ner", ...).
      model_type: The export kind: "classifier", "token_classifier", "span_labeler",
        or "pretrainer" (not exported).
      result_names: The results file of each scored split (`<name>_results.txt`).
      strict_init: init_checkpoint must hold every encoder weight (pre-training);
        otherwise the report of what was loaded is logged (fine-tuning heads are new).
      needs_pretrained_encoder: Training starts from init_checkpoint; without one (and
        without a checkpoint to resume) the run needs allow_random_encoder.
      needs_vocab: The task tokenizes (the run context then requires a vocab).
      records_run_settings: Check and record the output_dir's run_settings.json.
      train_eval_split: The split scored while training (`eval_every_steps`): "eval",
        the dev data of do_eval (SQuAD: "predict", its predict_file is the dev set).
    """
    name = "task"
    model_type = "classifier"
    result_names = {"eval": "eval", "predict": "test"}
    train_eval_split = "eval"
    strict_init = False
    needs_pretrained_encoder = True
    needs_vocab = True
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
        return steps, int(steps * options.warmup_proportion)

    def build_model(self, encoder):
        """The task's model on `encoder` (a `BertEncoder` of the run's config)."""
        raise NotImplementedError

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

    def explain_bad_input(self, error) -> None:
        """Called when training fails on its input; may log or raise a clearer error."""

    def export_options(self) -> dict:
        """Keyword arguments of `serving.export.export_finetuned_model` for this task."""
        return {}


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
    num_features = write_fn(record_path)
    fileio.write_text_atomic(key_path, json.dumps(dict(key, num_features=num_features),
                                                  indent=1))
    return num_features, False


def write_results(output_dir: str, name: str, results: dict) -> str:
    """Every task's results files: `<name>_results.txt` (`key = value` lines sorted by
    key, as the original's eval_results.txt) and the same dict as `<name>_results.json`.

    Returns:
      The path of the .txt file.
    """
    path = os.path.join(output_dir, f"{name}_results.txt")
    lines = [f"{key} = {results[key]}\n" for key in sorted(results)]
    fileio.write_text_atomic(path, "".join(lines))
    fileio.write_text_atomic(os.path.join(output_dir, f"{name}_results.json"),
                             json.dumps(results, indent=2, sort_keys=True,
                                        default=_plain_number) + "\n")
    for line in lines:
        logging.info("  %s", line.rstrip())
    return path


def _plain_number(value):
    """numpy scalars as Python numbers in the results JSON."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"result value {value!r} is not a number")
