"""The task driver: what every task (classification, NER, SQuAD; pre-training for its
options, optimizer and results) shares. Options and their checks before any work, the
feature cache, training through `bert_tf.train.loop` (on packed rows too), restoring for
evaluation, result files and export. The run directory's settings and label list are in
`bert_tf.tasks.run_files`.

`TrainingOptions` holds what every runner trains with; `FinetuneOptions` adds the flags
common to the fine-tuning runners (names as the original google-research scripts).
`init_checkpoint` may be a released folder (bert_config.json, vocab.txt,
bert_model.ckpt.*), a TF1 checkpoint prefix or a Hugging Face folder; `bert_config_file`
and `vocab_file` default to the files in that folder.
"""

import dataclasses
import json
import os
import time
from typing import Optional

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import fileio
from bert_tf.weights import checkpoints
from bert_tf.train import distribute
from bert_tf.train import optimization
from bert_tf.text import tokenization
from bert_tf.train import loop
from bert_tf.train import finetune_packing
from bert_tf.train import sequence_packing
from bert_tf.layers.dense import KERNEL_DISTRIBUTIONS
from bert_tf.models import BertEncoder
from bert_tf.serving import export


@dataclasses.dataclass(kw_only=True)
class TrainingOptions:
    """What every runner (pre-training and fine-tuning) trains with: the model to start
    from, batch sizes, optimizer, schedule, checkpoints, precision and seed."""
    output_dir: str
    init_checkpoint: Optional[str] = None
    train_batch_size: int = 32
    eval_batch_size: int = 8
    learning_rate: float = 5e-5
    save_checkpoints_steps: int = 1000
    keep_checkpoint_max: int = 5
    steps_per_loop: int = 100
    optimizer: str = "adamw"
    weight_decay_rate: float = 0.01
    lr_schedule: str = "linear"
    adam_bias_correction: bool = True
    gradient_accumulation_steps: int = 1
    mixed_precision: Optional[str] = None
    use_xla: bool = False
    seed: Optional[int] = None


@dataclasses.dataclass(kw_only=True)
class FinetuneOptions(TrainingOptions):
    """Settings shared by the fine-tuning runners (see the runners' flag help)."""
    bert_config_file: Optional[str] = None
    vocab_file: Optional[str] = None
    do_lower_case: bool = True
    max_seq_length: int = 128
    do_train: bool = False
    do_eval: bool = False
    do_predict: bool = False
    predict_batch_size: int = 8
    num_train_epochs: float = 3.0
    warmup_proportion: float = 0.1
    distribution_strategy: str = "one_device"
    num_gpus: int = 0
    tpu_name: Optional[str] = None
    tpu_zone: Optional[str] = None
    gcp_project: Optional[str] = None
    dropout_rate: float = 0.1
    head_initializer: str = "normal"  # the new head's kernel: N(0, r), as transformers
    export_dir: Optional[str] = None
    allow_case_mismatch: bool = False
    trim_padding: Optional[bool] = None  # None: on unless TPU or XLA
    pack_sequences: bool = False  # training rows pack several examples
    max_sequences_per_row: int = 3

    @property
    def use_trim_padding(self) -> bool:
        """Cut batches to their longest sequence (dynamic shapes; not for TPU / XLA)."""
        if self.trim_padding is not None:
            return bool(self.trim_padding)
        return self.distribution_strategy != "tpu" and not self.use_xla


