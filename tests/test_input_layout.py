"""bert_tf.text.input_layout: the `[CLS] a [SEP] (b [SEP])` layout, hand-computed goldens;
bert_tf.text.input_layout_graph: the in-graph version, equal to the Python one on ragged
batches."""

import random
import subprocess
import sys

import pytest
import tensorflow as tf

from bert_tf.text import input_layout, input_layout_graph

CLS, SEP = 101, 102


def test_truncate_seq_pair_longest_first_ties_cut_b():
    a, b = list("abcdef"), list("xyz")
    input_layout.truncate_seq_pair(a, b, 6)
    # a is popped until it is no longer longer than b, then ties pop b.
    assert (a, b) == (list("abc"), list("xyz"))
    a, b = list("abcd"), list("wxyz")
    input_layout.truncate_seq_pair(a, b, 5)
    assert (a, b) == (list("abc"), list("wx"))
    a, b = [1, 2, 3, 4, 5], [6, 7]
    input_layout.truncate_seq_pair(a, b, 4)  # 7 -> a 4 (6) -> a 3 (5) -> a 2 (4)
    assert (a, b) == ([1, 2], [6, 7])
    a, b = [1, 2], [3]
    input_layout.truncate_seq_pair(a, b, 3)  # already fits
    assert (a, b) == ([1, 2], [3])


def test_truncate_segments_single_pair_and_empty_second():
    a, b = [11, 12, 13, 14], [21, 22, 23]
    assert input_layout.truncate_segments(a, None, 5) == [[11, 12, 13]]
    # 7 tokens, budget 8 - 3 = 5: a 4 > b 3 -> a loses 1; tie 3 / 3 -> b loses 1.
    assert input_layout.truncate_segments(a, b, 8) == [[11, 12, 13], [21, 22]]
    assert (a, b) == ([11, 12, 13, 14], [21, 22, 23])  # arguments unchanged
    # An empty second segment is still a pair: budget 5 - 3 = 2.
    assert input_layout.truncate_segments(a, [], 5) == [[11, 12], []]


def test_join_segments_and_pack_values():
    assert input_layout.join_segments([[11, 12], [21]], "C", "S") == (
        ["C", 11, 12, "S", 21, "S"], [0, 0, 0, 0, 1, 1])
    assert input_layout.join_segments([[]], "C", "S") == (["C", "S"], [0, 0])
    assert input_layout.pack_values([[7, 8], [9]], 7, fill=-1) == [-1, 7, 8, -1, 9, -1, -1]
    assert input_layout.pack_values([[3, 4]], 5) == [0, 3, 4, 0, 0]


def test_pack_segments_pair_single_and_exact_fit():
    assert input_layout.pack_segments([[11, 12], [21]], CLS, SEP, 8) == (
        [101, 11, 12, 102, 21, 102, 0, 0],
        [1, 1, 1, 1, 1, 1, 0, 0],
        [0, 0, 0, 0, 1, 1, 0, 0])
    assert input_layout.pack_segments([[11, 12, 13]], CLS, SEP, 5) == (
        [101, 11, 12, 13, 102], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0])
    assert input_layout.pack_segments([[], []], CLS, SEP, 4) == (
        [101, 102, 102, 0], [1, 1, 1, 0], [0, 0, 1, 0])
    with pytest.raises(ValueError, match="6 positions do not fit max_seq_length 5"):
        input_layout.pack_segments([[11, 12], [21]], CLS, SEP, 5)


def test_pack_tokens_returns_tokens_and_inputs():
    vocab = {"[CLS]": 2, "[SEP]": 3, "big": 7, "dog": 8, "ran": 9}
    tokens, inputs = input_layout.pack_tokens(
        input_layout.truncate_segments(["big", "dog"], ["ran", "big", "dog"], 7),
        lambda items: [vocab[item] for item in items], 7)
    # budget 4: b 3 > a 2 -> b loses "dog".
    assert tokens == ["[CLS]", "big", "dog", "[SEP]", "ran", "big", "[SEP]"]
    assert inputs == ([2, 7, 8, 3, 9, 7, 3], [1] * 7, [0, 0, 0, 0, 1, 1, 1])


def test_graph_golden():
    ids_a = tf.ragged.constant([[11, 12, 13, 14], [], [15]], tf.int64)
    ids_b = tf.ragged.constant([[21, 22, 23], [24], []], tf.int64)
    segments = input_layout_graph.truncate_ragged_segments(ids_a, ids_b, 8)
    inputs = {k: v.numpy().tolist() for k, v in input_layout_graph.pack_inputs(
        segments, CLS, SEP, 8).items()}
    assert inputs == {
        "input_ids": [[101, 11, 12, 13, 102, 21, 22, 102],
                      [101, 102, 24, 102, 0, 0, 0, 0],
                      [101, 15, 102, 102, 0, 0, 0, 0]],
        "input_mask": [[1] * 8, [1] * 4 + [0] * 4, [1] * 4 + [0] * 4],
        "segment_ids": [[0, 0, 0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 0, 0, 0, 0],
                        [0, 0, 0, 1, 0, 0, 0, 0]]}


def _ragged(rows):
    """int64 [B, (T)] of lists (some empty)."""
    return tf.RaggedTensor.from_row_lengths(
        tf.constant([item for row in rows for item in row], tf.int64), [len(r) for r in rows])


@pytest.mark.parametrize("max_seq_length", [3, 4, 7, 12])
@pytest.mark.parametrize("pair", [False, True])
def test_graph_equals_python(max_seq_length, pair):
    rng = random.Random(max_seq_length * 2 + pair)
    pack = tf.function(input_layout_graph.pack_inputs, autograph=False)
    for _ in range(3):
        rows_a = [[1000 + 10 * row + i for i in range(rng.randint(0, 9))] for row in range(6)]
        rows_b = [[2000 + 10 * row + i for i in range(rng.randint(0, 9))] for row in range(6)]
        rows_b = rows_b if pair else [None] * 6
        expected = [input_layout.pack_segments(input_layout.truncate_segments(a, b, max_seq_length),
                                          CLS, SEP, max_seq_length)
                    for a, b in zip(rows_a, rows_b)]
        segments = input_layout_graph.truncate_ragged_segments(
            _ragged(rows_a), _ragged(rows_b) if pair else None, max_seq_length)
        outputs = pack(segments, CLS, SEP, max_seq_length)
        for index, name in enumerate(("input_ids", "input_mask", "segment_ids")):
            assert outputs[name].dtype == tf.int32
            assert outputs[name].numpy().tolist() == [row[index] for row in expected]


def test_pair_lengths_equal_truncate_seq_pair():
    lengths = [(a, b) for a in range(12) for b in range(12)]
    for budget in (0, 1, 5, 8):
        keep_a, keep_b = input_layout_graph.pair_lengths(
            tf.constant([a for a, _ in lengths], tf.int64),
            tf.constant([b for _, b in lengths], tf.int64), budget)
        expected = []
        for a, b in lengths:
            tokens_a, tokens_b = list(range(a)), list(range(b))
            input_layout.truncate_seq_pair(tokens_a, tokens_b, budget)
            expected.append((len(tokens_a), len(tokens_b)))
        assert list(zip(keep_a.numpy().tolist(), keep_b.numpy().tolist())) == expected


def test_python_side_does_not_import_tensorflow():
    # The SQuAD data side (and so the SQuAD evaluator command) stays TensorFlow-free.
    code = ("import sys, bert_tf.text.input_layout, bert_tf.tasks.squad.data, "
            "bert_tf.tasks.squad.features; "
            "sys.exit('tensorflow' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
