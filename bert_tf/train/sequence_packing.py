"""Packing pre-training instances into rows: several sequences share one row.

At sequence length 512 about half of a batch of BERT instances is padding. Packing
puts up to `max_sequences_per_row` instances into one row of `max_seq_length` tokens
(as MLPerf's packed BERT): each keeps its own tokens and segment ids, its position ids
restart at 0, `sequence_ids` (1, 2, ... per instance, 0 for padding) give the
block-diagonal attention mask in the encoder, its masked-LM positions are shifted to
where it sits in the row, and `next_sentence_positions` point at its own [CLS].

Rows are filled by best-fit decreasing bin packing over a window of instances: the
instances of the window, longest first, each go into the fullest row that still has
room for it and fewer than `max_sequences_per_row` instances (a new row otherwise).

Packed features (R rows, S = max_seq_length, K = max_sequences_per_row, P =
max_predictions_per_seq + K - 1 masked-LM slots, a second limit of the bin packing):
    input_ids, input_mask, segment_ids, position_ids, sequence_ids   [R, S]
    masked_lm_positions, masked_lm_ids, masked_lm_weights            [R, P]
    next_sentence_positions, next_sentence_labels, next_sentence_weights   [R, K]
(`next_sentence_*` only when the instances carry `next_sentence_labels`).
"""

import numpy as np
import tensorflow as tf

from bert_tf.train.choices import check_max_sequences_per_row

ROW_FEATURES = ("input_ids", "input_mask", "segment_ids", "position_ids", "sequence_ids")
PREDICTION_FEATURES = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")


def instance_lengths(input_mask, max_seq_length):
    """Real tokens per instance [N] of a padding mask [N, S_in].

    Raises:
        ValueError: naming the first instance longer than `max_seq_length`, or one whose
            tokens are not a prefix of its row.
    """
    input_mask = np.asarray(input_mask) > 0
    lengths = input_mask.sum(axis=1)
    too_long = np.nonzero(lengths > max_seq_length)[0]
    if len(too_long):
        index = int(too_long[0])
        raise ValueError(
            f"instance {index} of the packing window has {int(lengths[index])} tokens, "
            f"more than max_seq_length={max_seq_length}: a packed row cannot hold it "
            "(write the records with a max_seq_length no larger than the packed rows')")
    columns = np.arange(input_mask.shape[1])[None, :]
    not_prefix = np.nonzero((input_mask != (columns < lengths[:, None])).any(axis=1))[0]
    if len(not_prefix):
        raise ValueError(f"instance {int(not_prefix[0])} of the packing window has "
                         "padding before its last token: expected input_mask 1...1 0...0")
    return lengths.astype(np.int64)


def assign_rows(lengths, max_seq_length, max_sequences_per_row, predictions=None,
                max_predictions_per_row=None):
    """Best-fit decreasing packing of instances of `lengths` into rows.

    With `predictions` (masked tokens per instance), a row also holds at most
    `max_predictions_per_row` of them.

    Returns:
        (row, offset, slot, num_rows): per instance its row, the position of its first
        token in the row, and its 0-based slot among the row's instances (in the order
        they were placed; offsets grow with the slot).
    """
    check_max_sequences_per_row(max_sequences_per_row)
    lengths = np.asarray(lengths, dtype=np.int64)
    count = len(lengths)
    if predictions is None:
        predictions, max_predictions_per_row = np.zeros([count], np.int64), 0
    predictions = np.asarray(predictions, dtype=np.int64)
    predicted = np.zeros([count], np.int64)  # masked tokens per row
    row = np.zeros([count], np.int64)
    offset = np.zeros([count], np.int64)
    slot = np.zeros([count], np.int64)
    used = np.zeros([count], np.int64)  # tokens per row (at most one row per instance)
    filled = np.zeros([count], np.int64)  # instances per row
    num_rows = 0
    for index in np.argsort(-lengths, kind="stable"):
        length = lengths[index]
        room = ((used[:num_rows] + length <= max_seq_length)
                & (filled[:num_rows] < max_sequences_per_row)
                & (predicted[:num_rows] + predictions[index] <= max_predictions_per_row))
        if room.any():
            # The fullest row that fits (best fit): fewest tokens left afterwards.
            target = int(np.argmax(np.where(room, used[:num_rows], -1)))
        else:
            target, num_rows = num_rows, num_rows + 1
        row[index], offset[index], slot[index] = target, used[target], filled[target]
        used[target] += length
        filled[target] += 1
        predicted[target] += predictions[index]
    return row, offset, slot, num_rows


