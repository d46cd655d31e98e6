"""Writes pre-training TFRecords in google-research/bert's feature layout, for tests.

The token stream is learnable: every sequence counts upwards modulo a small range
(`token[i + 1] = token[i] + 1`), so a masked token is predictable from its neighbours
while the most frequent token covers only a small share of the masked positions.
"""

import os

import numpy as np
import tensorflow as tf

FIRST_TOKEN = 5  # ids below are [PAD], [UNK], [CLS], [SEP], [MASK] by convention
CLS_ID, SEP_ID, MASK_ID = 2, 3, 4


def _int64(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def _float(values):
    return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))


def make_example(rng, seq_length, max_predictions, vocab_size, num_masked=None):
    """One tf.train.Example; returns (example, masked_lm_ids)."""
    length = int(rng.integers(seq_length // 2, seq_length + 1))
    span = vocab_size - FIRST_TOKEN
    start = int(rng.integers(0, span))
    tokens = [CLS_ID] + [FIRST_TOKEN + (start + i) % span for i in range(length - 2)] + [SEP_ID]
    cut = len(tokens) // 2
    segment_ids = [0] * cut + [1] * (len(tokens) - cut)
    candidates = list(range(1, len(tokens) - 1))
    count = num_masked or int(rng.integers(1, max_predictions + 1))
    count = min(count, len(candidates))
    positions = sorted(rng.choice(candidates, size=count, replace=False).tolist())
    masked_ids = [tokens[p] for p in positions]
    for p in positions:
        tokens[p] = MASK_ID
    pad = seq_length - len(tokens)
    pred_pad = max_predictions - count
    features = {
        "input_ids": _int64(tokens + [0] * pad),
        "input_mask": _int64([1] * len(tokens) + [0] * pad),
        "segment_ids": _int64(segment_ids + [0] * pad),
        "masked_lm_positions": _int64(positions + [0] * pred_pad),
        "masked_lm_ids": _int64(masked_ids + [0] * pred_pad),
        "masked_lm_weights": _float([1.0] * count + [0.0] * pred_pad),
        "next_sentence_labels": _int64([int(rng.integers(0, 2))]),
    }
    return tf.train.Example(features=tf.train.Features(feature=features)), masked_ids


def write_records(directory, num_files, records_per_file, seq_length=16,
                  max_predictions=3, vocab_size=99, seed=0, gzip_files=False,
                  num_masked=None, prefix="records"):
    """Writes `num_files` files; returns (paths, all masked-LM target ids)."""
    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(seed)
    paths, targets = [], []
    for index in range(num_files):
        path = os.path.join(directory, f"{prefix}-{index:05d}.tfrecord")
        payload = []
        for _ in range(records_per_file):
            example, masked = make_example(rng, seq_length, max_predictions, vocab_size,
                                           num_masked)
            payload.append(example.SerializeToString())
            targets.extend(masked)
        options = "GZIP" if gzip_files else None
        if gzip_files:
            path += ".gz"
        with tf.io.TFRecordWriter(path, options=options) as writer:
            for record in payload:
                writer.write(record)
        paths.append(path)
    return paths, targets


def is_gzip(path):
    with open(path, "rb") as stream:
        return stream.read(2) == b"\x1f\x8b"


