"""tf.data pipelines over (sharded, optionally gzip-compressed) TFRecord files.

`pretraining_dataset` reads the records of google-research/bert's
`create_pretraining_data.py` (and ours): `input_ids`, `input_mask`, `segment_ids`
[max_seq_length], `masked_lm_positions`, `masked_lm_ids`, `masked_lm_weights`
[max_predictions_per_seq], `next_sentence_labels` [1]; rows for dynamic masking of
segmented (Chinese) text also `word_starts` [max_seq_length]. `tfrecord_dataset` is the
generic pipeline under it, for any feature spec (the fine-tuning tasks use it too).

Training pipeline, per input pipeline (one per worker under `tf.distribute`):
files -> shard by `input_context` (file level; record level when there are fewer files
than pipelines) -> shuffle files -> parallel interleave -> shuffle records -> repeat ->
batch (per-replica batch, `drop_remainder`) -> parse -> int64 to int32 -> prefetch. Each
epoch is one whole pass over the records, in an order drawn anew each epoch.
Evaluation reads the files in order, once, without shuffling.

A file whose first record does not hold the expected features with the expected lengths
is reported by name, with the feature and the flag to fix, before training starts
(`check_record_shapes`).
"""

import re

import tensorflow as tf

from bert_tf.io import input_paths
from bert_tf.train import masking, sequence_packing
from bert_tf.train.choices import COMPRESSION_TYPES

# Bytes each TFRecord reader buffers (TensorFlow warns when it is left unset; 256 KiB
# then): 1 MiB a file, so that an interleave over many files stays small.
READ_BUFFER_BYTES = 1 << 20
_GZIP_MAGIC = b"\x1f\x8b"


def pretraining_features(max_seq_length, max_predictions_per_seq, masked=True,
                         next_sentence=True, word_starts=False):
    """The pre-training record spec: feature name -> tf.io.FixedLenFeature.

    Args:
        masked: The records carry their masks (False: rows of
            `create_pretraining_data --masking=none`, masked in the pipeline).
        next_sentence: The records carry `next_sentence_labels`.
        word_starts: Read the optional `word_starts` [max_seq_length] (the words of
            segmented text, for dynamic whole-word masking); a record without it reads
            as all ones (every token a word start: `##` pieces group as before).
    """
    spec = {
        "input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
    }
    if masked:
        spec.update({
            "masked_lm_positions": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
            "masked_lm_ids": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
            "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq],
                                                       tf.float32),
        })
    if next_sentence:
        spec["next_sentence_labels"] = tf.io.FixedLenFeature([1], tf.int64)
    if word_starts:
        spec[masking.WORD_STARTS] = tf.io.FixedLenFeature(
            [max_seq_length], tf.int64, default_value=[1] * max_seq_length)
    return spec


def int_feature(values) -> tf.train.Feature:
    """A `tf.train.Feature` of int64 `values` (any iterable of ints)."""
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def _first_record_has(input_files, compression, name):
    """Whether the first record of the first file has the feature `name`."""
    files = expand_input_files(input_files)
    compression_type = resolve_compression(files[:1], compression)
    for _, example in _read_examples(files[0], compression_type, 1):
        return name in example.features.feature
    return False


def records_carry_masks(input_files, compression="auto"):
    """Whether the first record of the first file has `masked_lm_positions`."""
    return _first_record_has(input_files, compression, "masked_lm_positions")


def records_carry_word_starts(input_files, compression="auto"):
    """Whether the first record of the first file has `word_starts` (written by
    create_pretraining_data --masking=none with a word segmenter)."""
    return _first_record_has(input_files, compression, masking.WORD_STARTS)


def _read_examples(path, compression_type, count=None):
    """Yields (index, tf.train.Example) of the first `count` records (None: all).

    Raises:
        ValueError: naming the file when it is not a TFRecord file of that compression.
    """
    dataset = tf.data.TFRecordDataset(path, compression_type=compression_type,
                                      buffer_size=READ_BUFFER_BYTES)
    if count is not None:
        dataset = dataset.take(count)
    try:
        for index, serialized in enumerate(dataset):
            yield index, tf.train.Example.FromString(serialized.numpy())
    except tf.errors.DataLossError as error:
        # TF's message carries the op's name and trace around the one useful phrase.
        detail = re.sub(r"\{\{.*?\}\}|\[Op:.*$", "", error.message, flags=re.S).strip()
        raise ValueError(f"{path}: not a readable TFRecord file (compression "
                         f"{compression_type or 'none'!r}): {detail}") from None


# Which flag sets the length of each pre-training feature, for error messages.
_LENGTH_FLAGS = {
    "input_ids": "max_seq_length", "input_mask": "max_seq_length",
    "segment_ids": "max_seq_length", masking.WORD_STARTS: "max_seq_length",
    "masked_lm_positions": "max_predictions_per_seq",
    "masked_lm_ids": "max_predictions_per_seq",
    "masked_lm_weights": "max_predictions_per_seq",
}


