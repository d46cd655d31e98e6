"""The BERT input layout: `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`, padded with 0.

The one place that knows how segments become the three model inputs of the Python
feature writers (classification, feature extraction, NER, SQuAD); `input_layout_graph` is its
twin in TensorFlow ops for the exported SavedModels, tested equal to it:

* input_ids: `[CLS]`, each segment followed by `[SEP]`, then 0 up to max_seq_length;
* input_mask: 1 on those positions, 0 on the padding;
* segment_ids: segment `i` and its `[SEP]` get `i` (`[CLS]` 0), the padding 0.

A pair that is too long is cut longest-first, as google-research/bert's
`_truncate_seq_pair` (ties cut the second segment); a single segment keeps its first
`max_seq_length - 2` tokens.

Plain Python, no TensorFlow: the SQuAD data side (and its evaluator) imports it.
"""

CLS, SEP = "[CLS]", "[SEP]"


def truncate_seq_pair(tokens_a, tokens_b, max_length):
    """Pops tokens off the longer list (ties: the second) until both fit, in place.

    Args:
      tokens_a: first segment (a list, shortened in place).
      tokens_b: second segment (a list, shortened in place).
      max_length: most items the two lists may hold together.
    """
    while len(tokens_a) + len(tokens_b) > max_length:
        (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()


def truncate_segments(tokens_a, tokens_b, max_seq_length):
    """The segments cut to fit `max_seq_length` with `[CLS]` and their `[SEP]`s.

    Args:
      tokens_a: first segment.
      tokens_b: second segment, or None for a single segment (an empty list is a pair).
      max_seq_length: total length, special tokens included.

    Returns:
      `[a]` cut to `max_seq_length - 2` items, or `[a, b]` cut longest-first to
      `max_seq_length - 3` items together; new lists (the arguments are not changed).
    """
    if tokens_b is None:
        return [list(tokens_a[:max_seq_length - 2])]
    tokens_a, tokens_b = list(tokens_a), list(tokens_b)
    truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
    return [tokens_a, tokens_b]


def join_segments(segments, cls, sep):
    """`cls s0 sep (s1 sep ...)` unpadded, with the segment id of every item.

    Args:
      segments: lists of tokens, ids or per-token values.
      cls: the item before the first segment (`"[CLS]"`, its id, a label for it).
      sep: the item after each segment.

    Returns:
      (items, segment_ids): two lists of the same length.
    """
    items, segment_ids = [cls], [0]
    for index, segment in enumerate(segments):
        items += list(segment) + [sep]
        segment_ids += [index] * (len(segment) + 1)
    return items, segment_ids


def pad(values, max_seq_length, value=0):
    """`values` followed by `value` up to `max_seq_length` items (a new list).

    Raises:
      ValueError: when `values` holds more than `max_seq_length` items.
    """
    if len(values) > max_seq_length:
        raise ValueError(f"{len(values)} positions do not fit max_seq_length "
                         f"{max_seq_length}; truncate the segments first")
    return list(values) + [value] * (max_seq_length - len(values))


def pad_inputs(input_ids, segment_ids, max_seq_length):
    """(input_ids, input_mask, segment_ids) of a joined sequence, padded with 0."""
    return (pad(input_ids, max_seq_length), pad([1] * len(input_ids), max_seq_length),
            pad(segment_ids, max_seq_length))


def pack_segments(segments, cls_id, sep_id, max_seq_length):
    """Model inputs of one example from its segments of token ids.

    Args:
      segments: 1 or 2 lists of token ids, already cut to fit (`truncate_segments`).
      cls_id: id of `[CLS]`.
      sep_id: id of `[SEP]`.
      max_seq_length: length of each returned list.

    Returns:
      (input_ids, input_mask, segment_ids): lists of `max_seq_length` ints.
    """
    return pad_inputs(*join_segments(segments, cls_id, sep_id), max_seq_length)


def pack_tokens(segments, convert_tokens_to_ids, max_seq_length):
    """`pack_segments` of segments of WordPiece tokens, with the joined tokens.

    Args:
      segments: 1 or 2 lists of tokens, already cut to fit (`truncate_segments`).
      convert_tokens_to_ids: tokens -> ids (e.g. `FullTokenizer.convert_tokens_to_ids`).
      max_seq_length: length of each returned list of ids.

    Returns:
      (tokens `[CLS] s0 [SEP] (s1 [SEP])` unpadded, (input_ids, input_mask, segment_ids)).
    """
    tokens, segment_ids = join_segments(segments, CLS, SEP)
    return tokens, pad_inputs(list(convert_tokens_to_ids(tokens)), segment_ids,
                              max_seq_length)


def pack_values(segments, max_seq_length, fill=0):
    """Per-token values (labels, weights, word indexes) where `pack_segments` puts
    their tokens; `fill` at `[CLS]`, at each `[SEP]` and on the padding."""
    values, _ = join_segments(segments, fill, fill)
    return pad(values, max_seq_length, fill)
