"""A run's config: `output_dir/config.json`, written at the start of every run and read
by everything that later reads the run folder (evaluation, prediction, a next run's
`--init_checkpoint`, feature extraction, `bert-export-model`).

    config = run_config.describe(task, context)   # after task.setup(context)
    run_config.write(context.output_dir, config)
    saved = run_config.read("/tmp/mrpc/ckpt-343")  # {} for released / HF weights

The file is JSON, one key per line group, so that two runs diff:

    {"format": 1, "command": "classifier", "task": "classification/mrpc",
     "model_type": "classifier", "labels": ["0", "1"],
     "options": {every option of the command: "max_seq_length": 128, ...},
     "model": {bert_config.json's fields}, "export": {the task's serving settings},
     "vocab": {"sha256": "...", "do_lower_case": true},
     "lora_base": {"path": "...", "weights": "...", "sha256": "...", "rule": "..."}}

("lora_base" in a LoRA run only: the base checkpoint its adapters load onto.)

`--config=<output_dir>/config.json` reruns from it (`bert_tf.commands.command_line`: its
"options", with flags given on the command line winning). Folders written before
config.json existed hold `run_settings.json` (model type, task, labels, bert_config,
vocab digest, case): `read` returns it in the same shape, without "options".
"""

import json
import math
import os
from typing import Optional

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf.io import fileio
from bert_tf import options as options_lib
from bert_tf.runs import run_context
from bert_tf.weights import digest
from bert_tf.weights.digest import data_files

CONFIG_FILE = "config.json"
# What the output_dir's settings check writes too, and all folders of earlier versions hold.
LEGACY_SETTINGS_FILE = run_context.RUN_SETTINGS_FILE
FORMAT_VERSION = 1


def describe(task, context) -> dict:
    """The whole resolved configuration of a run (`task` after its `setup`)."""
    vocab = context.vocab
    return {
        "format": FORMAT_VERSION,
        "command": task.command,
        "task": task.name,
        "model_type": task.model_type,
        "labels": task.labels,
        "options": options_lib.options_to_dict(context.options),
        **({} if task.model_options is None else
           {"model_options": options_lib.options_to_dict(task.model_options)}),
        "model": context.config.to_dict(),
        # The serving settings, with the pairing of the run's Preprocessor.
        "export": {**task.export_options(), **({} if task.text_pair is None
                                               else {"text_pair": task.text_pair})},
        "vocab": {"sha256": vocab.sha256 if vocab else None,
                  "do_lower_case": getattr(context.options, "do_lower_case", None)},
        **lora_base(context.options),
    }


def lora_base(options) -> dict:
    """{"lora_base": the base checkpoint's path, weights and digest
    (`digest.weights_digest`)} of a LoRA run, whose checkpoints hold the adapters and the
    head alone; {} for other runs."""
    if not getattr(options, "lora_rank", 0) or not options.init_checkpoint:
        return {}
    return {"lora_base": dict(digest.weights_digest(options.init_checkpoint),
                              rule=digest.RULE)}


def write(output_dir: str, config: dict) -> str:
    """Writes `output_dir/config.json` (atomically); returns its path."""
    path = os.path.join(output_dir, CONFIG_FILE)
    fileio.write_text_atomic(path, json.dumps(config, indent=1, sort_keys=True,
                                              default=fileio.json_default) + "\n")
    return path


def run_folder(path: Optional[str]) -> Optional[str]:
    """The run folder that `path` (a run's output_dir, one of its checkpoint prefixes, or
    a prefix in its `best/`) belongs to, when it holds a config; else None."""
    folder = fileio.run_folder_of(path)
    if folder is None:
        return None
    for name in (CONFIG_FILE, LEGACY_SETTINGS_FILE):
        if os.path.isfile(os.path.join(folder, name)):
            return folder
    return None