# Files that sit beside TFRecord shards and must not be read as records when a glob such as
# `wiki.tfrecord*` matches them: create_pretraining_data's statistics, and the temporary
# names of shards still being written (or left by a killed run).
_SIDE_FILE_PATTERN = re.compile(r"(\.stats\.json|\.tmp-\d+)$")


def expand_input_files(input_patterns):
    """The files of comma-separated paths and globs (a string or a list of them), through
    `bert_tf.io.input_paths.expand_input_paths` (a path that exists is that file, even with
    glob characters in its name); each pattern's matches sorted.

    Glob matches that are side files (`*.stats.json`, `*.tmp-<pid>`) are left out; a path
    named exactly is always kept.

    Raises:
        ValueError: naming a path that is no file or a pattern that matches none.
    """
    return input_paths.expand_input_paths(
        input_patterns, "input_file", match=tf.io.gfile.glob, exists=tf.io.gfile.exists,
        keep=lambda path: not _SIDE_FILE_PATTERN.search(path))


def detect_compression(path):
    """"GZIP" when the file starts with the gzip magic bytes, else "" (plain TFRecord)."""
    with tf.io.gfile.GFile(path, "rb") as stream:
        head = stream.read(2)
    return "GZIP" if head == _GZIP_MAGIC else ""


def resolve_compression(files, compression="auto"):
    """The TFRecord compression type shared by `files` ("" for none).

    Raises:
        ValueError: for an unknown `compression` or files that mix compressions.
    """
    if compression not in COMPRESSION_TYPES:
        raise ValueError(f"compression must be one of {COMPRESSION_TYPES}, got {compression!r}")
    if compression != "auto":
        return "" if compression == "none" else compression
    kinds = {path: detect_compression(path) for path in files}
    if len(set(kinds.values())) > 1:
        gz = next(p for p, k in kinds.items() if k)
        plain = next(p for p, k in kinds.items() if not k)
        raise ValueError(f"input files mix compressions: {gz} is gzip, {plain} is not; "
                         "pass one kind, or set the compression explicitly")
    return next(iter(kinds.values()))


def _feature_length(feature):
    kind = feature.WhichOneof("kind")
    return len(getattr(feature, kind).value) if kind else 0


def check_record_shapes(files, name_to_features, compression_type="", records_per_file=1):
    """Checks the first `records_per_file` records (None: all) of every file.

    Raises:
        ValueError: naming the file, the record, the feature, its length and the expected
            length (and the flag that sets it), or the missing feature.
    """
    for path in files:
        for index, example in _read_examples(path, compression_type, records_per_file):
            _check_example(path, index, example, name_to_features)


def _check_example(path, index, example, name_to_features):
    features = example.features.feature
    for name, spec in name_to_features.items():
        if not isinstance(spec, tf.io.FixedLenFeature):
            continue
        if name not in features:
            if spec.default_value is None:
                raise ValueError(f"{path}: record {index} has no feature {name!r} "
                                 f"(has {sorted(features)})")
            continue
        expected = 1
        for dim in spec.shape:
            expected *= dim
        got = _feature_length(features[name])
        if got != expected:
            flag = _LENGTH_FLAGS.get(name)
            hint = f" (--{flag}={expected}; the records were made with {got})" if flag else ""
            raise ValueError(f"{path}: record {index}, feature {name!r} has {got} values, "
                             f"expected {expected}{hint}")


def explain_parse_error(input_files, name_to_features, compression="auto"):
    """After tf.data failed to parse a batch: finds and names the offending record.

    Scans every record of every file (slow; only called on failure).

    Raises:
        ValueError: naming the file, record and feature, when one is found.
    """
    files = expand_input_files(input_files)
    check_record_shapes(files, name_to_features, resolve_compression(files, compression),
                        records_per_file=None)


def _shard_files(files, input_context):
    """Files of this input pipeline, and whether records still need sharding."""
    if input_context is None or input_context.num_input_pipelines == 1:
        return files, False
    count, index = input_context.num_input_pipelines, input_context.input_pipeline_id
    if len(files) >= count:
        return files[index::count], False
    return files, True


def _parse_batch(serialized, name_to_features):
    parsed = tf.io.parse_example(serialized, name_to_features)
    # TPUs (and our models) take int32; tf.Example stores int64.
    return {name: tf.cast(t, tf.int32) if t.dtype == tf.int64 else t
            for name, t in parsed.items()}