def check_options(options: FinetuneOptions) -> None:
    """Fills config/vocab paths from an init_checkpoint folder; rejects what cannot work."""
    if not (options.do_train or options.do_eval or options.do_predict):
        raise ValueError("at least one of do_train, do_eval or do_predict must be true")
    if not options.output_dir:
        raise ValueError("output_dir is required")
    if options.init_checkpoint and not (
            os.path.isdir(options.init_checkpoint)
            or tf.io.gfile.exists(options.init_checkpoint + ".index")
            or options.init_checkpoint.endswith(".safetensors")):
        raise FileNotFoundError(f"init_checkpoint not found: {options.init_checkpoint} "
                                "(expected a folder or a checkpoint prefix with .index)")
    options.bert_config_file = (options.bert_config_file
                                or fileio.file_in_folder(options.init_checkpoint, "bert_config.json")
                                or fileio.file_in_folder(options.init_checkpoint, "config.json"))
    options.vocab_file = options.vocab_file or fileio.file_in_folder(options.init_checkpoint, "vocab.txt")
    for name in ("bert_config_file", "vocab_file"):
        value = getattr(options, name)
        if not value:
            raise ValueError(f"{name} is required (or an init_checkpoint folder holding it)")
        if not os.path.isfile(value):
            raise FileNotFoundError(f"{name} not found: {value}")
    _check_numbers(options)
    # Also checked where they are used; here so that a typo stops the run before any work.
    for name, choices in (("lr_schedule", optimization.LR_SCHEDULES),
                          ("head_initializer", KERNEL_DISTRIBUTIONS)):
        if getattr(options, name) not in choices:
            raise ValueError(f"{name} must be one of {', '.join(choices)}, "
                             f"got {getattr(options, name)!r}")
    config = checkpoints.load_config(options.bert_config_file)
    vocab = tokenization.load_vocab(options.vocab_file)
    tokenization.check_vocab_matches(len(vocab), options.vocab_file, config.vocab_size,
                                     options.bert_config_file)
    if not options.allow_case_mismatch:
        tokenization.check_case_matches(options.do_lower_case, vocab, options.vocab_file,
                                        options.init_checkpoint)
    if options.max_seq_length > config.max_position_embeddings:
        raise ValueError(f"max_seq_length {options.max_seq_length} exceeds "
                         f"max_position_embeddings {config.max_position_embeddings} of "
                         f"{options.bert_config_file}")
    fileio.check_output_dir(options.output_dir)
    os.makedirs(options.output_dir, exist_ok=True)


def _check_numbers(options: FinetuneOptions) -> None:
    """Rejects sizes and rates that cannot work, before any data is read."""
    batch_flags = [("train_batch_size", options.do_train),
                   ("eval_batch_size", options.do_eval),
                   ("predict_batch_size", options.do_predict)]
    for name, used in batch_flags:
        value = getattr(options, name)
        if used and (isinstance(value, bool) or int(value) != value or value < 1):
            raise ValueError(f"{name} must be a positive integer, got {value}")
    if options.do_train:
        if not options.num_train_epochs > 0:
            raise ValueError(f"num_train_epochs must be > 0, got {options.num_train_epochs}")
        if not options.learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {options.learning_rate}")
        if not 0 <= options.warmup_proportion <= 1:
            raise ValueError("warmup_proportion must be between 0 and 1, got "
                             f"{options.warmup_proportion}")
    if options.pack_sequences:
        sequence_packing.check_max_sequences_per_row(options.max_sequences_per_row)
    if options.max_seq_length < 3:
        raise ValueError(f"max_seq_length must be at least 3 ([CLS], a token, [SEP]), got "
                         f"{options.max_seq_length}")


def make_tokenizer(options: FinetuneOptions) -> tokenization.FullTokenizer:
    return tokenization.FullTokenizer(options.vocab_file, do_lower_case=options.do_lower_case)


def make_strategy(options: FinetuneOptions):
    return distribute.get_strategy(options.distribution_strategy, options.num_gpus,
                                   options.tpu_name, options.tpu_zone, options.gcp_project)


def model_builder(options: FinetuneOptions, make_head_model, load_init: bool,
                  load_reports=None):
    """A `model_fn`: encoder from the config + head; loads init_checkpoint when asked.

    Args:
      load_reports: a list that gets the `checkpoints.LoadReport` of each load.
    """
    def model_fn():
        model = make_head_model(BertEncoder(checkpoints.load_config(options.bert_config_file)))
        model.build()
        if load_init and options.init_checkpoint:
            # The loader logs its report (loaded / newly initialised / unmatched).
            report = checkpoints.load_pretrained_weights(model, options.init_checkpoint)
            if load_reports is not None:
                load_reports.append(report)
        return model
    return model_fn


