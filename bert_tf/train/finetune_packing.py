"""Packing fine-tuning examples into rows (`--pack_sequences` of run_classifier, run_ner).

Sentence(-pair) classification and tagging rows are short: an SST-2 sentence is about
25 tokens of a 128-token row. Packing puts up to `max_sequences_per_row` examples into
one row, as `sequence_packing` does for pre-training instances: position ids restart at
0 in each example and `sequence_ids` give each example an attention mask of its own, so
that every example's logits equal its logits alone.

Packed training rows (R rows, S = max_seq_length, K = max_sequences_per_row):
    input_ids, input_mask, segment_ids, position_ids, sequence_ids   [R, S]
    token features (token labels and their weights)                  [R, S]
    instance features (a sentence's label)                           [R, K]
    cls_positions (each example's [CLS]), sequence_weights (1 / 0)   [R, K]

A training batch keeps `train_batch_size` examples on average: it is that many examples
divided by the examples per row (measured on the training set), in rows. The number of
optimizer steps, the schedule and the learning rate of a recipe stay the same, and each
step does less work.
"""

import dataclasses

import numpy as np
import tensorflow as tf

from bert_tf.train import sequence_packing
from bert_tf.train.choices import check_max_sequences_per_row

PACKING_WINDOW = 1024  # examples packed together


@dataclasses.dataclass(frozen=True)
class PackingPlan:
    """How a training set packs: rows, and a batch of rows for a batch of examples."""
    examples: int
    rows: int
    rows_per_batch: int
    real_tokens: int
    max_seq_length: int

    @property
    def examples_per_row(self) -> float:
        return self.examples / self.rows

    @property
    def padding_share(self) -> float:
        """Padding of the packed rows: 1 - real tokens / (rows * S)."""
        return 1.0 - self.real_tokens / (self.rows * self.max_seq_length)

    @property
    def unpacked_padding_share(self) -> float:
        """Padding of the same examples one a row, at max_seq_length."""
        return 1.0 - self.real_tokens / (self.examples * self.max_seq_length)

    def describe(self) -> str:
        return (f"{self.examples} examples pack into {self.rows} rows of "
                f"{self.max_seq_length} ({self.examples_per_row:.2f} a row; padding "
                f"{self.padding_share:.1%} packed, {self.unpacked_padding_share:.1%} "
                f"unpacked); a batch is {self.rows_per_batch} rows")


def plan_packing(lengths, max_seq_length, max_sequences_per_row, train_batch_size,
                 num_replicas=1, window=PACKING_WINDOW) -> PackingPlan:
    """Packs the training examples of `lengths` window by window (in their order) and
    sizes a batch of rows to hold `train_batch_size` examples on average.

    The batch is rounded to a multiple of `num_replicas` (each replica gets whole rows).
    """
    check_max_sequences_per_row(max_sequences_per_row)
    lengths = np.asarray(lengths, np.int64)
    if not len(lengths):
        raise ValueError("plan_packing: no training examples to pack")
    rows = 0
    for start in range(0, len(lengths), window):
        rows += sequence_packing.assign_rows(lengths[start:start + window], max_seq_length,
                                             max_sequences_per_row)[3]
    per_row = len(lengths) / rows
    rows_per_batch = max(1, round(train_batch_size / per_row / num_replicas)) * num_replicas
    return PackingPlan(len(lengths), rows, rows_per_batch, int(lengths.sum()),
                       max_seq_length)


def packed_spec(max_seq_length, max_sequences_per_row, token_features, instance_features):
    """name -> (dtype, shape without the row axis) of packed fine-tuning rows.

    Args:
        token_features, instance_features: name -> tf dtype.
    """
    spec = {name: (tf.int32, [max_seq_length]) for name in sequence_packing.ROW_FEATURES}
    spec.update({name: (tf.as_dtype(dtype), [max_seq_length])
                 for name, dtype in token_features.items()})
    spec.update({name: (tf.as_dtype(dtype), [max_sequences_per_row])
                 for name, dtype in instance_features.items()})
    spec.update(cls_positions=(tf.int32, [max_sequences_per_row]),
                sequence_weights=(tf.float32, [max_sequences_per_row]))
    return spec


def packed_batches(windows, rows_per_batch, max_seq_length, max_sequences_per_row,
                   token_features=None, instance_features=None, seed=None):
    """Batches of packed rows from a dataset of example windows (batched dicts).

    Args:
        windows: Windows of examples with `input_ids`, `input_mask`, `segment_ids` and
            the features below.
        rows_per_batch: Rows a batch (per input pipeline).
        token_features, instance_features: name -> tf dtype (see `pack_rows`).
        seed: Seed of the row shuffle (rows come out of a window longest first).
    """
    token_features, instance_features = token_features or {}, instance_features or {}
    spec = packed_spec(max_seq_length, max_sequences_per_row, token_features,
                       instance_features)
    inputs = ["input_ids", "input_mask", "segment_ids", *token_features, *instance_features]

    def pack(window):
        return sequence_packing.pack_rows(window, max_seq_length, max_sequences_per_row,
                                          tuple(token_features), tuple(instance_features))[0]

    rows = sequence_packing.map_windows(windows, inputs, spec, pack)
    rows = rows.shuffle(PACKING_WINDOW, seed=seed)
    return rows.batch(rows_per_batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE)


def is_packed(features) -> bool:
    """True for a batch of packed rows (it carries `sequence_weights`)."""
    return "sequence_weights" in features


def weighted_mean(per_example, weights):
    """sum(per_example * weights) / sum(weights) (at least 1): the mean over the real
    examples of packed rows, whose empty slots weigh 0."""
    weights = tf.cast(weights, tf.float32)
    return tf.reduce_sum(per_example * weights) / tf.maximum(tf.reduce_sum(weights), 1.0)
