"""`bert_tf.text.windows` in TensorFlow ops: the same windows, for ragged batches in a graph.

`window_ragged_segments` cuts a batch of texts (or pairs) into the windows that
`windows.window_segments` makes, as ragged tensors that `input_layout_graph.pack_inputs`
packs; `bert_tf.serving.signatures` builds the long-document classifier signature from
it. Core TensorFlow ops only (ragged ranges and gathers), so it serves in TF Serving.
"""

import tensorflow as tf

from bert_tf.text import input_layout_graph, windows


def window_starts(lengths, capacities, doc_stride):
    """Where the windows of each sequence start, as `windows.document_spans` places them.

    Args:
      lengths: int64 [B] tokens of each sequence.
      capacities: int64 [B] tokens a window of that sequence holds.
      doc_stride: tokens between the starts of consecutive windows (< every capacity).

    Returns:
      (starts int64 [N], window_lengths int64 [N], document int64 [N]): the windows of
      all sequences in order (N >= B: at least one, maybe empty, per sequence) and the
      index of the sequence each belongs to.
    """
    stride = tf.constant(doc_stride, tf.int64)
    beyond_first = tf.maximum(lengths - capacities, 0)  # [B]
    counts = 1 + (beyond_first + stride - 1) // stride  # [B]
    starts = tf.ragged.range(counts, dtype=tf.int64) * stride  # [B, (W)]
    document = starts.value_rowids()  # [N]
    starts = starts.flat_values  # [N]
    window_lengths = tf.minimum(tf.gather(capacities, document),
                                tf.gather(lengths, document) - starts)
    return starts, window_lengths, document


def slice_windows(ragged, starts, window_lengths, document):
    """The tokens of each window: ragged [N, (L)] from a ragged [B, (T)]."""
    offsets = tf.gather(ragged.row_splits[:-1], document) + starts  # [N]
    positions = tf.ragged.range(offsets, offsets + window_lengths)  # [N, (L)]
    return tf.gather(ragged.values, positions)


def window_ragged_segments(ids_a, ids_b, max_seq_length, doc_stride):
    """`windows.window_segments` for a batch.

    Args:
      ids_a: ragged int64 [B, (T)] first texts.
      ids_b: ragged int64 [B, (T)] second texts, or None.
      max_seq_length: total length of a window, special tokens included.
      doc_stride: tokens between the starts of consecutive windows.

    Returns:
      (segments, document): a list of 1 or 2 ragged int64 [N, (T)], cut to fit, and
      int64 [N] the example each window belongs to (in order, every example at least
      once).
    """
    if ids_b is None:
        lengths = ids_a.row_lengths()  # [B]
        capacities = tf.fill(tf.shape(lengths), tf.constant(max_seq_length - 2, tf.int64))
        starts, window_lengths, document = window_starts(lengths, capacities, doc_stride)
        return [slice_windows(ids_a, starts, window_lengths, document)], document
    room = max_seq_length - 3
    length_a, length_b = ids_a.row_lengths(), ids_b.row_lengths()  # [B]
    keep_a = tf.where(length_a + length_b <= room, length_a,
                      tf.minimum(length_a, windows.first_segment_budget(max_seq_length)))
    starts, window_lengths, document = window_starts(length_b, room - keep_a, doc_stride)
    first = tf.gather(input_layout_graph.truncate_rows(ids_a, keep_a), document)
    return [first, slice_windows(ids_b, starts, window_lengths, document)], document
