"""The student's training record: the teacher task's training features, the transfer
set's, and the teacher's outputs for each, computed once.

    rows = feature_rows(train_record) + feature_rows(transfer_record, labelled=False)
    count = write_distill_record(path, rows, teacher_fn, batch_size=64)
    dataset_fn = distill_dataset_fn(path, batch_size=32, seed=1, trim_padding=True)

`distill_train.tf_record` holds every feature of the task's training rows (`rows`: a
classifier's record, a tagger's windows), plus `distill_labelled` (1 for
a training example, 0 for a transfer row: soft loss only) and, with a cached teacher,
`teacher/<output>` (the teacher's logits, flattened) per row.
"""

import numpy as np
import tensorflow as tf

from bert_tf.io import fileio
from bert_tf.models.encoder import INPUT_NAMES
from bert_tf.text import input_layout_graph
from bert_tf.train import progress, records

LABELLED = "distill_labelled"
TEACHER_PREFIX = "teacher/"
RECORD_NAME = "distill_train.tf_record"
TRANSFER_RECORD_NAME = "transfer.tf_record"


def read_transfer_lines(path: str, pairs: bool) -> list:
    """The transfer file's texts: (line number, text, second text or None) of each line
    that is not blank.

    Args:
      path: UTF-8 text, one text a line; with `pairs`, two texts separated by a tab.
      pairs: The teacher reads sentence pairs.

    Raises:
      ValueError: naming --transfer_file (and the line) for a file that is not text, a
        pair line without a tab, or no text at all.
    """
    texts = []
    try:
        lines = list(fileio.iter_text_lines(path))
    except ValueError as error:
        raise ValueError(f"--transfer_file: {error}") from None
    for number, line in lines:
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        text_a, text_b = line, None
        if pairs:
            if "\t" not in line:
                raise ValueError(f"--transfer_file={path}:{number}: the teacher reads "
                                 "sentence pairs; expected two texts separated by a tab")
            text_a, text_b = line.split("\t", 1)
        texts.append((number, text_a, text_b))
    if not texts:
        raise ValueError(f"--transfer_file={path}: no text (every line is empty)")
    return texts


def feature_rows(record_path: str, labelled: bool = True) -> list:
    """The serialized `tf.train.Example`s of a record, each with `distill_labelled`."""
    rows = []
    for serialized in tf.data.TFRecordDataset(record_path).as_numpy_iterator():
        example = tf.train.Example.FromString(serialized)
        example.features.feature[LABELLED].int64_list.value.append(int(labelled))
        rows.append(example)
    return rows


def int_rows(arrays: dict, labelled: bool) -> list:
    """`tf.train.Example`s of the rows of equal-length int arrays {name: [N, ...]}, each
    with `distill_labelled`."""
    count = len(next(iter(arrays.values())))
    rows = []
    for index in range(count):
        feature = {name: records.int_feature(np.ravel(values[index]).tolist())
                   for name, values in arrays.items()}
        feature[LABELLED] = records.int_feature([int(labelled)])
        rows.append(tf.train.Example(features=tf.train.Features(feature=feature)))
    return rows


def feature_spec(example: tf.train.Example) -> dict:
    """`tf.io.parse_example`'s spec of the fixed-length features of `example` (a value
    of length 1 is a scalar)."""
    spec = {}
    for name, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        values = getattr(feature, kind).value
        dtype = {"int64_list": tf.int64, "float_list": tf.float32,
                 "bytes_list": tf.string}[kind]
        spec[name] = tf.io.FixedLenFeature([] if len(values) == 1 else [len(values)], dtype)
    return spec


def record_spec(record_path: str) -> dict:
    """The feature spec of a record written by `write_distill_record` (its first row)."""
    first = next(iter(tf.data.TFRecordDataset(record_path).take(1).as_numpy_iterator()))
    return feature_spec(tf.train.Example.FromString(first))


def _parsed(rows, spec):
    """int32 (int64 features) / float32 tensors of serialized `rows`."""
    features = tf.io.parse_example([row.SerializeToString() for row in rows], spec)
    return {name: tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
            for name, value in features.items()}


def add_teacher_outputs(rows, teacher_fn, batch_size: int) -> None:
    """Adds `teacher/<name>` (flattened float32) to every row: `teacher_fn(features)`'s
    outputs for batches of `batch_size` rows, in order; logs progress with the time left
    (the teacher pass over a transfer set takes minutes)."""
    spec = feature_spec(rows[0])
    shown = progress.PhaseProgress("Teacher pass", len(rows))
    shown.start()
    for start in range(0, len(rows), batch_size):
        batch = rows[start:start + batch_size]
        outputs = teacher_fn(_parsed(batch, spec))
        for name, values in outputs.items():
            values = np.asarray(values, np.float32).reshape(len(batch), -1)
            for row, row_values in zip(batch, values):
                row.features.feature[TEACHER_PREFIX + name].float_list.value.extend(
                    row_values.tolist())
        shown.update(len(batch))
    shown.finish()


def pad_positions(value, positions):
    """[B, L, ...] outputs of a batch cut to its longest row, zero-padded to [B, S, ...]
    (the padded positions are never scored)."""
    padding = [[0, 0], [0, positions - tf.shape(value)[1]]] + [[0, 0]] * (
        value.shape.rank - 2)
    return tf.pad(value, padding)


def write_distill_record(path: str, rows, teacher_fn=None, batch_size: int = 64) -> int:
    """Writes `rows` (with the teacher's outputs when `teacher_fn` is given) to `path`,
    atomically; returns their number."""
    if teacher_fn is not None:
        add_teacher_outputs(rows, teacher_fn, batch_size)
    with fileio.atomic_output(path) as temporary:
        with tf.io.TFRecordWriter(temporary) as writer:
            for row in rows:
                writer.write(row.SerializeToString())
    return len(rows)


def cached_teacher_outputs(features: dict) -> dict:
    """{output name: value} of the teacher outputs cached in a batch ({} when the record
    holds none)."""
    return {name[len(TEACHER_PREFIX):]: value for name, value in features.items()
            if name.startswith(TEACHER_PREFIX)}


def distill_dataset_fn(path: str, batch_size: int, seed=None, trim_padding=False,
                       token_features=(), token_outputs=()):
    """The training `dataset_fn(input_context)` of the record at `path`: shuffled,
    repeated, full batches.

    Args:
      trim_padding: Cut each batch to its longest row: the model inputs and
        `token_features` ([B, S] -> [B, L]) and the cached teacher outputs named in
        `token_outputs` (flattened [B, S * C] -> [B, L, C]).
    """
    spec = record_spec(path)
    token_outputs = [TEACHER_PREFIX + name for name in token_outputs
                     if TEACHER_PREFIX + name in spec]

    def trim(batch):
        trimmed = input_layout_graph.trim_to_longest(batch, INPUT_NAMES + tuple(token_features))
        positions = tf.shape(batch["input_ids"])[1]
        for name in token_outputs:  # [B, S * C] -> [B, S, C] -> [B, L, C]
            value = tf.reshape(batch[name], [tf.shape(batch[name])[0], positions, -1])
            trimmed[name] = value[:, :tf.shape(trimmed["input_ids"])[1]]
        return trimmed

    def dataset_fn(input_context):
        dataset = records.tfrecord_dataset(path, spec, batch_size, True,
                                           input_context=input_context, compression="none",
                                           seed=seed, shuffle_buffer_size=10000,
                                           drop_remainder=True)
        return dataset.map(trim) if trim_padding else dataset
    return dataset_fn