def tfrecord_dataset(input_files, name_to_features, global_batch_size, is_training,
                     input_context=None, compression="auto", drop_remainder=True,
                     shuffle_buffer_size=100, cycle_length=4, seed=None,
                     check_shapes=True, repeat=None):
    """Batched, parsed dataset over TFRecord files for one input pipeline.

    Args:
        input_files: File paths or comma-separated globs.
        name_to_features: Feature spec for `tf.io.parse_example`.
        global_batch_size: Batch over all replicas; each replica gets
            `global_batch_size / num_replicas_in_sync` examples per batch.
        is_training: Shuffle and repeat (training) or read once in order (eval).
        input_context: The `tf.distribute.InputContext` of this pipeline, or None.
        compression: "auto" (detect gzip), "none", "GZIP" or "ZLIB".
        drop_remainder: Drop the last partial batch (static shapes, TPU).
        shuffle_buffer_size: Record shuffle buffer (training).
        cycle_length: Files read in parallel (training).
        seed: Shuffle seed (None: nondeterministic order).
        check_shapes: Check the first record of every file against the spec.
        repeat: Repeat forever; defaults to `is_training`.

    Returns:
        A `tf.data.Dataset` of feature dicts, int64 features cast to int32.
    """
    files = expand_input_files(input_files)
    compression_type = resolve_compression(files, compression)
    if check_shapes:
        check_record_shapes(files, name_to_features, compression_type)
    batch_size = global_batch_size
    if input_context is not None:
        batch_size = input_context.get_per_replica_batch_size(global_batch_size)
    files, shard_records = _shard_files(files, input_context)
    repeat = is_training if repeat is None else repeat

    def read(path):
        return tf.data.TFRecordDataset(path, compression_type=compression_type,
                                       buffer_size=READ_BUFFER_BYTES)

    dataset = tf.data.Dataset.from_tensor_slices(tf.constant(files))
    if is_training:
        dataset = dataset.shuffle(len(files), seed=seed)
        dataset = dataset.interleave(
            read, cycle_length=min(cycle_length, len(files)),
            num_parallel_calls=tf.data.AUTOTUNE, deterministic=seed is not None)
    else:
        dataset = dataset.flat_map(read)
    if shard_records:
        dataset = dataset.shard(input_context.num_input_pipelines,
                                input_context.input_pipeline_id)
    if is_training and shuffle_buffer_size:
        dataset = dataset.shuffle(shuffle_buffer_size, seed=seed)
    # Shuffle, then repeat: every epoch is one whole pass over the records, in a fresh
    # order (repeating first would let the shuffle buffer mix epochs, so that some
    # records are seen three times and others never in a short run).
    if repeat:
        dataset = dataset.repeat()
    dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    dataset = dataset.map(lambda records: _parse_batch(records, name_to_features),
                          num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.prefetch(tf.data.AUTOTUNE)


def pretraining_dataset(input_files, max_seq_length, max_predictions_per_seq,
                        global_batch_size, is_training, input_context=None, *,
                        masking_options=None, max_sequences_per_row=None,
                        next_sentence=True, packing_window=1024, **kwargs):
    """The pre-training pipeline; `kwargs` go to `tfrecord_dataset`.

    Args:
        masking_options: A `masking.MaskingOptions`: the records have no masks and get
            new ones drawn for every batch of instances (dynamic masking, seeded by
            `kwargs["seed"]`). None: the records' own masks. With whole-word masking,
            records that carry `word_starts` (segmented Chinese text) group their words
            by it too.
        max_sequences_per_row: Pack up to this many instances into one row of
            `max_seq_length` (see `sequence_packing`); None: one instance a row.
        next_sentence: Read `next_sentence_labels` (False: masked LM only).
        packing_window: Instances packed together (per input pipeline).
    """
    word_starts = (masking_options is not None and masking_options.whole_word_masking
                   and records_carry_word_starts(input_files, kwargs.get("compression", "auto")))
    spec = pretraining_features(max_seq_length, max_predictions_per_seq,
                                masked=masking_options is None, next_sentence=next_sentence,
                                word_starts=word_starts)
    if masking_options is None and max_sequences_per_row is None:
        return tfrecord_dataset(input_files, spec, global_batch_size, is_training,
                                input_context=input_context, **kwargs)
    replicas = input_context.num_replicas_in_sync if input_context else 1
    batch_size = global_batch_size // replicas
    drop_remainder = kwargs.pop("drop_remainder", True)
    packing = max_sequences_per_row is not None
    # Instances are read in windows: a batch (masking only), or a packing window whose
    # last, partial one is packed too.
    dataset = tfrecord_dataset(
        input_files, spec, (packing_window if packing else batch_size) * replicas,
        is_training, input_context=input_context,
        drop_remainder=drop_remainder and not packing, **kwargs)
    if masking_options is not None:
        seed = kwargs.get("seed")
        if seed is None and not is_training:
            seed = 0  # the same eval masks every time
        dataset = masking.mask_dataset(dataset, masking_options, seed=seed)
    if packing:
        dataset = sequence_packing.pack_dataset(
            dataset, max_seq_length, max_sequences_per_row, max_predictions_per_seq,
            next_sentence)
        if is_training:  # rows come out longest first: mix them
            dataset = dataset.shuffle(packing_window, seed=kwargs.get("seed"))
        dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    return dataset.prefetch(tf.data.AUTOTUNE)