def default_predictions_per_row(max_predictions_per_seq, max_sequences_per_row):
    """Masked-LM slots of a packed row: those of one full instance plus one per extra
    sequence (each instance masks round(prob * length), at least 1), enough for the
    instances that share a row's tokens; an instance that would overflow them starts a
    new row (never dropped)."""
    return max_predictions_per_seq + max_sequences_per_row - 1


def pack_rows(features, max_seq_length, max_sequences_per_row, token_features=(),
              instance_features=(), predictions=None, max_predictions_per_row=None):
    """Moves a window of instances (numpy dict, leading axis N) into packed rows.

    Args:
        features: `input_ids`, `input_mask` and `segment_ids` [N, S_in], plus the
            features named below.
        max_seq_length: Row length S (at least S_in's longest instance).
        max_sequences_per_row: K, at least 1.
        token_features: Names of features [N, S_in] with one value per token (token
            labels and their weights): moved with the tokens, 0 elsewhere.
        instance_features: Names of features [N] or [N, 1] with one value per instance
            (a sentence label): one slot per instance of the row, [R, K].
        predictions, max_predictions_per_row: A second limit of the bin packing (see
            `assign_rows`).

    Returns:
        (packed, placement): the row features (`ROW_FEATURES`), the token and instance
        features, `cls_positions` int32 [R, K] (the position of each instance's first
        token, its [CLS]) and `sequence_weights` float32 [R, K] (1.0 for an instance, 0.0
        for an empty slot); placement is `assign_rows`' (row, offset, slot, num_rows).
    """
    lengths = instance_lengths(features["input_mask"], max_seq_length)
    row, offset, slot, num_rows = assign_rows(lengths, max_seq_length,
                                              max_sequences_per_row, predictions,
                                              max_predictions_per_row)
    seq_in = np.asarray(features["input_ids"]).shape[1]
    columns = np.arange(seq_in)[None, :]
    token = columns < lengths[:, None]  # [N, S_in]
    rows = np.broadcast_to(row[:, None], token.shape)[token]
    cols = (offset[:, None] + columns)[token]

    def move_tokens(values, dtype=np.int32):
        moved = np.zeros([num_rows, max_seq_length], dtype)
        moved[rows, cols] = np.asarray(values)[token]
        return moved

    packed = {"input_ids": move_tokens(features["input_ids"]),
              "input_mask": move_tokens(np.ones(token.shape)),
              "segment_ids": move_tokens(features["segment_ids"]),
              "position_ids": move_tokens(np.broadcast_to(columns, token.shape)),
              "sequence_ids": move_tokens(np.broadcast_to(slot[:, None] + 1, token.shape))}
    for name in token_features:
        packed[name] = move_tokens(features[name], np.asarray(features[name]).dtype)
    k = max_sequences_per_row
    for name in instance_features:
        values = np.asarray(features[name])
        packed[name] = np.zeros([num_rows, k], values.dtype)
        packed[name][row, slot] = values.reshape(len(lengths))
    packed["cls_positions"] = np.zeros([num_rows, k], np.int32)
    packed["cls_positions"][row, slot] = offset
    packed["sequence_weights"] = np.zeros([num_rows, k], np.float32)
    packed["sequence_weights"][row, slot] = 1.0
    return packed, (row, offset, slot, num_rows)


def pack_instances(features, max_seq_length, max_sequences_per_row,
                   max_predictions_per_row=None):
    """Packs a window of pre-training instances (numpy dict, leading axis N) into rows.

    Args:
        features: `input_ids`, `input_mask`, `segment_ids` [N, S_in] and
            `masked_lm_positions`, `masked_lm_ids`, `masked_lm_weights` [N, P_in],
            optionally `next_sentence_labels` [N] or [N, 1].
        max_seq_length: Row length S (at least S_in's longest instance).
        max_sequences_per_row: K, at least 1.
        max_predictions_per_row: Masked-LM slots of a row (default:
            `default_predictions_per_row`).

    Returns:
        dict of the packed features (see the module docstring), int32 / float32.
    """
    predictions_in = np.asarray(features["masked_lm_weights"]).shape[1]
    if max_predictions_per_row is None:
        max_predictions_per_row = default_predictions_per_row(predictions_in,
                                                              max_sequences_per_row)
    if max_predictions_per_row < predictions_in:
        raise ValueError(f"max_predictions_per_row={max_predictions_per_row} is less than "
                         f"the instances' max_predictions_per_seq={predictions_in}")
    counts = (np.asarray(features["masked_lm_weights"]) > 0).sum(axis=1)
    next_sentence = "next_sentence_labels" in features
    packed, (row, offset, slot, num_rows) = pack_rows(
        features, max_seq_length, max_sequences_per_row,
        instance_features=("next_sentence_labels",) if next_sentence else (),
        predictions=counts, max_predictions_per_row=max_predictions_per_row)
    packed.update(_pack_predictions(features, row, offset, slot, num_rows,
                                    max_predictions_per_row))
    cls_positions, sequence_weights = packed.pop("cls_positions"), packed.pop(
        "sequence_weights")
    if next_sentence:
        packed["next_sentence_positions"] = cls_positions
        packed["next_sentence_labels"] = packed["next_sentence_labels"].astype(np.int32)
        packed["next_sentence_weights"] = sequence_weights
    return packed