def optimizer_builder(options: TrainingOptions, num_train_steps: int, num_warmup_steps: int):
    """An `optimizer_fn` for `loop.train`: the options' optimizer and schedule."""
    def optimizer_fn():
        return optimization.create_optimizer(
            options.learning_rate, num_train_steps, num_warmup_steps,
            optimizer_type=options.optimizer, weight_decay_rate=options.weight_decay_rate,
            lr_schedule=options.lr_schedule,
            adam_bias_correction=options.adam_bias_correction)
    return optimizer_fn


def num_train_steps_for(options, num_features: int) -> int:
    """Optimizer steps of `num_train_epochs` passes over `num_features` training features.

    An epoch is a pass over the features the model trains on (a SQuAD question or a long
    NER sentence gives several windows), as in Hugging Face transformers.
    """
    return max(1, int(num_features / options.train_batch_size * options.num_train_epochs))


def plan_packing(options, strategy, lengths) -> finetune_packing.PackingPlan:
    """How the training examples of `lengths` (real tokens each) pack, and the batch of
    rows that holds `train_batch_size` examples on average (logged)."""
    plan = finetune_packing.plan_packing(
        lengths, options.max_seq_length, options.max_sequences_per_row,
        options.train_batch_size,
        strategy.num_replicas_in_sync * options.gradient_accumulation_steps)
    logging.info("Packing: %s", plan.describe())
    return plan


def train(options, strategy, make_head_model, loss_fn, dataset_fn, num_features,
          packing_plan=None):
    """Trains num_train_epochs over `num_features` features (resuming in output_dir).

    With a `packing_plan` the batches are `packing_plan.rows_per_batch` packed rows,
    about `train_batch_size` examples: the steps and schedule stay those of the
    unpacked run.
    """
    num_train_steps = num_train_steps_for(options, num_features)
    num_warmup_steps = int(num_train_steps * options.warmup_proportion)
    logging.info("Training on %d features, batch %d, %d steps (%d warm-up)", num_features,
                 options.train_batch_size, num_train_steps, num_warmup_steps)
    batch_rows = packing_plan.rows_per_batch if packing_plan else options.train_batch_size
    fresh = tf.train.latest_checkpoint(options.output_dir) is None

    result = loop.train(
        strategy, model_builder(options, make_head_model, load_init=fresh), loss_fn,
        dataset_fn, optimizer_fn=optimizer_builder(options, num_train_steps, num_warmup_steps),
        output_dir=options.output_dir,
        num_train_steps=num_train_steps, global_batch_size=batch_rows,
        save_checkpoints_steps=options.save_checkpoints_steps,
        keep_checkpoint_max=options.keep_checkpoint_max,
        steps_per_loop=min(options.steps_per_loop, options.save_checkpoints_steps),
        gradient_accumulation_steps=options.gradient_accumulation_steps,
        mixed_precision=options.mixed_precision, use_xla=options.use_xla)
    if packing_plan and result.seconds:
        logging.info("Packed training: %.1f examples/s (%.1f rows/s)",
                     result.steps_this_run * batch_rows * packing_plan.examples_per_row
                     / result.seconds, result.steps_this_run * batch_rows / result.seconds)
    return result.model, result.global_step


