"""Sentence-embedding data: scored pairs (GLUE STS-B, your own files), pairs and
triplets for in-batch negatives, their token features and datasets.

A file is `.tsv` / `.csv` with a header, or `.jsonl` (one object a line); columns by
name (`text_files.read_records`):

- scored pairs: `sentence1_column`, `sentence2_column` and `score_column` (GLUE STS-B's
  `sentence1`, `sentence2`, `score` by default, so an STS-B folder reads as it is);
  every score must lie in [min_score, max_score] (STS-B: 0 .. 5) and becomes
  (score - min) / (max - min), in 0 .. 1, for the losses;
- pairs (anchor, positive) for in-batch negatives: the two text columns;
- triplets (anchor, positive, negative): the two text columns and `negative_column`.

Every text is its own model row, `[CLS] text [SEP]` cut to max_seq_length (segment 0);
an example's rows follow one another in a batch: [B, T, S] inputs are laid out as
[B * T, S] (T = 2 or 3 texts an example), which is what `SentenceEncoder` takes.

Bad input is refused before any work, naming file and line: a missing column (a pair
file with one column), an empty text, a score that is not a number or lies outside the
declared range.
"""

import dataclasses
import os
from typing import Optional

import numpy as np
import tensorflow as tf

from bert_tf.runs import text_files
from bert_tf.text import input_layout, input_layout_graph
from bert_tf.train import sequence_packing

FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids")
DATA_EXTENSIONS = (".tsv", ".csv", ".jsonl", ".json")
# The file names of a split in data_dir (GLUE: train.tsv, dev.tsv, test.tsv).
SPLIT_NAMES = {"train": ("train",), "eval": ("dev", "validation", "val"),
               "predict": ("test",)}


@dataclasses.dataclass(frozen=True)
class Columns:
    """Which columns hold what (see the module docstring); `negative` / `score` None:
    not read."""
    sentence1: str = "sentence1"
    sentence2: str = "sentence2"
    negative: Optional[str] = None
    score: Optional[str] = "score"
    min_score: float = 0.0
    max_score: float = 5.0


@dataclasses.dataclass
class PairData:
    """The rows of one file.

    Attributes:
      path: The file read.
      texts: [N] tuples of 2 (pairs) or 3 (triplets) texts.
      scores: float32 [N] gold scores normalized to 0 .. 1, or None (not read).
      raw_scores: float64 [N] scores as written, or None.
      sources: [N] "file:line" of each row, for messages.
    """
    path: str
    texts: list
    scores: Optional[np.ndarray]
    raw_scores: Optional[np.ndarray]
    sources: list

    @property
    def texts_per_row(self) -> int:
        return len(self.texts[0])


def find_file(data_dir: Optional[str], split: str) -> str:
    """The file of `split` in data_dir: `<name>.tsv/.csv/.jsonl/.json` for the split's
    names (GLUE: train.tsv, dev.tsv).

    Raises:
      ValueError / FileNotFoundError: naming the paths tried and the flag to pass.
    """
    flag = f"{split}_file"
    if not data_dir:
        raise ValueError(f"do_{split} needs data: pass --{flag} or --data_dir")
    candidates = [os.path.join(data_dir, name + ext) for name in SPLIT_NAMES[split]
                  for ext in DATA_EXTENSIONS]
    for path in candidates:
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(f"no {split} file in {data_dir}: expected one of "
                            f"{', '.join(candidates)} (or pass --{flag})")


def read_pairs(path: str, columns: Columns, with_scores: bool,
               with_negatives: bool = False) -> PairData:
    """The rows of `path` (see the module docstring).

    Args:
      with_scores: Read and check `columns.score` on every row.
      with_negatives: Read `columns.negative` too (triplets).

    Raises:
      ValueError: naming file and line: a missing column, an empty or non-string text, a
        score that is not a number or is outside [min_score, max_score], no rows.
    """
    names = [columns.sentence1, columns.sentence2]
    names += [columns.negative] if with_negatives else []
    texts, raw, sources = [], [], []
    for line_number, record in text_files.read_records(path):
        source = f"{path}:{line_number}"
        texts.append(tuple(_text(record, name, source, names) for name in names))
        if with_scores:
            raw.append(_score(record, columns, path, line_number))
        sources.append(source)
    if not texts:
        raise ValueError(f"{path}: no rows (the file is empty or holds only a header)")
    raw_scores = np.array(raw, np.float64) if with_scores else None
    scores = None
    if with_scores:
        span = columns.max_score - columns.min_score
        scores = ((raw_scores - columns.min_score) / span).astype(np.float32)
    return PairData(path, texts, scores, raw_scores, sources)


