"""A bert_tf run's own (object-based, TF2) checkpoints.

Holds what tells them from google-research name-based ones, which prefix a run folder
names (its best checkpoint, kept by --best_metric, before its latest) and the reading
of their encoder; `checkpoints.load_training_checkpoint` loads one with a `LoadReport`.
"""

import os

import tensorflow as tf
from absl import logging

# The folder of a fine-tuning output_dir that holds its best checkpoint (--best_metric).
BEST_DIR = "best"


def is_training_checkpoint(prefix):
    """Whether `prefix` is an object-based (TF2) checkpoint: a bert_tf run's, not a
    google-research name-based one."""
    names = [name for name, _ in tf.train.list_variables(prefix)]
    return ("_CHECKPOINTABLE_OBJECT_GRAPH" in names
            and not any(name.startswith(("bert/", "cls/")) for name in names))


def best_checkpoint(folder):
    """The prefix of the best checkpoint a fine-tuning run kept in `folder/best/`
    (`--best_metric`), or None (no such folder, or `folder` is not a folder)."""
    best = os.path.join(os.fspath(folder), BEST_DIR)
    return tf.train.latest_checkpoint(best) if tf.io.gfile.isdir(best) else None


def latest_or_best(folder):
    """A run folder's best checkpoint when it kept one (logged), else its latest."""
    best = best_checkpoint(folder)
    if best:
        logging.info("%s: using its best checkpoint %s (kept by --best_metric; see %s)",
                     folder, best, os.path.join(os.path.dirname(best), "eval_results.txt"))
        return best
    return tf.train.latest_checkpoint(folder)


def training_checkpoint(path):
    """The bert_tf training checkpoint `path` names, or None.

    Args:
      path: An init_checkpoint: a folder (a run's output_dir, a released folder) or a
        checkpoint prefix.

    Returns:
      The prefix of the best checkpoint of a run's output_dir when it kept one
      (`best/`), else of its latest `ckpt-N`, or `path` itself when it is an
      object-based (bert_tf) checkpoint prefix; None for a google-research or Hugging
      Face checkpoint.
    """
    path = os.fspath(path)
    if tf.io.gfile.isdir(path):
        prefix = latest_or_best(path)
    else:
        prefix = path if tf.io.gfile.exists(path + ".index") else None
    if prefix and is_training_checkpoint(prefix):
        return prefix
    return None


def read_training_encoder(encoder, prefix, fits="this config"):
    """Restores `encoder` from the encoder of training checkpoint `prefix` (a run's
    `model/encoder`); its head and optimizer are not read.

    Raises:
        ValueError: when an encoder variable's shape differs or it is missing (the
            checkpoint does not fit `fits`).
    """
    status = tf.train.Checkpoint(model=tf.train.Checkpoint(encoder=encoder)).read(prefix)
    try:
        status.assert_existing_objects_matched()
    except (AssertionError, ValueError) as error:
        if any("lora_a" in name for name, _ in tf.train.list_variables(prefix)):
            raise ValueError(f"training checkpoint {prefix} is a LoRA run's: it holds the "
                             "adapters and the head alone (its base checkpoint is named in "
                             "the run's config.json); export it merged first "
                             "(bert-export-model)") from None
        raise ValueError(f"training checkpoint {prefix}: its encoder does not fit {fits}: "
                         f"{str(error)[:300]}") from None
    finally:
        status.expect_partial()  # the other task's head and the optimizer are not read
