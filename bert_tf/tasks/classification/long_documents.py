"""Long documents in classification: `long_document="windows"` judges a text on all of it.

A text longer than `max_seq_length` is cut into windows `doc_stride` tokens apart
(`bert_tf.text.windows`: one text is windowed whole; of a pair, the second text is
windowed and the first repeated in every window). Training sees every window with its
document's label; evaluation and prediction combine the windows' logits per document
(`window_pooling`: mean or max), so metrics and `test_results.tsv` stay one row per
input example, in input order. The export does the same in the graph
(`bert_tf.serving.export.export_classifier(doc_stride=..., window_pooling=...)`).
The default, `long_document="truncate"`, keeps the original's first tokens.

    check_options(options, pair)                  # before any work
    stride = doc_stride(options, pair)             # None: truncate
    counts = windows_per_example(record_path, n)   # from the records' example_index
    logits, label_ids = per_document(window_logits, window_label_ids, counts,
                                     window_pooling(options))
"""

from typing import Optional

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf.text import windows
from bert_tf.train import records

POOLINGS = windows.POOLINGS
DEFAULT_POOLING = "mean"
_WINDOWS_ONLY = ("doc_stride", "window_pooling")  # options that need long_document=windows


def check_options(options, pair: bool) -> None:
    """Refuses window options that cannot work, before any data is read.

    Args:
      options: has `long_document`, `doc_stride`, `window_pooling`, `max_seq_length`.
      pair: the task's examples are sentence pairs.

    Raises:
      ValueError: `doc_stride` or `window_pooling` without `long_document=windows`; a
        `doc_stride` <= 0 or not below the window's capacity (both numbers named).
    """
    if options.long_document != "windows":
        for name in _WINDOWS_ONLY:
            value = getattr(options, name)
            if value is not None:
                raise ValueError(
                    f"--{name}={value} applies to --long_document=windows only, and "
                    f"long_document is {options.long_document!r}: add "
                    f"--long_document=windows to judge long texts in windows, or leave "
                    f"--{name} out")
        return
    if options.doc_stride is not None:
        windows.check_stride(options.doc_stride, options.max_seq_length, pair)


def doc_stride(options, pair: bool) -> Optional[int]:
    """Tokens between window starts (default: half a window), or None when truncating."""
    if options.long_document != "windows":
        return None
    if options.doc_stride is not None:
        return options.doc_stride
    return windows.default_stride(options.max_seq_length, pair)


def window_pooling(options) -> str:
    """How the windows' logits combine: "mean" (default) or "max"."""
    return options.window_pooling or DEFAULT_POOLING


def cache_key(options, pair: bool) -> dict:
    """What windowed features add to the feature cache key ({} when truncating, so
    that the cached features of truncation stay valid)."""
    stride = doc_stride(options, pair)
    return {} if stride is None else {"long_document": "windows", "doc_stride": stride}


def export_options(options, pair: bool) -> dict:
    """Keyword arguments of `export.export_classifier` ({} when truncating)."""
    stride = doc_stride(options, pair)
    if stride is None:
        return {}
    return {"doc_stride": stride, "window_pooling": window_pooling(options)}


def windows_per_example(record_path: str, num_examples: int) -> np.ndarray:
    """Windows [N] of each example of a windowed feature record (its `example_index`).

    Raises:
      ValueError: naming the record when its windows do not cover the N examples in
        order (a record of other data): remove it and its .json to rebuild.
    """
    dataset = records.tfrecord_dataset(
        record_path, {"example_index": tf.io.FixedLenFeature([], tf.int64)}, 4096,
        is_training=False, compression="none", drop_remainder=False)
    indices = np.concatenate([batch["example_index"].numpy() for batch in dataset]
                             or [np.zeros([0], np.int64)])
    counts = np.bincount(indices, minlength=num_examples) if indices.size else np.zeros(
        [num_examples], np.int64)
    if (len(counts) != num_examples or np.any(counts < 1)
            or np.any(np.diff(indices) < 0)):
        raise ValueError(f"{record_path}: its {len(indices)} windows do not belong to the "
                         f"{num_examples} examples in order; remove it and "
                         f"{record_path}.json to write the features again")
    return counts


def log_windows(split: str, counts: np.ndarray, stride: int) -> None:
    """Logs how many documents were split, and into how many windows."""
    split_documents = counts > 1
    logging.info("%s: %d of %d documents are longer than a window and were split, into "
                 "%d windows (doc_stride %d); %d windows in all", split,
                 int(split_documents.sum()), len(counts),
                 int(counts[split_documents].sum()), stride, int(counts.sum()))


def pool_logits(logits: np.ndarray, counts: np.ndarray, pooling: str) -> np.ndarray:
    """Each document's logits from its windows': [W, C] -> [N, C].

    Args:
      logits: the windows' logits, the windows of each document consecutive, in order.
      counts: windows [N] of each document (each >= 1; they sum to W).
      pooling: "mean" or "max".
    """
    starts = _first_windows(counts)
    if pooling == "mean":
        return np.add.reduceat(logits, starts, axis=0) / counts[:, None].astype(logits.dtype)
    if pooling == "max":
        return np.maximum.reduceat(logits, starts, axis=0)
    raise ValueError(f"window_pooling must be one of {list(POOLINGS)}, got {pooling!r}")


def per_document(logits: np.ndarray, label_ids: np.ndarray, counts: Optional[np.ndarray],
                 pooling: str) -> tuple:
    """(logits [N, C], label_ids [N]) of the documents from those of their windows: the
    pooled logits, and each document's label (its first window's: all carry it).
    Unchanged when `counts` is None (truncated: one feature per document)."""
    if counts is None:
        return logits, label_ids
    return pool_logits(logits, counts, pooling), label_ids[_first_windows(counts)]


def _first_windows(counts: np.ndarray) -> np.ndarray:
    """Index [N] of each document's first window."""
    return np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
