"""Tests for bert_tf.train.records: parsing, gzip detection, sharding, shape errors."""

import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.train import records
from harness import is_gzip, write_bad_record_file, write_records

SEQ, PRED = 16, 3


def _read_all(dataset):
    return [{k: v.numpy() for k, v in batch.items()} for batch in dataset]


def _raw_examples(paths, compression=""):
    out = []
    for path in paths:
        for record in tf.data.TFRecordDataset(path, compression_type=compression):
            out.append(tf.train.Example.FromString(record.numpy()))
    return out


@pytest.mark.parametrize("gzip_files", [False, True])
def test_eval_pipeline_reads_every_record_once_in_order(tmp_path, gzip_files):
    paths, _ = write_records(tmp_path, 2, 5, SEQ, PRED, gzip_files=gzip_files)
    assert is_gzip(paths[0]) == gzip_files
    dataset = records.pretraining_dataset(",".join(paths), SEQ, PRED, 4, is_training=False,
                                          drop_remainder=False)
    batches = _read_all(dataset)
    assert [len(b["input_ids"]) for b in batches] == [4, 4, 2]
    examples = _raw_examples(paths, "GZIP" if gzip_files else "")
    got_ids = np.concatenate([b["input_ids"] for b in batches])
    want_ids = np.array([e.features.feature["input_ids"].int64_list.value for e in examples])
    np.testing.assert_array_equal(got_ids, want_ids)
    first = batches[0]
    assert first["input_ids"].dtype == np.int32
    assert first["masked_lm_weights"].dtype == np.float32
    assert first["next_sentence_labels"].shape == (4, 1)
    want_weights = examples[0].features.feature["masked_lm_weights"].float_list.value
    np.testing.assert_allclose(first["masked_lm_weights"][0], want_weights)


def test_training_pipeline_repeats_shuffles_and_drops_remainder(tmp_path):
    paths, _ = write_records(tmp_path, 3, 5, SEQ, PRED)
    dataset = records.pretraining_dataset(paths, SEQ, PRED, 4, is_training=True, seed=1)
    batches = _read_all(dataset.take(10))  # 40 examples from 15 records: repeated
    assert all(b["input_ids"].shape == (4, SEQ) for b in batches)
    seen = {tuple(row) for b in batches for row in b["input_ids"]}
    assert len(seen) == 15
    in_order = np.array([e.features.feature["input_ids"].int64_list.value
                         for e in _raw_examples(paths)])[:4]
    assert not np.array_equal(batches[0]["input_ids"], in_order)


@pytest.mark.parametrize("num_files, per_file", [(1, 23), (3, 7)])
def test_training_pipeline_sees_every_record_once_per_epoch(tmp_path, num_files, per_file):
    # Shuffle, then repeat: each epoch (N records) is a permutation of all N records, in
    # a new order each epoch, even with a shuffle buffer larger than N. Repeating first
    # let the buffer mix epochs, so that some records were seen twice and others never.
    paths, _ = write_records(tmp_path, num_files, per_file, SEQ, PRED)
    count = num_files * per_file
    want = sorted(tuple(e.features.feature["input_ids"].int64_list.value)
                  for e in _raw_examples(paths))
    dataset = records.pretraining_dataset(paths, SEQ, PRED, 1, is_training=True, seed=3,
                                          shuffle_buffer_size=10000)
    rows = [tuple(b["input_ids"][0]) for b in _read_all(dataset.take(3 * count))]
    epochs = [rows[i * count:(i + 1) * count] for i in range(3)]
    for epoch in epochs:
        assert sorted(epoch) == want
    assert epochs[0] != epochs[1] and epochs[1] != epochs[2]


def test_file_level_sharding_gives_disjoint_files_per_pipeline(tmp_path):
    paths, _ = write_records(tmp_path, 4, 3, SEQ, PRED)
    seen = []
    for pipeline_id in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2,
                                             input_pipeline_id=pipeline_id,
                                             num_replicas_in_sync=2)
        dataset = records.pretraining_dataset(paths, SEQ, PRED, 4, is_training=False,
                                              input_context=context, drop_remainder=False)
        batches = _read_all(dataset)
        assert all(len(b["input_ids"]) <= 2 for b in batches)  # per-replica batch
        seen.append({tuple(r) for b in batches for r in b["input_ids"]})
    assert len(seen[0]) == len(seen[1]) == 6
    assert not seen[0] & seen[1]


