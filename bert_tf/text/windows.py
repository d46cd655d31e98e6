"""Overlapping windows over a token sequence too long for one model input.

The one place that cuts a long sequence into windows, as google-research/bert's
`run_squad.py` does: each window holds at most `capacity` tokens, consecutive windows
start `doc_stride` tokens apart, and the last window ends at the end of the sequence.
SQuAD windows its contexts with `make_doc_spans`; a long classification document is
windowed by `window_segments`, here for the Python feature writers and in
`windows_graph` (its twin in TensorFlow ops, tested equal) for the exported SavedModels.

The classification rule (`window_segments`):

* one text: windows of `max_seq_length - 2` tokens (`[CLS] window [SEP]`);
* a pair: the second text is windowed and the first is repeated whole in every window,
  `[CLS] a [SEP] window of b [SEP]`. A pair that fits is left as it is (one window, the
  features of truncation). When it does not fit, the first text keeps at most
  `first_segment_budget(max_seq_length)` tokens (half the pair's room) and the windows
  of the second text get the rest: `max_seq_length - 3 - len(kept a)` tokens.

`window_capacity` is the smallest room a window has (what `doc_stride` must stay below so
that every token is in some window). Plain Python, no TensorFlow: the SQuAD data side
imports it.
"""

import collections

DocSpan = collections.namedtuple("DocSpan", ["start", "length"])
# How the outputs of a document's windows combine into the document's.
POOLINGS = ("mean", "max")


def make_doc_spans(num_doc_tokens, max_tokens_for_doc, doc_stride):
    """Windows over the context: each at most `max_tokens_for_doc` long, advancing by
    `min(length, doc_stride)`, the last one ending at the end of the context."""
    doc_spans = []
    start_offset = 0
    while start_offset < num_doc_tokens:
        length = min(num_doc_tokens - start_offset, max_tokens_for_doc)
        doc_spans.append(DocSpan(start=start_offset, length=length))
        if start_offset + length == num_doc_tokens:
            break
        start_offset += min(length, doc_stride)
    return doc_spans


def first_segment_budget(max_seq_length: int) -> int:
    """Most tokens the first text of a pair keeps when the pair is windowed."""
    return (max_seq_length - 3) // 2


def window_capacity(max_seq_length: int, pair: bool) -> int:
    """The fewest tokens of the windowed text that a window holds.

    Args:
      max_seq_length: total length, `[CLS]` and `[SEP]`s included.
      pair: the examples are pairs (the second text is windowed).
    """
    if not pair:
        return max_seq_length - 2
    return max_seq_length - 3 - first_segment_budget(max_seq_length)


def default_stride(max_seq_length: int, pair: bool) -> int:
    """`doc_stride` when none is given: half the window's capacity (at least 1)."""
    return max(1, window_capacity(max_seq_length, pair) // 2)


def check_stride(doc_stride: int, max_seq_length: int, pair: bool) -> None:
    """Refuses a stride that would skip tokens (>= the capacity) or never advance.

    Raises:
      ValueError: naming doc_stride and the window's capacity.
    """
    capacity = window_capacity(max_seq_length, pair)
    room = (f"max_seq_length={max_seq_length} leaves {capacity} tokens a window"
            + (" for the second text of a pair, whose first text keeps up to "
               f"{first_segment_budget(max_seq_length)}" if pair else "")
            + " beside [CLS] and [SEP]")
    if isinstance(doc_stride, bool) or int(doc_stride) != doc_stride or doc_stride <= 0:
        raise ValueError(f"doc_stride must be a positive integer, got {doc_stride} "
                         f"({room}); pass a doc_stride from 1 to {capacity - 1}")
    if doc_stride >= capacity:
        raise ValueError(f"doc_stride={doc_stride} must be smaller than the window's "
                         f"capacity {capacity} ({room}), or windows would skip tokens or "
                         f"not overlap; pass a doc_stride from 1 to {capacity - 1}, or a "
                         "larger max_seq_length")


def document_spans(num_tokens: int, capacity: int, doc_stride: int) -> list:
    """`make_doc_spans`, with one empty window for a text without tokens."""
    return make_doc_spans(num_tokens, capacity, doc_stride) or [DocSpan(0, 0)]


def window_segments(tokens_a, tokens_b, max_seq_length: int, doc_stride: int) -> list:
    """The segments of every window of one example (see the module docstring).

    Args:
      tokens_a: tokens (or ids) of the first text.
      tokens_b: tokens of the second text, or None for one text.
      max_seq_length: total length of a window, special tokens included.
      doc_stride: tokens between the starts of consecutive windows (below the capacity).

    Returns:
      A list (one item per window, at least one) of `[a window]` or
      `[a kept, b window]`: what `input_layout.pack_tokens` / `pack_segments` packs.
    """
    if tokens_b is None:
        spans = document_spans(len(tokens_a), max_seq_length - 2, doc_stride)
        return [[list(tokens_a[span.start:span.start + span.length])] for span in spans]
    room = max_seq_length - 3
    keep_a = len(tokens_a) if len(tokens_a) + len(tokens_b) <= room else min(
        len(tokens_a), first_segment_budget(max_seq_length))
    first = list(tokens_a[:keep_a])
    spans = document_spans(len(tokens_b), room - keep_a, doc_stride)
    return [[first, list(tokens_b[span.start:span.start + span.length])] for span in spans]