def read(path: Optional[str]) -> dict:
    """The config of the run that `path` belongs to (see `run_folder`), with "path" set
    to the file read; {} when `path` is not a run of bert_tf (released or HF weights).

    A folder of an earlier version gives its run_settings.json in the same shape.
    A config.json written by Hugging Face (a transformers folder) is not a run's.

    Raises:
      TypeError: `path` is not a path.
      ValueError: when the run's file is not valid JSON, naming it.
    """
    if path is not None and (isinstance(path, bytes)
                             or not isinstance(path, (str, os.PathLike))):
        raise TypeError(f"path must be a run folder or checkpoint path (str), got "
                        f"{type(path).__name__}")
    folder = run_folder(path and os.fspath(path))
    if folder is None:
        return {}
    for name in (CONFIG_FILE, LEGACY_SETTINGS_FILE):
        file_path = os.path.join(folder, name)
        if not os.path.isfile(file_path):
            continue
        try:
            with open(file_path, encoding="utf-8") as file:
                saved = json.load(file)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ValueError(f"{file_path} is not valid JSON ({error}): the run's config "
                             "is damaged; remove it to use the folder's weights alone"
                             ) from None
        if name == CONFIG_FILE and "format" not in saved:
            continue  # a transformers config.json, not a run's
        if name == LEGACY_SETTINGS_FILE:
            saved = {"task": saved.get("task"), "model_type": saved.get("model_type"),
                     "labels": saved.get("labels"), "model": saved.get("bert_config"),
                     "vocab": {"sha256": saved.get("vocab_sha256"),
                               "do_lower_case": saved.get("do_lower_case")}}
        return dict(saved, path=file_path)
    return {}


def trained_case(saved: dict):
    """The do_lower_case the run `saved` trained with (None: not recorded)."""
    case = (saved.get("options") or {}).get("do_lower_case")
    return case if case is not None else (saved.get("vocab") or {}).get("do_lower_case")


def same_model(saved: dict, model_type: str, task_name: str, labels) -> bool:
    """Whether the run `saved` trained this very model: its head fits and means the same
    (model type, task and labels equal), so its checkpoints restore whole."""
    return (bool(saved) and saved.get("model_type") == model_type
            and saved.get("task") == task_name and saved.get("labels") == labels)



# The options that shape a run's checkpoint, input pipeline or schedule: a run continued
# from output_dir's checkpoint must have them as the run that wrote it did (the model's
# config, vocab, case, task and labels are compared too). Options that only say what
# to evaluate, where to log or how often to save are not among them.
CONTINUATION_OPTIONS = (
    "max_seq_length", "train_batch_size", "gradient_accumulation_steps", "pack_sequences",
    "max_sequences_per_row", "packing_window", "num_warmup_steps", "warmup_proportion", "learning_rate", "lr_schedule", "optimizer",
    "weight_decay_rate", "adam_bias_correction", "mixed_precision", "seed",
    "max_predictions_per_seq", "masked_lm_prob", "whole_word_masking", "dynamic_masking",
    "max_ngram_size", "next_sentence", "doc_stride", "max_query_length", "is_regression",
    "multi_label", "long_document", "head_initializer", "dropout_rate", "class_weights",
    "version_2_with_negative", "min_score", "max_score", "negative_column", "loss",
    "pooling", "normalize", "similarity_scale", "temperature", "generator_config_file",
    "generator_hidden_size", "generator_layers", "gen_weight", "disc_weight",
    "teacher", "student_layers", "student_config_file", "student_init_checkpoint",
    "soft_temperature", "soft_weight", "hard_weight", "hidden_weight", "hidden_loss",
    "attention_weight", "attention_loss", "layer_map", "transfer_file", "cache_teacher",
    "layerwise_lr_decay", "reinit_top_layers", "lora_rank", "lora_alpha", "lora_dropout",
    "lora_targets", "lora_train")


# The length of the run: a continued run may train for more (or fewer) steps. It goes on
# from the step reached with the schedule of the new length (as the original's
# Estimator did with a larger num_train_steps), which is logged.
LENGTH_OPTIONS = ("num_train_steps", "num_train_epochs")


def continuation_differences(saved: dict, config: dict) -> list:
    """`(setting, saved value, new value)` for each setting of `config` (`describe`)
    that a continued run must share with the run `saved` and does not."""
    differ = []
    for name in ("model_type", "task", "labels"):
        if saved.get(name) is not None and saved.get(name) != config.get(name):
            differ.append((name, saved.get(name), config.get(name)))
    there, now = saved.get("model") or {}, config.get("model") or {}
    differ += [(f"bert_config {key}", there.get(key), now.get(key))
               for key in sorted(set(there) | set(now)) if there.get(key) != now.get(key)]
    there, now = saved.get("vocab") or {}, config.get("vocab") or {}
    if there.get("sha256") and now.get("sha256") and there["sha256"] != now["sha256"]:
        differ.append(("vocab_file sha256", there["sha256"][:12], now["sha256"][:12]))
    there, now = saved.get("options") or {}, config.get("options") or {}
    differ += [(name, there[name], now[name]) for name in CONTINUATION_OPTIONS
               if name in there and name in now and there[name] != now[name]]
    return differ


