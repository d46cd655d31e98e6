"""Sequence packing: bin packing, packed features, and parity with unpacked instances."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.layers import packed_attention_mask
from bert_tf.models import BertEncoder, BertPretrainer, pretraining_losses
from bert_tf.train import records, sequence_packing
from harness import random_sequences, tiny_config, tiny_model

SEQ_IN, PREDICTIONS, ROW_LENGTH, PER_ROW = 16, 3, 40, 3


def _instances(count, seed=0, min_length=5, max_length=SEQ_IN):
    """Unpacked instances [count, SEQ_IN] of random lengths, masks and labels."""
    rng = np.random.default_rng(seed)
    rows = random_sequences(rng, count, SEQ_IN, min_length, max_length)
    ids, lengths = rows["input_ids"], rows["lengths"]
    positions = np.zeros((count, PREDICTIONS), np.int32)
    weights = np.zeros((count, PREDICTIONS), np.float32)
    for row, length in enumerate(lengths):
        num_masked = min(rng.integers(1, PREDICTIONS + 1), length - 2)
        chosen = np.sort(rng.choice(np.arange(1, length - 1), num_masked, replace=False))
        positions[row, :len(chosen)] = chosen
        weights[row, :len(chosen)] = 1.0
    return {"input_ids": ids, "input_mask": rows["input_mask"],
            "segment_ids": rows["segment_ids"], "masked_lm_positions": positions,
            "masked_lm_ids": np.take_along_axis(ids, positions, 1) * (weights > 0),
            "masked_lm_weights": weights,
            "next_sentence_labels": rng.integers(0, 2, (count, 1)).astype(np.int32)}


def test_assign_rows_best_fit_decreasing_by_hand():
    # 10 -> row 0; 7 does not fit there -> row 1; 6 fits both, the fuller row 0 takes
    # it (16); 5 and 3 go to row 1 (7 + 5 + 3 = 15).
    row, offset, slot, num_rows = sequence_packing.assign_rows([10, 7, 6, 5, 3], 16, 3)
    assert num_rows == 2
    assert row.tolist() == [0, 1, 0, 1, 1]
    assert offset.tolist() == [0, 0, 10, 7, 12]
    assert slot.tolist() == [0, 0, 1, 1, 2]
    # At most max_sequences_per_row a row, whatever room is left.
    row, _, _, num_rows = sequence_packing.assign_rows([1] * 7, 16, 3)
    assert num_rows == 3 and np.bincount(row).tolist() == [3, 3, 1]
    # And at most max_predictions_per_row masked tokens a row: 4 + 3 > 6 opens a row.
    row, _, _, num_rows = sequence_packing.assign_rows([5, 4, 3], 16, 3, [4, 3, 2], 6)
    assert num_rows == 2 and row.tolist() == [0, 1, 0]


def test_packed_features_are_the_instances_moved_into_rows():
    features = _instances(20)
    packed = sequence_packing.pack_instances(features, ROW_LENGTH, PER_ROW)
    lengths = features["input_mask"].sum(1)
    assert packed["input_mask"].sum() == lengths.sum()
    assert len(packed["input_ids"]) < len(lengths)  # fewer rows than instances
    assert (packed["sequence_ids"].max(1) <= PER_ROW).all()
    # Every instance is found at its [CLS], with its tokens, segments and positions.
    for row in range(len(packed["input_ids"])):
        for slot in np.nonzero(packed["next_sentence_weights"][row])[0]:
            start = packed["next_sentence_positions"][row, slot]
            span = packed["sequence_ids"][row] == slot + 1
            tokens = packed["input_ids"][row][span]
            matches = [i for i in range(len(lengths)) if lengths[i] == len(tokens) and (
                features["input_ids"][i, :lengths[i]] == tokens).all()]
            assert matches, (row, slot)
            index = matches[0]
            assert np.nonzero(span)[0][0] == start
            assert (packed["position_ids"][row][span] == np.arange(len(tokens))).all()
            assert (packed["segment_ids"][row][span]
                    == features["segment_ids"][index, :len(tokens)]).all()
            assert (packed["next_sentence_labels"][row, slot]
                    == features["next_sentence_labels"][index, 0])
    # Masked positions point at their labels in the row; as many as before.
    real = packed["masked_lm_weights"] > 0
    assert real.sum() == (features["masked_lm_weights"] > 0).sum()
    at = np.take_along_axis(packed["input_ids"], packed["masked_lm_positions"], 1)
    assert (at[real] == packed["masked_lm_ids"][real]).all()


def test_bad_input_is_refused_with_the_reason():
    features = _instances(4)
    with pytest.raises(ValueError, match="instance 1 of the packing window has 16 tokens, "
                                         "more than max_seq_length=12"):
        features["input_mask"][0, 12:] = 0
        features["input_mask"][1, :] = 1
        sequence_packing.pack_instances(features, 12, 3)
    for bad in (0, -1):
        with pytest.raises(ValueError, match=f"max_sequences_per_row={bad}: a packed row "
                                             "must hold at least one sequence"):
            sequence_packing.assign_rows([3], 16, bad)


def test_packed_attention_mask_is_block_diagonal():
    mask = packed_attention_mask(tf.constant([[1, 1, 2, 2, 2, 0]])).numpy()[0]
    expected = np.zeros((6, 6), np.int32)
    expected[:2, :2] = 1
    expected[2:5, 2:5] = 1
    np.testing.assert_array_equal(mask, expected)


def test_encoder_takes_a_3d_mask_and_position_ids_like_the_2d_mask():
    model = tiny_model(BertEncoder, tiny_config(), seed=3)
    features = _instances(4)
    plain = model({k: features[k] for k in ("input_ids", "input_mask", "segment_ids")})
    mask_3d = features["input_mask"][:, None, :] * np.ones((1, SEQ_IN, 1), np.int32)
    other = model({"input_ids": features["input_ids"], "input_mask": mask_3d,
                   "segment_ids": features["segment_ids"],
                   "position_ids": np.tile(np.arange(SEQ_IN), (4, 1))})
    np.testing.assert_allclose(other["sequence_output"], plain["sequence_output"],
                               atol=1e-6)
    shifted = model({**{k: features[k] for k in ("input_ids", "input_mask", "segment_ids")},
                     "position_ids": np.tile(np.arange(SEQ_IN) + 1, (4, 1))})
    assert not np.allclose(shifted["sequence_output"], plain["sequence_output"], atol=1e-3)


def _pretrainer_outputs(model, features):
    return {k: v.numpy() for k, v in model(
        {k: tf.constant(v) for k, v in features.items()}, training=False).items()}


def test_packed_logits_and_losses_equal_the_unpacked_ones():
    model = tiny_model(BertPretrainer, tiny_config(), seed=5)
    features = _instances(12, seed=1)
    alone = _pretrainer_outputs(model, features)
    packed = sequence_packing.pack_instances(features, ROW_LENGTH, PER_ROW)
    assert len(packed["input_ids"]) <= 6  # really packed, several instances a row
    together = _pretrainer_outputs(model, packed)
    lengths = features["input_mask"].sum(1)
    found = 0
    for row in range(len(packed["input_ids"])):
        for slot in np.nonzero(packed["next_sentence_weights"][row])[0]:
            span = packed["sequence_ids"][row] == slot + 1
            index = next(i for i in range(len(lengths)) if lengths[i] == span.sum() and (
                features["input_ids"][i, :lengths[i]] == packed["input_ids"][row][span]).all())
            np.testing.assert_allclose(together["next_sentence_logits"][row, slot],
                                       alone["next_sentence_logits"][index], atol=1e-5)
            start = np.nonzero(span)[0][0]
            for p in range(PREDICTIONS):
                if features["masked_lm_weights"][index, p] == 0:
                    continue
                where = np.nonzero((packed["masked_lm_positions"][row] ==
                                    start + features["masked_lm_positions"][index, p])
                                   & (packed["masked_lm_weights"][row] > 0))[0]
                np.testing.assert_allclose(together["masked_lm_logits"][row, where[0]],
                                           alone["masked_lm_logits"][index, p], atol=1e-5)
                found += 1
    assert found == (features["masked_lm_weights"] > 0).sum()
    packed_losses = pretraining_losses(packed, together)
    plain_losses = pretraining_losses(features, alone)
    for name in ("masked_lm_loss", "next_sentence_loss", "total_loss"):
        assert float(packed_losses[name]) == pytest.approx(float(plain_losses[name]),
                                                           abs=1e-5)


def _write_instances(path, features):
    with tf.io.TFRecordWriter(str(path)) as writer:
        for index in range(len(features["input_ids"])):
            feature = {name: (tf.train.Feature(float_list=tf.train.FloatList(
                value=values[index].ravel())) if values.dtype == np.float32 else
                tf.train.Feature(int64_list=tf.train.Int64List(value=values[index].ravel())))
                for name, values in features.items()}
            writer.write(tf.train.Example(features=tf.train.Features(
                feature=feature)).SerializeToString())
    return str(path)


def test_pipeline_packs_records_with_less_padding(tmp_path):
    path = _write_instances(tmp_path / "short.tfrecord",
                            _instances(64, min_length=4, max_length=5))
    unpacked = list(records.pretraining_dataset(path, SEQ_IN, PREDICTIONS, 8, False))
    packed = list(records.pretraining_dataset(
        path, SEQ_IN, PREDICTIONS, 8, False, max_sequences_per_row=PER_ROW,
        packing_window=64, drop_remainder=False))
    tokens = sum(int(batch["input_mask"].numpy().sum()) for batch in unpacked)
    assert sum(int(batch["input_mask"].numpy().sum()) for batch in packed) == tokens
    rows = sum(len(batch["input_ids"]) for batch in packed)
    # 3 instances of 4 or 5 tokens fit any row of 16; their 1 to 3 masked tokens each
    # fit the row's 5 slots most of the time.
    assert 64 // PER_ROW < rows < 64 // 2
    padding_before = 1 - tokens / (64 * SEQ_IN)
    padding_after = 1 - tokens / (rows * SEQ_IN)
    assert padding_after < padding_before / 2
    assert packed[0]["masked_lm_positions"].shape[1] == PREDICTIONS + PER_ROW - 1
    assert sum(float(b["masked_lm_weights"].numpy().sum()) for b in packed) == sum(
        float(b["masked_lm_weights"].numpy().sum()) for b in unpacked)
