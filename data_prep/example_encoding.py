"""Serialized `tf.train.Example` bytes for pre-training instances, built with numpy.

Building `tf.train.Example` protos in Python costs tens of microseconds per record, more
than making the instance. The wire format is simple, so the bytes are written directly:

    Example  { Features features = 1; }
    Features { map<string, Feature> feature = 1; }  # entries: key = 1, value = 2
    Feature  { FloatList float_list = 2; Int64List int64_list = 3; }
    Int64List { repeated int64 value = 1 [packed]; }  # varints
    FloatList { repeated float value = 1 [packed]; }  # little-endian float32

The features are those of google-research/bert's create_pretraining_data.py, and the
records parse with its feature spec (`bert_tf.train.records.pretraining_features`). No
TensorFlow import here, so worker processes stay small.
"""

from typing import Dict, List, Sequence, Tuple

import numpy as np

INT_FEATURES = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                "masked_lm_ids", "next_sentence_labels", "word_starts")
FLOAT_FEATURES = ("masked_lm_weights",)
# word_starts (ours, optional): 1 where a token starts a word, for dynamic whole-word
# masking of segmented (Chinese) text; other readers ignore it.
FEATURE_ORDER = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                 "masked_lm_ids", "masked_lm_weights", "next_sentence_labels", "word_starts")


def encode_varint(value: int) -> bytes:
    """Protobuf base-128 varint of a non-negative integer."""
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


_VARINTS = [encode_varint(n) for n in range(1 << 14)]


def _varint(value: int) -> bytes:
    return _VARINTS[value] if value < (1 << 14) else encode_varint(value)


def _entry_prefix(key: bytes, list_field: int, payload_length: int) -> bytes:
    """Bytes of a Features map entry up to its packed payload."""
    packed = b"\x0a" + _varint(payload_length)
    list_length = len(packed) + payload_length
    feature = bytes([(list_field << 3) | 2]) + _varint(list_length) + packed
    feature_length = len(feature) + payload_length
    entry = b"\x0a" + _varint(len(key)) + key + b"\x12" + _varint(feature_length) + feature
    entry_length = len(entry) + payload_length
    return b"\x0a" + _varint(entry_length) + entry


# Byte masks of a varint of 0..8 bytes held little-endian in a 4- or 8-byte word.
_KEEP_BYTES = {width: np.array([(1 << (8 * n)) // 255 for n in range(width + 1)],
                               dtype=f"<u{width}") for width in (4, 8)}


def varint_rows(values: np.ndarray) -> Tuple[bytes, np.ndarray]:
    """Packed varints of each row of a non-negative integer matrix.

    Each value's varint is built in a little-endian 4-byte word (8 bytes past 2**28),
    then the used bytes of all words are kept in order (one boolean selection).

    Returns:
      (blob, offsets): row i is blob[offsets[i]:offsets[i + 1]].
    """
    values = np.asarray(values)  # [N, L]
    max_value = int(values.max()) if values.size else 0
    if max_value >= (1 << 32):
        raise ValueError("varint_rows handles values below 2**32")
    values = values.astype(np.uint32)
    num_groups = max(1, (max_value.bit_length() + 6) // 7)
    width = 4 if num_groups <= 4 else 8
    word = np.dtype(f"<u{width}")
    num_bytes = np.ones(values.shape, dtype=np.uint8)
    for group in range(1, num_groups):
        num_bytes += values >= (1 << (7 * group))
    words = (values & 0x7F).astype(word)  # [N, L]
    for group in range(num_groups):
        if group:
            words |= ((values >> (7 * group)) & 0x7F).astype(word) << (8 * group)
        if group < num_groups - 1:  # the continuation bit of byte `group`
            words |= (num_bytes > group + 1).astype(word) << (8 * group + 7)
    keep = _KEEP_BYTES[width][num_bytes].view(np.uint8).view(bool)  # [N, L * width]
    blob = words.view(np.uint8)[keep].tobytes()
    offsets = np.zeros([values.shape[0] + 1], dtype=np.int64)
    np.cumsum(num_bytes.sum(axis=1, dtype=np.int64), out=offsets[1:])
    return blob, offsets


def _fixed_block(features: Dict[str, np.ndarray], names: Sequence[str]) -> np.ndarray:
    """[N, C] uint8: the complete map entries of features with a fixed byte size."""
    columns = []
    for name in names:
        array = features[name]
        if name in FLOAT_FEATURES:
            payload = np.ascontiguousarray(array, dtype="<f4").view(np.uint8)
            payload = payload.reshape(array.shape[0], -1)
            prefix = _entry_prefix(name.encode(), 2, payload.shape[1])
        else:
            payload = np.asarray(array).astype(np.uint8)  # values < 128: one byte each
            prefix = _entry_prefix(name.encode(), 3, payload.shape[1])
        prefix_array = np.frombuffer(prefix, dtype=np.uint8)
        columns.append(np.broadcast_to(prefix_array, (payload.shape[0], len(prefix))))
        columns.append(payload)
    return np.concatenate(columns, axis=1)


def serialize_examples(features: Dict[str, np.ndarray]) -> List[bytes]:
    """Serialized tf.train.Example bytes, one per row of the [N, L] feature arrays.

    Args:
      features: FEATURE_ORDER names to arrays with N rows (2-D; int features
        non-negative, masked_lm_weights float); `input_ids` and the others present
        (rows without masks or next-sentence labels leave those out).
    """
    arrays = {name: np.asarray(features[name]).reshape(len(features[name]), -1)
              for name in FEATURE_ORDER if name in features}
    num_rows = arrays["input_ids"].shape[0]
    fixed_names, variable_names = [], []
    for name in arrays:
        array = arrays[name]
        small = name in INT_FEATURES and (array.size == 0 or (array.min() >= 0 and array.max() < 128))
        if name in FLOAT_FEATURES or small:
            fixed_names.append(name)
        else:
            if array.size and array.min() < 0:
                raise ValueError(f"feature {name}: negative values are not supported")
            variable_names.append(name)
    fixed = _fixed_block(arrays, fixed_names).tobytes()
    fixed_width = len(fixed) // max(num_rows, 1)
    columns = []  # per feature: the prefixes, then the payloads, one bytes per row
    body_lengths = np.full([num_rows], fixed_width, dtype=np.int64)
    for name in variable_names:
        blob, offsets = varint_rows(arrays[name])
        lengths = np.diff(offsets)
        prefixes = _by_value(lengths, lambda n: _entry_prefix(name.encode(), 3, n))
        columns.append(prefixes)
        body_lengths += np.fromiter(map(len, prefixes), dtype=np.int64, count=num_rows) + lengths
        bounds = offsets.tolist()
        columns.append([blob[a:b] for a, b in zip(bounds[:-1], bounds[1:])])
    columns.append([fixed[i:i + fixed_width] for i in range(0, num_rows * fixed_width, fixed_width)])
    headers = _by_value(body_lengths, lambda n: b"\x0a" + _varint(n))  # Example's field 1
    return list(map(b"".join, zip(headers, *columns)))


def _by_value(values: np.ndarray, make) -> List[bytes]:
    """[make(v) for v in values], calling `make` once per distinct value."""
    unique, index = np.unique(values, return_inverse=True)
    made = [make(value) for value in unique.tolist()]
    return list(map(made.__getitem__, index.tolist()))