def check_continuation(output_dir: str, config: dict, checkpoint: Optional[str]) -> None:
    """Refuses, before any work, to continue the run in `output_dir` with other settings.

    A training run whose output_dir holds a checkpoint continues that run: every setting
    that shapes the checkpoint, the input pipeline or the schedule
    (`continuation_differences`) must be the one the run was started with, or the run
    would mix two models, two data orders or two schedules (or fail on a shape).

    Args:
      output_dir: the run's folder.
      config: this run's `describe`.
      checkpoint: the checkpoint it would continue from (None: a fresh run, nothing
        checked).

    Raises:
      ValueError: one line naming each setting, its saved value and the new one.
    """
    if checkpoint is None:
        return
    check_checkpoint_complete(checkpoint)
    saved = read(output_dir)
    if os.path.dirname(saved.get("path", "")) != os.path.normpath(output_dir):
        return  # no config of this run (a folder of an older version: run_settings.json)
    differ = continuation_differences(saved, json.loads(json.dumps(
        config, default=fileio.json_default)))
    there, now = saved.get("options") or {}, config.get("options") or {}
    for name in LENGTH_OPTIONS:
        if name in there and name in now and there[name] != now[name]:
            logging.warning(
                "Continuing the run in %s from %s with %s=%s (it was started with %s): "
                "the step counter and the input position go on; the learning-rate "
                "schedule (warm-up and decay) is the one of the new length, so the rate "
                "from this step on is not the one the first run would have used",
                output_dir, os.path.basename(checkpoint), name, now[name], there[name])
    if differ:
        listed = "; ".join(f"{name}: {there!r} there, {now!r} now"
                           for name, there, now in differ)
        raise ValueError(
            f"output_dir {output_dir} holds a run at {os.path.basename(checkpoint)} that "
            f"this one would continue, with other settings ({listed}): give the settings "
            f"of {saved['path']} to continue it, or use a new output_dir "
            f"(--init_checkpoint={output_dir} starts a new run from its weights)")


def check_checkpoint_complete(prefix: str) -> None:
    """Refuses a checkpoint whose files are damaged or truncated (a full disk, a copy cut
    short) before a run restores it, instead of a restore failing with "IndexError: Read
    less bytes than requested".

    Reads the index (every tensor's dtype and shape) and only the small string tensors
    (the object graph, which TensorFlow writes last, so a cut tail shows there), never
    the weights: the data files must exist and hold at least the bytes the index's
    fixed-size tensors take (`expected_data_bytes`).

    Raises:
      ValueError: naming the checkpoint and what to do.
    """
    what, detail = "damaged", ""
    try:
        reader = tf.train.load_checkpoint(prefix)
        shards = data_files(prefix)
        expected = expected_data_bytes(reader)
        held = sum(tf.io.gfile.stat(path).length for path in shards)
        if held < expected:
            what, detail = "truncated", (f"its data files hold {held} bytes, its index "
                                         f"lists {expected} bytes of tensors")
    except FileNotFoundError as error:
        detail = str(error)
    except (tf.errors.OpError, RuntimeError, ValueError, IndexError) as error:
        detail = str(error).strip().splitlines()[0][:120] if str(error).strip() else \
            type(error).__name__
        what = "truncated" if isinstance(error, IndexError) else "damaged"
    if detail:
        raise ValueError(
            f"checkpoint {prefix} is {what} ({detail}): remove its files (the run then "
            "continues from the checkpoint before it, named in the folder's 'checkpoint' "
            "file), or use a new output_dir")


def _varint_size(value: int) -> int:
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


def expected_data_bytes(reader) -> int:
    """The bytes a checkpoint's data files hold at least, by its index: every fixed-size
    tensor's elements times its dtype's size, and each string tensor as the bundle
    writes it (a varint length per element, a 4-byte checksum, the bytes; the strings
    are read: the object graph, a few KB). Variant tensors (a tf.data iterator's state)
    count 0: their encoded size is not in the index.

    Args:
      reader: a `tf.train.load_checkpoint` reader.
    """
    shapes = reader.get_variable_to_shape_map()
    total = 0
    for name, dtype in reader.get_variable_to_dtype_map().items():
        if dtype == tf.string:
            values = np.asarray(reader.get_tensor(name), dtype=object).reshape(-1)
            total += 4 + sum(len(value) + _varint_size(len(value)) for value in values)
        elif dtype.is_numpy_compatible:
            total += math.prod(shapes[name]) * dtype.size
    return total
