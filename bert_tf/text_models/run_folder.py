"""A text model's folder is a run folder, as the commands write it.

`write` puts into it what a fine-tuning command's output_dir holds for its model:
`config.json` (`bert_tf.runs.run_config`'s format, "command": "python"), `bert_config.json`,
`vocab.txt`, `label_list.txt`, `preprocessor.json` and a training checkpoint `ckpt-<step>`
of the task model, so that `bert-export-model --init_checkpoint=<folder>`, evaluation and
prediction read it with no flag. `trained_model` reads such a folder, or a command's.
"""

import os

import tensorflow as tf
from absl import logging

from bert_tf.io import fileio
from bert_tf.io import write_errors
from bert_tf.runs import run_config, run_context
from bert_tf.train import loop
from bert_tf.weights import training_checkpoints

COMMAND = "python"


def write(folder, model, preprocessor, *, model_type, task, labels, export, options):
    """Writes `model` (a task model of `bert_tf.models`) and its preprocessor as a run.

    Args:
      folder: The run folder (created; files of the same names are replaced).
      model: The task model whose checkpoint is written (with `model.encoder.config`).
      preprocessor: Its `Preprocessor`.
      model_type, task, labels, export: config.json's keys of those names.
      options: The settings it trained with (config.json's "options").

    Returns:
      The checkpoint prefix written.
    """
    folder = fileio.path_argument(folder, "folder", "a folder")
    os.makedirs(folder, exist_ok=True)
    preprocessor.save(folder)
    config = model.encoder.config
    fileio.write_text_atomic(os.path.join(folder, "bert_config.json"),
                             config.to_json_string())
    if labels:
        run_context.write_label_list(folder, labels)
    run_config.write(folder, {
        "format": run_config.FORMAT_VERSION, "command": COMMAND, "task": task,
        "model_type": model_type, "labels": labels,
        "options": {**options, "max_seq_length": preprocessor.max_seq_length,
                    "do_lower_case": preprocessor.do_lower_case},
        "model": config.to_dict(), "export": export,
        "vocab": {"sha256": preprocessor.vocab.sha256,
                  "do_lower_case": preprocessor.do_lower_case}})
    step = int(options.get("global_step", 0))
    checkpoint = tf.train.Checkpoint(model=model,
                                     global_step=tf.Variable(step, dtype=tf.int64))
    manager = tf.train.CheckpointManager(checkpoint, folder, max_to_keep=1)
    with write_errors.reported(folder):
        prefix = manager.save(checkpoint_number=step)
    logging.info("Saved %s (step %d) as a run folder: %s", type(model).__name__, step, folder)
    return prefix


def restore_trained(model, path) -> int:
    """Restores the whole task model (encoder and head) of the run at `path`, from its
    best checkpoint when it kept one, else its latest; returns its step."""
    prefix = training_checkpoints.training_checkpoint(path)
    if prefix is None:
        raise ValueError(f"{path}: no training checkpoint (ckpt-N) of a bert_tf run found")
    step = loop.restore_model(model, prefix)
    logging.info("Loaded %s (encoder and head) from %s, step %d", type(model).__name__,
                 prefix, step)
    return step
