"""`bert_tf.text.input_layout` in TensorFlow ops: the same layout, for ragged batches in a graph.

`truncate_ragged_segments` cuts as `input_layout.truncate_segments` (longest-first pairs) and
`pack_inputs` lays out and pads as `input_layout.pack_segments`; `bert_tf.serving.signatures`
builds the SavedModels' text signatures from them. `trim_to_longest` cuts padded batches
to their longest row (the fine-tuning input pipelines and the served classifier).
"""

import tensorflow as tf

from bert_tf.models.encoder import INPUT_NAMES


def truncate_rows(ragged, lengths):
    """Keeps the first `lengths[b]` items of each row of a ragged [B, (T), ...]."""
    positions = tf.ragged.range(ragged.row_lengths())  # [B, (T)]
    keep = positions < tf.expand_dims(tf.cast(lengths, tf.int64), 1)  # [B, (T)]
    return tf.ragged.boolean_mask(ragged, keep)


def pair_lengths(length_a, length_b, budget):
    """Token counts that `input_layout.truncate_seq_pair` keeps (longest first, ties cut b).

    Args:
      length_a: int64 [B] token counts of the first segments.
      length_b: int64 [B] token counts of the second segments.
      budget: tokens allowed in total.

    Returns:
      (keep_a, keep_b) int64 [B].
    """
    budget = tf.cast(budget, tf.int64)  # a Python int, or a tensor (bert_pack_inputs)
    half_b = budget // 2
    half_a = budget - half_b
    keep_a = tf.where(length_a + length_b <= budget, length_a,
                      tf.where(length_a <= half_a, length_a,
                               tf.where(length_b <= half_b, budget - length_b, half_a)))
    keep_b = tf.minimum(length_b, budget - keep_a)
    return keep_a, keep_b


def truncate_ragged_segments(ids_a, ids_b, max_seq_length):
    """`input_layout.truncate_segments` in the graph.

    Args:
      ids_a: ragged int64 [B, (T)] first segments.
      ids_b: ragged int64 [B, (T)] second segments, or None.
      max_seq_length: total length, special tokens included.

    Returns:
      A list of 1 or 2 ragged int64 [B, (T)], cut to fit.
    """
    if ids_b is None:
        return [truncate_rows(ids_a, tf.minimum(ids_a.row_lengths(), max_seq_length - 2))]
    keep_a, keep_b = pair_lengths(ids_a.row_lengths(), ids_b.row_lengths(),
                                  max_seq_length - 3)
    return [truncate_rows(ids_a, keep_a), truncate_rows(ids_b, keep_b)]


def pack_inputs(segments, cls_id, sep_id, max_seq_length):
    """`input_layout.pack_segments` in the graph: dict of int32 [B, max_seq_length] model inputs.

    Args:
      segments: 1 or 2 ragged int64 [B, (T)], already cut to fit.
      cls_id: id of `[CLS]`.
      sep_id: id of `[SEP]`.
      max_seq_length: length of the padded rows.
    """
    batch = segments[0].nrows()

    def column(value):  # [B, (1)]
        return tf.RaggedTensor.from_tensor(tf.fill([batch, 1], tf.constant(value, tf.int64)))

    pieces, types = [column(cls_id)], [column(0)]
    for index, segment in enumerate(segments):
        pieces += [segment, column(sep_id)]
        types += [tf.ones_like(segment) * index, column(index)]
    input_ids = tf.concat(pieces, axis=1)  # [B, (S)]
    segment_ids = tf.concat(types, axis=1)  # [B, (S)]
    shape = [None, max_seq_length]
    return {
        "input_ids": tf.cast(input_ids.to_tensor(0, shape=shape), tf.int32),
        "input_mask": tf.cast(tf.ones_like(input_ids).to_tensor(0, shape=shape), tf.int32),
        "segment_ids": tf.cast(segment_ids.to_tensor(0, shape=shape), tf.int32),
    }


def trim_to_longest(batch, sequence_keys=INPUT_NAMES):
    """Cuts a batch's padded features [..., S] to its longest `input_mask` row [..., L].

    Padding is masked out of attention, so the outputs at the kept positions (and the
    pooled output) are those of the padded rows; a batch of short rows then costs what its
    tokens cost, not what `max_seq_length` costs. Works for [B, S] and [B, C, S] alike;
    features not in `sequence_keys` pass unchanged.
    """
    length = tf.reduce_max(tf.reduce_sum(tf.cast(batch["input_mask"], tf.int32), axis=-1))
    length = tf.maximum(length, 1)
    return {name: value[..., :length] if name in sequence_keys else value
            for name, value in batch.items()}