def load_trained_model(options, strategy, make_head_model, element_spec):
    """The model of the latest checkpoint in output_dir (else init_checkpoint) and its step.

    Raises:
      ValueError: when there is no training checkpoint and init_checkpoint is missing
        or has no weights for the task head (predictions would come from a random head).
    """
    latest = tf.train.latest_checkpoint(options.output_dir)
    if latest is None and not options.init_checkpoint:
        raise ValueError(f"no training checkpoint in output_dir {options.output_dir} and no "
                         "init_checkpoint: train first (do_train) or pass init_checkpoint")
    reports = []
    model = loop.build_model(
        strategy, model_builder(options, make_head_model, load_init=latest is None,
                                load_reports=reports), element_spec)
    # Names outside "bert/" are the task head's (an unused pooler may be missing).
    fresh = [name for report in reports for name in report.newly_initialized
             if not name.startswith("bert/")]
    if fresh:
        raise ValueError(
            f"no training checkpoint in output_dir {options.output_dir}, and init_checkpoint "
            f"{options.init_checkpoint} has no weights for {', '.join(fresh)}: the task "
            "head would be random. Train first (do_train), or set output_dir to a "
            "fine-tuned run")
    step = loop.restore_model(model, latest) if latest else 0
    logging.info("Evaluating %s (global_step %d)", latest or options.init_checkpoint, step)
    return model, step


class ModelHolder:
    """The model of one run: the one just trained, or restored on first use."""

    def __init__(self, options, strategy, make_head_model):
        self.options, self.strategy, self.make_head_model = options, strategy, make_head_model
        self.model, self.global_step = None, 0

    def train(self, loss_fn, dataset_fn, num_features, packing_plan=None):
        self.model, self.global_step = train(self.options, self.strategy, self.make_head_model,
                                             loss_fn, dataset_fn, num_features, packing_plan)

    def _ensure_model(self, dataset_fn):
        if self.model is None:
            element_spec = dataset_fn(tf.distribute.InputContext()).element_spec
            self.model, self.global_step = load_trained_model(
                self.options, self.strategy, self.make_head_model, element_spec)

    def predict(self, dataset_fn, output_key="logits", keys=()):
        """`predict_outputs` with the model (restored from output_dir when not trained)."""
        self._ensure_model(dataset_fn)
        return predict_outputs(self.strategy, self.model, dataset_fn, output_key, keys)

    def predict_batches(self, dataset_fn, output_key="logits"):
        """Yields `output_key` per batch (batches may differ in sequence length)."""
        self._ensure_model(dataset_fn)
        for batch in loop.predict(self.strategy, self.model, dataset_fn):
            yield batch[output_key]


def predict_outputs(strategy, model, dataset_fn, output_key="logits", keys=()):
    """Concatenated float32 numpy outputs (and passthrough features) over a dataset."""
    outputs = {name: [] for name in (output_key,) + tuple(keys)}
    started, count = time.time(), 0
    for batch in loop.predict(strategy, model, dataset_fn, passthrough_keys=keys):
        for name in outputs:
            outputs[name].append(batch[name])
        count += len(batch[output_key])
    logging.info("Predicted %d examples in %.1f s", count, time.time() - started)
    return {name: np.concatenate(values) if values else np.zeros((0,))
            for name, values in outputs.items()}


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=-1, keepdims=True)


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


def write_eval_results(path: str, results: dict) -> None:
    """`key = value` lines sorted by key, as the original eval_results.txt."""
    lines = [f"{key} = {results[key]}\n" for key in sorted(results)]
    fileio.write_text_atomic(path, "".join(lines))
    for line in lines:
        logging.info("  %s", line.rstrip())


def export_model(options, model, kind: str, **kwargs) -> Optional[str]:
    """Exports a SavedModel for TF Serving to options.export_dir (when set).

    Args:
      kind: "classifier", "token_classifier" or "span_labeler" (see
        `bert_tf.serving.export.export_finetuned_model`).
      **kwargs: passed to the exporter (label_names, is_regression, text_pair,
        max_query_length, max_answer_length).
    """
    if not options.export_dir:
        return None
    path = export.export_finetuned_model(model, options.export_dir, kind,
                                         options.vocab_file, options.do_lower_case,
                                         options.max_seq_length, **kwargs)
    logging.info("Exported the SavedModel to %s", path)
    return path


def set_seed(seed: Optional[int]) -> None:
    if seed is not None:
        keras.utils.set_random_seed(seed)