def _text(record, name, source, names) -> str:
    if name not in record:
        raise ValueError(
            f"{source}: no column {name!r} (columns: {', '.join(map(str, record))}); each "
            f"row needs the text columns {', '.join(map(repr, names))} (a pair file has "
            "two, set by --sentence1_column and --sentence2_column; a triplet file a third, "
            "--negative_column)")
    value = record[name]
    if not isinstance(value, str):
        raise ValueError(f"{source}: column {name!r} holds {text_files.json_type(value)}; "
                         "expected a string")
    if not value.strip():
        raise ValueError(f"{source}: column {name!r} is empty; every row needs its texts")
    return value


def _score(record, columns: Columns, path, line_number) -> float:
    source = f"{path}:{line_number}"
    if columns.score not in record:
        raise ValueError(f"{source}: no score column {columns.score!r} (columns: "
                         f"{', '.join(map(str, record))}); scored pairs need one "
                         "(--score_column)")
    value = record[columns.score]
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"{source}: score column {columns.score!r} holds "
                         f"{text_files.json_type(value)}; expected a number")
    score = text_files.parse_float(str(value), path, line_number, "score")
    if not columns.min_score <= score <= columns.max_score:
        raise ValueError(f"{source}: score {score:g} is outside the declared range "
                         f"{columns.min_score:g} .. {columns.max_score:g} (--min_score, "
                         "--max_score)")
    return score


def text_features(texts, tokenizer, max_seq_length) -> dict:
    """int32 `input_ids`, `input_mask`, `segment_ids` [N, max_seq_length]: each text
    `[CLS] text [SEP]`, its first max_seq_length - 2 sub-tokens kept."""
    ids = tokenizer.convert_texts_to_ids(list(texts))
    cls_id = tokenizer.vocab[input_layout.CLS]
    sep_id = tokenizer.vocab[input_layout.SEP]
    arrays = {name: np.zeros((len(ids), max_seq_length), np.int32) for name in FEATURE_NAMES}
    for index, text_ids in enumerate(ids):
        segments = input_layout.truncate_segments(text_ids, None, max_seq_length)
        packed = input_layout.pack_segments(segments, cls_id, sep_id, max_seq_length)
        for name, values in zip(FEATURE_NAMES, packed):
            arrays[name][index] = values
    return arrays


def encode_rows(data: PairData, tokenizer, max_seq_length) -> dict:
    """The features of `data`'s rows: inputs int32 [N, T, S] (T texts a row) and, for
    scored rows, `scores` float32 [N]."""
    count = data.texts_per_row
    flat = text_features([text for row in data.texts for text in row], tokenizer,
                        max_seq_length)
    arrays = {name: values.reshape(len(data.texts), count, max_seq_length)
              for name, values in flat.items()}
    if data.scores is not None:
        arrays["scores"] = data.scores
    return arrays


def flatten_rows(batch):
    """[B, T, S] inputs -> [B * T, S] (an example's texts one after the other)."""
    flat = dict(batch)
    for name in FEATURE_NAMES:
        shape = tf.shape(batch[name])
        flat[name] = tf.reshape(batch[name], [-1, shape[-1]])
    return flat


# A packed batch's features: [R, S] rows, and [R, K] slots (`text_number`: the 1-based
# position of the slot's text in the batch's text order, 0 for an empty slot).
PACKED_ROW_NAMES = FEATURE_NAMES + ("position_ids", "sequence_ids")
PACKED_SLOT_NAMES = ("cls_positions", "text_number")