def test_record_level_sharding_when_fewer_files_than_pipelines(tmp_path):
    paths, _ = write_records(tmp_path, 1, 6, SEQ, PRED)
    rows = []
    for pipeline_id in range(2):
        context = tf.distribute.InputContext(2, pipeline_id, 2)
        dataset = records.pretraining_dataset(paths, SEQ, PRED, 2, is_training=False,
                                              input_context=context, drop_remainder=False)
        rows.append([tuple(r) for b in _read_all(dataset) for r in b["input_ids"]])
    assert len(rows[0]) == len(rows[1]) == 3
    assert not set(rows[0]) & set(rows[1])


def test_shape_mismatch_names_file_feature_and_flag(tmp_path):
    paths, _ = write_records(tmp_path, 2, 2, seq_length=32, max_predictions=PRED)
    with pytest.raises(ValueError) as error:
        records.pretraining_dataset(paths, SEQ, PRED, 2, is_training=True)
    message = str(error.value)
    assert paths[0] in message and "'input_ids'" in message
    assert "max_seq_length=16" in message and "32" in message


def test_missing_feature_is_named(tmp_path):
    path = str(tmp_path / "bad.tfrecord")
    example = tf.train.Example(features=tf.train.Features(feature={
        "input_ids": tf.train.Feature(int64_list=tf.train.Int64List(value=[1] * SEQ))}))
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(example.SerializeToString())
    with pytest.raises(ValueError, match="bad.tfrecord.*no feature 'input_mask'"):
        records.pretraining_dataset(path, SEQ, PRED, 2, is_training=False)


def test_globs_skip_stats_and_temporary_files(tmp_path):
    for name in ("wiki.tfrecord-0", "wiki.tfrecord-1", "wiki.tfrecord-0.stats.json",
                 "wiki.tfrecord-1.tmp-123"):
        (tmp_path / name).write_bytes(b"")
    files = records.expand_input_files(str(tmp_path / "wiki.tfrecord*"))
    assert [os.path.basename(f) for f in files] == ["wiki.tfrecord-0", "wiki.tfrecord-1"]
    named = str(tmp_path / "wiki.tfrecord-1.tmp-123")
    assert records.expand_input_files(named) == [named]


def test_unmatched_pattern_and_mixed_compression_are_errors(tmp_path):
    with pytest.raises(ValueError, match="matches no file"):
        records.expand_input_files(str(tmp_path / "nothing-*.tfrecord"))
    plain, _ = write_records(tmp_path, 1, 1, prefix="plain")
    gz, _ = write_records(tmp_path, 1, 1, gzip_files=True, prefix="gz")
    with pytest.raises(ValueError, match="mix compressions"):
        records.resolve_compression(plain + gz)
    assert records.resolve_compression(gz) == "GZIP"
    assert records.resolve_compression(plain) == ""
    assert records.resolve_compression(plain, "none") == ""


def test_unreadable_file_is_named(tmp_path):
    path = tmp_path / "garbage.tfrecord"
    path.write_bytes(b"this is not a tfrecord file at all" * 4)
    with pytest.raises(ValueError, match="garbage.tfrecord: not a readable TFRecord"):
        records.pretraining_dataset(str(path), SEQ, PRED, 2, is_training=False)


def test_bad_record_after_the_first_is_found_by_the_full_scan(tmp_path):
    good, _ = write_records(tmp_path, 1, 3, SEQ, PRED)
    bad = tmp_path / "late-bad.tfrecord"
    write_bad_record_file(bad, bad_index=3, seq_length=SEQ, max_predictions=PRED)
    spec = records.pretraining_features(SEQ, PRED)
    patterns = ",".join(good + [str(bad)])
    dataset = records.pretraining_dataset(patterns, SEQ, PRED, 4, is_training=False)
    with pytest.raises(tf.errors.InvalidArgumentError):  # tf.data alone names no file
        _read_all(dataset)
    with pytest.raises(ValueError, match="late-bad.tfrecord: record 3, feature 'input_ids' "
                                         "has 20 values, expected 16"):
        records.explain_parse_error(patterns, spec)
    records.explain_parse_error(good, spec)  # clean files: no error