def _pack_predictions(features, row, offset, slot, num_rows, size):
    """Masked-LM slots of each row: its instances' predictions one after the other."""
    weights = np.asarray(features["masked_lm_weights"]) > 0  # [N, P_in]
    counts = weights.sum(axis=1)
    # Slots before an instance in its row: the predictions of the row's earlier slots.
    order = np.lexsort((slot, row))
    before = np.zeros_like(counts)
    running = np.cumsum(counts[order]) - counts[order]
    row_start = np.zeros([num_rows], np.int64)
    first_of_row = np.ones(len(order), bool)
    first_of_row[1:] = row[order][1:] != row[order][:-1]
    row_start[row[order][first_of_row]] = running[first_of_row]
    before[order] = running - row_start[row[order]]
    out = {"masked_lm_positions": np.zeros([num_rows, size], np.int32),
           "masked_lm_ids": np.zeros([num_rows, size], np.int32),
           "masked_lm_weights": np.zeros([num_rows, size], np.float32)}
    instances, index = np.nonzero(weights)
    rank = np.cumsum(weights, axis=1)[instances, index] - 1
    rows, cols = row[instances], before[instances] + rank
    out["masked_lm_positions"][rows, cols] = (
        offset[instances] + np.asarray(features["masked_lm_positions"])[instances, index])
    out["masked_lm_ids"][rows, cols] = np.asarray(features["masked_lm_ids"])[instances, index]
    out["masked_lm_weights"][rows, cols] = 1.0
    return out


def packed_feature_spec(max_seq_length, max_sequences_per_row, max_predictions_per_seq,
                        next_sentence=True):
    """name -> (dtype, shape without the batch axis) of the packed features."""
    spec = {name: (tf.int32, [max_seq_length]) for name in ROW_FEATURES}
    predictions = default_predictions_per_row(max_predictions_per_seq,
                                              max_sequences_per_row)
    spec.update(masked_lm_positions=(tf.int32, [predictions]),
                masked_lm_ids=(tf.int32, [predictions]),
                masked_lm_weights=(tf.float32, [predictions]))
    if next_sentence:
        spec.update(next_sentence_positions=(tf.int32, [max_sequences_per_row]),
                    next_sentence_labels=(tf.int32, [max_sequences_per_row]),
                    next_sentence_weights=(tf.float32, [max_sequences_per_row]))
    return spec


def pack_dataset(dataset, max_seq_length, max_sequences_per_row, max_predictions_per_seq,
                 next_sentence=True):
    """Packs a dataset of pre-training instance windows (batched dicts) into rows.

    Each element of `dataset` is a window of parsed instances; the result has one
    packed row per element (unbatched), to be batched again.
    """
    check_max_sequences_per_row(max_sequences_per_row)
    spec = packed_feature_spec(max_seq_length, max_sequences_per_row,
                               max_predictions_per_seq, next_sentence)
    inputs = ["input_ids", "input_mask", "segment_ids", *PREDICTION_FEATURES]
    if next_sentence:
        inputs.append("next_sentence_labels")
    return map_windows(dataset, inputs, spec, lambda window: pack_instances(
        window, max_seq_length, max_sequences_per_row))


def map_windows(dataset, input_names, spec, pack_fn):
    """Rows of `pack_fn(window)` for each window of `dataset`, unbatched.

    Args:
        dataset: Windows of instances (dicts of batched tensors).
        input_names: The window's features that `pack_fn` reads.
        spec: name -> (dtype, shape without the row axis) of what it returns.
        pack_fn: numpy dict of the window -> numpy dict of packed rows.
    """
    names = list(spec)

    def pack_numpy(*arrays):
        packed = pack_fn(dict(zip(input_names, arrays)))
        return [packed[name].astype(spec[name][0].as_numpy_dtype) for name in names]

    def pack(window):
        arrays = tf.numpy_function(pack_numpy, [window[name] for name in input_names],
                                   [spec[name][0] for name in names], stateful=False)
        packed = {}
        for name, array in zip(names, arrays):
            array.set_shape([None] + spec[name][1])
            packed[name] = array
        return packed

    return dataset.map(pack, num_parallel_calls=tf.data.AUTOTUNE).unbatch()