def pack_batch(batch, max_sequences_per_row):
    """A batch's texts [T, S] packed into rows [R, S] of up to `max_sequences_per_row`
    texts each (best fit; each text attends only to itself, its position ids restart
    at 0), with `cls_positions` and `text_number` [R, K]; other features pass unchanged.

    The batch keeps its texts: the model puts the pooled vectors back in text order
    (`model.pool_packed_tokens`), so the loss and the step are those of the unpacked
    batch; only the padding goes.
    """
    length = batch["input_ids"].shape[-1]

    def pack(*arrays):
        texts = dict(zip(FEATURE_NAMES, arrays))
        texts["text_number"] = np.arange(1, len(arrays[0]) + 1, dtype=np.int32)
        packed, _ = sequence_packing.pack_rows(texts, length, max_sequences_per_row,
                                               instance_features=("text_number",))
        return [packed[name].astype(np.int32)
                for name in PACKED_ROW_NAMES + PACKED_SLOT_NAMES]

    names = PACKED_ROW_NAMES + PACKED_SLOT_NAMES
    values = tf.numpy_function(pack, [batch[name] for name in FEATURE_NAMES],
                               [tf.int32] * len(names), stateful=False)
    packed = dict(batch)
    for name, value in zip(names, values):
        value.set_shape([None, length if name in PACKED_ROW_NAMES
                         else max_sequences_per_row])
        packed[name] = value
    return packed


def pairs_dataset(arrays, batch_size, is_training, seed=None, input_context=None,
                  trim_padding=False, max_sequences_per_row=None):
    """Batches of an example's texts as consecutive rows: inputs int32 [B * T, S] and
    `scores` [B] when the rows have them (B: the replica's share of `batch_size`).

    Training shuffles (indexes only: a checkpointed iterator stays small), repeats and
    keeps full batches; otherwise one pass in order. With `max_sequences_per_row` each
    batch's texts are packed into rows (`pack_batch`; a varying number of rows). With
    `trim_padding` each batch is cut to its longest text (row) (not for TPU / XLA).
    """
    count = len(arrays["input_ids"])
    per_replica = (input_context.get_per_replica_batch_size(batch_size)
                   if input_context else batch_size)
    constants = {name: tf.constant(values) for name, values in arrays.items()}
    dataset = tf.data.Dataset.range(count)
    if input_context and input_context.num_input_pipelines > 1:
        dataset = dataset.shard(input_context.num_input_pipelines,
                                input_context.input_pipeline_id)
    if is_training:
        dataset = dataset.shuffle(count, seed=seed, reshuffle_each_iteration=True).repeat()
    dataset = dataset.batch(per_replica, drop_remainder=is_training)
    dataset = dataset.map(lambda index: flatten_rows(
        {name: tf.gather(values, index) for name, values in constants.items()}))
    if max_sequences_per_row:
        dataset = dataset.map(lambda batch: pack_batch(batch, max_sequences_per_row),
                              num_parallel_calls=tf.data.AUTOTUNE)
    if trim_padding:
        dataset = dataset.map(lambda batch: input_layout_graph.trim_to_longest(
            batch, PACKED_ROW_NAMES))
    return dataset.prefetch(tf.data.AUTOTUNE)


def texts_dataset(arrays, batch_size, input_context=None, trim_padding=True):
    """One pass over single texts [N, S] in batches, with `text_index` [B] (the row of
    each text in `arrays`; -1 on padding rows), for encoding.

    With several replicas the replicas of one step get batches of one shape (the
    predictions of a step are concatenated): the texts are padded with copies of the
    first, marked -1, to whole steps, and a step's batches are trimmed together.
    """
    replicas = input_context.num_replicas_in_sync if input_context else 1
    pipelines = input_context.num_input_pipelines if input_context else 1
    per_replica = (input_context.get_per_replica_batch_size(batch_size)
                   if input_context else batch_size)
    count = len(arrays["input_ids"])
    rows, text_index = np.arange(count), np.arange(count, dtype=np.int32)
    local_batch = per_replica * max(1, replicas // pipelines)  # this pipeline's step
    if replicas > 1:
        padding = -count % (local_batch * pipelines)
        rows = np.concatenate([rows, np.zeros(padding, np.int64)])
        text_index = np.concatenate([text_index, np.full(padding, -1, np.int32)])
    features = {name: values[rows] for name, values in arrays.items()}
    dataset = tf.data.Dataset.from_tensor_slices(dict(features, text_index=text_index))
    if pipelines > 1:
        dataset = dataset.shard(pipelines, input_context.input_pipeline_id)
    dataset = dataset.batch(local_batch)
    if trim_padding:
        dataset = dataset.map(input_layout_graph.trim_to_longest)
    if local_batch != per_replica:
        dataset = dataset.unbatch().batch(per_replica)
    return dataset.prefetch(tf.data.AUTOTUNE)
