"""Sentence embeddings (bert_tf/tasks/sentence_embeddings): the losses against numpy,
the metrics against hand-worked values, the files and their bad input, and real runs
(CoSENT on scored pairs, in-batch negatives on pairs, resume, two replicas).

The synthetic data: four topics of eight words each; a pair's first sentence is three
of the first four words of its topic, the second three of the last four of its own; the
score is 5 for one topic, 2.5 for neighbouring topics (on a circle of four) and 0 for
opposite ones. The two sentences of a pair never share a word, so a random encoder
scores them poorly and a trained one well.
"""

import json
import logging
import os
import pathlib
import random
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.runs import driver, registry
from bert_tf.tasks.sentence_embeddings import data as pair_data
from bert_tf.tasks.sentence_embeddings import evaluation, losses
from bert_tf.tasks.sentence_embeddings.model import SentenceEncoder
from bert_tf.tasks.sentence_embeddings.task import SentenceEmbeddingTask
from bert_tf.tasks.sentence_embeddings.options import SentenceEmbeddingOptions
from flag_contract import check_every_flag_reaches_options
from harness import tiny_config, tiny_model, write_released_checkpoint, write_tiny_model_files

TOPICS = [["red", "blue", "green", "pink", "gray", "gold", "tan", "teal"],
          ["cat", "dog", "cow", "pig", "hen", "fox", "owl", "bee"],
          ["run", "jump", "swim", "walk", "ride", "fly", "sit", "hop"],
          ["one", "two", "six", "ten", "nine", "four", "five", "zero"]]
WORDS = [word for topic in TOPICS for word in topic]
SCORE_OF_DISTANCE = {0: 5.0, 1: 2.5, 2: 0.0}


# ------------------------------------------------------------------------ test data
def _sentence(rng, topic, half=0):
    return " ".join(rng.sample(TOPICS[topic][4 * half:4 * half + 4], 3))


def scored_pairs(count, seed):
    """(sentence1, sentence2, score) rows (see the module docstring)."""
    rng = random.Random(seed)
    rows = []
    for index in range(count):
        first = rng.randrange(4)
        distance = index % 3
        second = (first + rng.choice([distance, -distance])) % 4
        rows.append((_sentence(rng, first), _sentence(rng, second, 1),
                     SCORE_OF_DISTANCE[distance]))
    return rows


def positive_pairs(count, seed):
    """(anchor, positive) rows: two sentences of one topic."""
    rng = random.Random(seed)
    return [(_sentence(rng, topic), _sentence(rng, topic, 1))
            for topic in (rng.randrange(4) for _ in range(count))]


def write_rows(path, header, rows):
    """A TSV (header first) or, for .jsonl, one object a row."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".jsonl":
        lines = [json.dumps(dict(zip(header, row))) for row in rows]
    else:
        lines = ["\t".join(header)] + ["\t".join(str(value) for value in row) for row in rows]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def write_sts(folder, train=96, dev=48):
    """train.tsv and dev.tsv with STS-B's columns (its other columns too)."""
    header = ["index", "genre", "sentence1", "sentence2", "score"]
    for name, count, seed in (("train", train, 0), ("dev", dev, 1)):
        write_rows(pathlib.Path(folder) / f"{name}.tsv", header,
                   [(i, "main", *row) for i, row in enumerate(scored_pairs(count, seed))])


def options(tmp_path, **changes):
    vocab_file, config_file = write_tiny_model_files(tmp_path, WORDS)
    values = dict(data_dir=str(tmp_path / "data"), output_dir=str(tmp_path / "out"),
                  vocab_file=vocab_file, bert_config_file=config_file, max_seq_length=8,
                  train_batch_size=16, eval_batch_size=16, learning_rate=3e-3,
                  num_train_epochs=6.0, warmup_proportion=0.1, save_checkpoints_steps=1000,
                  steps_per_loop=6, seed=1, allow_random_encoder=True)
    values.update(changes)
    return SentenceEmbeddingOptions(**values)


def write_tiny_inputs(tmp_path):
    """The data of `tiny_options` (shared with test_run_config)."""
    write_sts(tmp_path / "data", train=32, dev=16)


def tiny_options(tmp_path, **changes):
    """A short training run of this task (shared with test_run_config)."""
    return options(tmp_path, **{"do_train": True, "num_train_epochs": 1.0, **changes})


# ---------------------------------------------------------------------- the losses
def _cosines(a, b):
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return a @ b.T


def _cross_entropy(logits, labels):
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return -np.mean(log_probs[np.arange(len(labels)), labels])


def _embeddings(seed, rows=5, width=7):
    return np.random.default_rng(seed).normal(size=(rows, width)).astype(np.float32)


@pytest.mark.parametrize("with_negatives", [False, True])
@pytest.mark.parametrize("symmetric", [False, True])
def test_in_batch_negatives_equal_numpy(with_negatives, symmetric):
    anchors, positives, negatives = _embeddings(0), _embeddings(1), _embeddings(2)
    candidates = np.concatenate([positives] + ([negatives] if with_negatives else []))
    expected = _cross_entropy(20.0 * _cosines(anchors, candidates), np.arange(5))
    if symmetric:
        expected = (expected + _cross_entropy(20.0 * _cosines(positives, anchors),
                                              np.arange(5))) / 2
    got = losses.multiple_negatives_ranking_loss(
        anchors, positives, negatives if with_negatives else None, 20.0, symmetric)
    np.testing.assert_allclose(float(got), expected, rtol=1e-5)


def test_cosent_and_cosine_mse_equal_numpy():
    first, second = _embeddings(3), _embeddings(4)
    scores = np.array([0.2, 0.8, 0.2, 1.0, 0.0], np.float32)
    cosines = np.sum(first * second, 1) / (np.linalg.norm(first, axis=1)
                                           * np.linalg.norm(second, axis=1))
    total = sum(np.exp(7.0 * (cosines[j] - cosines[i])) for i in range(5) for j in range(5)
                if scores[i] > scores[j])
    np.testing.assert_allclose(float(losses.cosent_loss(first, second, scores, 7.0)),
                               np.log1p(total), rtol=1e-5)
    np.testing.assert_allclose(float(losses.cosine_mse_loss(first, second, scores)),
                               np.mean((cosines - scores) ** 2), rtol=1e-5)


def test_rows_of_a_batch_are_laid_out_example_by_example():
    first, second, third = _embeddings(5), _embeddings(6), _embeddings(7)
    flat = np.stack([first, second, third], axis=1).reshape(15, 7)  # a1 p1 n1 a2 ...
    np.testing.assert_allclose(
        float(losses.sentence_loss("multiple_negatives_ranking", flat, 3, scale=20.0)),
        float(losses.multiple_negatives_ranking_loss(first, second, third)), rtol=1e-6)


# --------------------------------------------------------------------- the metrics
def test_spearman_and_pearson_equal_hand_worked_values():
    # Ranks of x with a tie: 1, 2.5, 2.5, 4; of y: 1, 3, 2, 4. Deviations from 2.5:
    # (-1.5, 0, 0, 1.5) and (-1.5, .5, -.5, 1.5): 4.5 / sqrt(4.5 * 5).
    assert evaluation.spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(
        4.5 / np.sqrt(22.5), abs=1e-12)
    np.testing.assert_array_equal(evaluation.average_ranks([3, 1, 2, 2]), [4, 1, 2.5, 2.5])
    # (-1, 0, 1) against (-4/3, -1/3, 5/3): 3 / sqrt(2 * 42 / 9).
    assert evaluation.pearson([1, 2, 3], [1, 2, 4]) == pytest.approx(9 / np.sqrt(84),
                                                                      abs=1e-12)
    assert evaluation.spearman([1, 2, 3], [1, 2, 40]) == pytest.approx(1.0)
    scores = evaluation.similarity_scores([[1, 0], [1, 1], [0, 1]], [[1, 0], [1, 0], [1, 0]],
                                          [5, 2, 1])
    assert scores["spearman"] == pytest.approx(1.0)


def test_ranking_metrics_equal_hand_worked_values():
    # d1 (score 1) at rank 2, d2 (score 2) at rank 4.
    scores = evaluation.ranking_scores(["d3", "d1", "d4", "d2"], {"d1": 1.0, "d2": 2.0},
                                       [1, 3, 4])
    assert scores["mrr_at_10"] == 0.5
    assert (scores["recall_at_1"], scores["recall_at_3"], scores["recall_at_4"]) == (0, .5, 1)
    dcg = 1 / np.log2(3) + 2 / np.log2(5)
    ideal = 2 / np.log2(2) + 1 / np.log2(3)
    assert scores["ndcg_at_10"] == pytest.approx(dcg / ideal, abs=1e-12)


def _write_beir(folder, qrels_rows):
    folder = pathlib.Path(folder)
    write_rows(folder / "corpus.jsonl", ["_id", "title", "text"],
               [("d1", "", "east"), ("d2", "the", "north"), ("d3", "", "west"),
                ("d4", "", "south")])
    write_rows(folder / "queries.jsonl", ["_id", "text"],
               [("q1", "where"), ("q2", "which"), ("q3", "unjudged")])
    write_rows(folder / "qrels" / "test.tsv", ["query-id", "corpus-id", "score"], qrels_rows)
    return str(folder)


def test_retrieval_set_and_its_scores(tmp_path):
    folder = _write_beir(tmp_path / "beir", [("q1", "d2", 1), ("q1", "d4", 1),
                                             ("q2", "d3", 1), ("q2", "d1", 0)])
    retrieval = evaluation.read_beir(folder, "test")
    assert retrieval.query_ids == ["q1", "q2"] and retrieval.corpus_texts[1] == "the north"
    assert retrieval.qrels == {"q1": {"d2": 1.0, "d4": 1.0}, "q2": {"d3": 1.0}}
    assert retrieval.recall_ks() == [1]
    corpus = np.array([[1, 0], [0, 1], [-1, 0], [0, -1]], np.float32)  # d1 .. d4
    # q1 ranks d2, d1, d3, d4 (relevant: 1st, 4th); q2 ranks d4, d3, d1, d2 (d3 2nd).
    queries = np.array([[0.6, 0.8], [-0.6, -0.8]], np.float32)
    scores = evaluation.retrieval_scores(retrieval, queries, corpus)
    assert scores["mrr_at_10"] == pytest.approx((1 + 0.5) / 2)
    assert scores["recall_at_1"] == pytest.approx((0.5 + 0) / 2)
    q1 = (1 + 1 / np.log2(5)) / (1 + 1 / np.log2(3))
    q2 = (1 / np.log2(3)) / 1
    assert scores["ndcg_at_10"] == pytest.approx((q1 + q2) / 2, abs=1e-12)
    assert (scores["queries"], scores["corpus"]) == (2, 4)


def test_bad_retrieval_files_are_refused_naming_file_and_line(tmp_path):
    folder = _write_beir(tmp_path / "beir", [("q1", "d9", 1)])
    with pytest.raises(ValueError, match=r"qrels/test.tsv:2: corpus-id 'd9' is not in"):
        evaluation.read_beir(folder)
    with pytest.raises(FileNotFoundError, match="qrels/dev.tsv"):
        evaluation.read_beir(folder, "dev")


# ------------------------------------------------------------------ files, features
def test_pairs_and_triplets_read_from_tsv_csv_and_jsonl(tmp_path):
    columns = pair_data.Columns("anchor", "positive", "negative", "label", 0.0, 1.0)
    path = write_rows(tmp_path / "t.jsonl", ["anchor", "positive", "negative", "label"],
                      [("red cat", "blue cat", "run", 0.5)])
    rows = pair_data.read_pairs(path, columns, True, with_negatives=True)
    assert rows.texts == [("red cat", "blue cat", "run")] and rows.texts_per_row == 3
    assert rows.scores.tolist() == [0.5] and rows.sources == [f"{path}:1"]
    csv_path = tmp_path / "p.csv"
    csv_path.write_text('anchor,positive\n"red, blue",cat\n', encoding="utf-8")
    assert pair_data.read_pairs(str(csv_path), columns, False).texts == [("red, blue", "cat")]
    # STS-B scores 0 .. 5 become 0 .. 1.
    sts = write_rows(tmp_path / "dev.tsv", ["sentence1", "sentence2", "score"],
                     [("a", "b", 5.0), ("a", "c", 1.0)])
    np.testing.assert_allclose(pair_data.read_pairs(sts, pair_data.Columns(), True).scores,
                               [1.0, 0.2])


def test_each_text_is_its_own_row_and_batches_keep_examples_together(tmp_path):
    from bert_tf.text import tokenization
    vocab, _ = write_tiny_model_files(tmp_path, WORDS)
    tokenizer = tokenization.FullTokenizer(vocab, do_lower_case=True)
    rows = pair_data.PairData("x", [("red cat", "blue"), ("dog dog dog dog dog dog", "fly")],
                              np.array([1.0, 0.0], np.float32), None, ["x:1", "x:2"])
    arrays = pair_data.encode_rows(rows, tokenizer, 6)
    ids = {word: index for index, word in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]",
                                                     "[MASK]"] + WORDS)}
    assert arrays["input_ids"].shape == (2, 2, 6)
    assert arrays["input_ids"][0, 0].tolist() == [2, ids["red"], ids["cat"], 3, 0, 0]
    assert arrays["input_ids"][1, 0].tolist() == [2] + [ids["dog"]] * 4 + [3]  # cut
    assert arrays["segment_ids"].max() == 0
    [batch] = list(pair_data.pairs_dataset(arrays, 2, False, trim_padding=True))
    assert batch["input_ids"].shape == (4, 6) and batch["scores"].numpy().tolist() == [1, 0]
    assert batch["input_ids"][1].numpy().tolist() == [2, ids["blue"], 3, 0, 0, 0]
    [short] = list(pair_data.pairs_dataset({k: v[:1] for k, v in arrays.items()}, 2, False,
                                           trim_padding=True))
    assert short["input_ids"].shape == (2, 4)  # trimmed to its longest text


# ---------------------------------------------------------------------- bad input
@pytest.mark.parametrize("header, row, message", [
    (["sentence1"], ["red cat"], r"train.tsv:2: no column 'sentence2'"),
    (["sentence1", "sentence2", "score"], ["red", " ", "1"],
     r"train.tsv:2: column 'sentence2' is empty"),
    (["sentence1", "sentence2", "score"], ["red", "cat", "5.5"],
     r"train.tsv:2: score 5.5 is outside the declared range 0 .. 5"),
    (["sentence1", "sentence2", "score"], ["red", "cat", "x"],
     r"train.tsv:2: score 'x' is not a number"),
])
def test_bad_rows_are_refused_before_any_work_naming_file_and_line(tmp_path, header, row,
                                                                   message):
    write_rows(tmp_path / "data" / "train.tsv", header, [row])
    with pytest.raises(ValueError, match=message):
        registry.run("sentence_embeddings", options(tmp_path, do_train=True))
    assert tf.train.latest_checkpoint(str(tmp_path / "out")) is None


def test_in_batch_negatives_on_a_batch_of_one_are_refused(tmp_path):
    write_rows(tmp_path / "data" / "train.tsv", ["sentence1", "sentence2"],
               positive_pairs(4, 0))
    with pytest.raises(ValueError, match="train_batch_size=1 .*multiple_negatives_ranking "
                                         "ranks each anchor against the other pairs"):
        registry.run("sentence_embeddings", options(tmp_path, do_train=True,
                                                    train_batch_size=1))
    with pytest.raises(ValueError, match=r"train_batch_size=4 \(micro-batches of 1\)"):
        options(tmp_path, do_train=True, train_batch_size=4, gradient_accumulation_steps=4,
                loss="multiple_negatives_symmetric_ranking").check()
    assert tf.train.latest_checkpoint(str(tmp_path / "out")) is None


def test_options_refuse_bad_values_and_every_flag_reaches_them():
    with pytest.raises(ValueError, match="similarity_scale must be a positive number"):
        SentenceEmbeddingOptions(similarity_scale=0.0).check()
    with pytest.raises(ValueError, match="max_score=1.0 must be a number above min_score=2"):
        SentenceEmbeddingOptions(min_score=2.0, max_score=1.0).check()
    check_every_flag_reaches_options(SentenceEmbeddingOptions)


# ---------------------------------------------------------------------- packing
def _text_batch(rng, count, length=16):
    """`count` texts [CLS] ids [SEP] of random lengths, padded to `length`."""
    arrays = {name: np.zeros((count, length), np.int32) for name in pair_data.FEATURE_NAMES}
    for row, size in enumerate(rng.integers(3, length + 1, count)):
        arrays["input_ids"][row, :size] = [2, *rng.integers(5, 99, size - 2), 3]
        arrays["input_mask"][row, :size] = 1
    return arrays


@pytest.mark.parametrize("pooling", ["mean", "cls", "max"])
def test_packed_rows_give_each_text_its_unpacked_vector_and_loss(pooling):
    model = tiny_model(SentenceEncoder, tiny_config(hidden_dropout_prob=0.0,
                                                    attention_probs_dropout_prob=0.0),
                       7, pooling=pooling)
    batch = {name: tf.constant(values)
             for name, values in _text_batch(np.random.default_rng(0), 10).items()}
    packed = pair_data.pack_batch(dict(batch, scores=tf.range(5.0)), 4)
    rows = int(tf.shape(packed["input_ids"])[0])
    assert rows < 10 and int(tf.reduce_sum(packed["input_mask"])) == int(
        tf.reduce_sum(batch["input_mask"]))
    assert packed["scores"].numpy().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    alone, together = model(batch)["embedding"], model(packed)["embedding"]
    np.testing.assert_allclose(together.numpy(), alone.numpy(), atol=1e-5)
    for name, scores in (("multiple_negatives_ranking", None),
                         ("cosent", tf.constant([0.1, 0.9, 0.4, 0.6, 0.2]))):
        np.testing.assert_allclose(losses.sentence_loss(name, together, 2, scores, 20.0),
                                   losses.sentence_loss(name, alone, 2, scores, 20.0),
                                   rtol=1e-5)


def test_a_packed_dataset_holds_the_unpacked_batches_texts():
    rng = np.random.default_rng(1)
    arrays = {name: values.reshape(12, 2, 16)
              for name, values in _text_batch(rng, 24).items()}
    arrays["scores"] = rng.random(12).astype(np.float32)
    plain = next(iter(pair_data.pairs_dataset(arrays, 6, True, seed=3, trim_padding=True)))
    packed = next(iter(pair_data.pairs_dataset(arrays, 6, True, seed=3, trim_padding=True,
                                               max_sequences_per_row=8)))
    np.testing.assert_array_equal(packed["scores"], plain["scores"])
    assert packed["input_ids"].shape[0] < plain["input_ids"].shape[0]
    # Each slot's tokens are the text its number names.
    ids, sequence_ids = packed["input_ids"].numpy(), packed["sequence_ids"].numpy()
    for row, numbers in enumerate(packed["text_number"].numpy()):
        for slot, number in enumerate(numbers):
            if number:
                text = plain["input_ids"][number - 1].numpy()
                np.testing.assert_array_equal(ids[row][sequence_ids[row] == slot + 1],
                                              text[text > 0])


def test_packed_training_lowers_the_loss_and_refuses_what_it_cannot_pack(tmp_path):
    write_sts(tmp_path / "data", train=64, dev=16)
    outcome = driver.execute(SentenceEmbeddingTask(options(
        tmp_path, do_train=True, num_train_epochs=3.0, steps_per_loop=4,
        pack_sequences=True)))
    curve = _loop_losses(outcome)
    assert curve[-1] < 0.8 * curve[0], curve
    for changes, message in (({"use_xla": True}, "leave it out with --use_xla"),
                             ({"gradient_accumulation_steps": 2},
                              "cannot split into micro-batches")):
        with pytest.raises(ValueError, match=message):
            options(tmp_path, do_train=True, pack_sequences=True, **changes).check()


# -------------------------------------------------------------------------- runs
def _loop_losses(outcome):
    return [entry["total_loss"] for entry in outcome.runner.train_result.history]


def test_cosent_training_lowers_the_loss_and_raises_dev_spearman(tmp_path):
    write_sts(tmp_path / "data")
    config = tiny_config(max_position_embeddings=16, hidden_dropout_prob=0.0,
                         attention_probs_dropout_prob=0.0)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
    write_released_checkpoint(tmp_path / "init", tiny_model(SentenceEncoder, config, 3),
                              vocab + [f"unused{i}" for i in range(99 - len(vocab))])
    init = dict(init_checkpoint=str(tmp_path / "init"), allow_random_encoder=False,
                vocab_file=None, bert_config_file=None)
    before = registry.run("sentence_embeddings", options(
        tmp_path, do_eval=True, output_dir=str(tmp_path / "zero_shot"), **init))
    outcome = driver.execute(SentenceEmbeddingTask(options(
        tmp_path, do_train=True, do_eval=True, eval_every_steps=18,
        best_metric="spearman", **init)))
    curve = _loop_losses(outcome)
    assert curve[-1] < 0.5 * curve[0], curve
    after = outcome.results
    assert after["eval_spearman"] > before["eval_spearman"] + 0.3, (before, after)
    assert after["eval_spearman"] > 0.8 and after["eval_pearson"] > 0.7, after
    saved = json.loads((tmp_path / "out" / "eval_results.json").read_text())
    assert saved["eval_spearman"] == after["eval_spearman"]
    predictions = (tmp_path / "out" / "eval_predictions.tsv").read_text().splitlines()
    assert predictions[0] == "index\tcosine\tscore" and len(predictions) == 49
    assert os.path.isdir(tmp_path / "out" / "best")


@pytest.mark.slow
def test_in_batch_negatives_on_pairs_train_and_resume(tmp_path):
    write_rows(tmp_path / "data" / "train.jsonl", ["sentence1", "sentence2"],
               positive_pairs(64, 0))
    write_sts(tmp_path / "sts", train=0, dev=48)
    run = dict(do_train=True, do_eval=True, eval_file=str(tmp_path / "sts" / "dev.tsv"),
               num_train_epochs=3.0, steps_per_loop=4)
    outcome = driver.execute(SentenceEmbeddingTask(options(tmp_path, **run)))
    assert outcome.runner.task.loss_name == "multiple_negatives_ranking"
    curve = _loop_losses(outcome)
    assert curve[-1] < curve[0], curve
    assert outcome.results["global_step"] == 12 and outcome.results["eval_spearman"] > 0.5
    # A longer schedule in the same folder resumes at step 12.
    resumed = driver.execute(SentenceEmbeddingTask(options(
        tmp_path, **dict(run, num_train_epochs=4.0))))
    assert resumed.runner.train_result.steps_this_run == 4
    assert resumed.results["global_step"] == 16


def test_triplets_train_with_hard_negatives_and_a_scored_loss_refuses_them(tmp_path):
    rng = random.Random(2)
    rows = [(anchor, positive, _sentence(rng, rng.randrange(4), 1))
            for anchor, positive in positive_pairs(32, 2)]
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.csv").write_text(
        "q,pos,neg\n" + "".join(",".join(row) + "\n" for row in rows), encoding="utf-8")
    run = dict(do_train=True, num_train_epochs=1.0, train_batch_size=8,
               sentence1_column="q", sentence2_column="pos", negative_column="neg")
    with pytest.raises(ValueError, match="--negative_column=neg: hard negatives are for "
                                         "in-batch-negative losses, not --loss=cosent"):
        registry.run("sentence_embeddings", options(tmp_path, loss="cosent", **run))
    outcome = driver.execute(SentenceEmbeddingTask(options(tmp_path, **run)))
    assert outcome.runner.task.data["train"].texts_per_row == 3
    assert outcome.results == {} and outcome.runner.global_step == 4


def test_retrieval_is_scored_with_the_dev_data_under_mixed_precision(tmp_path, caplog):
    folder = tmp_path / "beir"
    rng = random.Random(0)
    corpus = [(f"d{i}", "", _sentence(rng, i % 4)) for i in range(12)]
    write_rows(folder / "corpus.jsonl", ["_id", "title", "text"], corpus)
    write_rows(folder / "queries.jsonl", ["_id", "text"],
               [(f"q{t}", _sentence(rng, t, 1)) for t in range(4)])
    write_rows(folder / "qrels" / "dev.tsv", ["query-id", "corpus-id", "score"],
               [(f"q{i % 4}", f"d{i}", 1) for i in range(12)])
    write_sts(tmp_path / "data", train=16, dev=8)
    caplog.set_level(logging.INFO, logger="absl")
    outcome = driver.execute(SentenceEmbeddingTask(options(
        tmp_path, do_train=True, do_eval=True, num_train_epochs=1.0,
        retrieval_dir=str(folder), retrieval_split="dev", mixed_precision="bfloat16")))
    results = outcome.results
    # The log counts what eval_examples counts (pairs); the texts encoded are texts.
    assert f"Evaluating: 8 pairs of {tmp_path / 'data' / 'dev.tsv'}" in caplog.text
    assert results["eval_examples"] == 8 and "distinct texts in" in caplog.text
    assert not re.search(r"Evaluating: \d+ examples", caplog.text), caplog.text
    assert np.isfinite(_loop_losses(outcome)).all()
    for name in ("eval_mrr_at_10", "eval_ndcg_at_10", "eval_recall_at_1", "eval_recall_at_5",
                 "eval_recall_at_10", "eval_spearman"):
        assert 0 <= results[name] <= 1, (name, results)
    assert results["eval_queries"] == 4 and results["eval_corpus"] == 12
    text = (tmp_path / "out" / "eval_results.txt").read_text()
    assert "eval_ndcg_at_10 = " in text and "eval_recall_at_100" not in text


_TWO_REPLICAS = """
import sys
import numpy as np
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from bert_tf.tasks.sentence_embeddings import losses
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
rng = np.random.default_rng(0)
inputs = rng.normal(size=(3, 8, 5)).astype(np.float32)  # anchors, positives, negatives
scores = rng.uniform(size=8).astype(np.float32)
with strategy.scope():
    kernel = tf.Variable(rng.normal(size=(5, 6)).astype(np.float32))
def loss_of(name, rows, gold):
    texts = rows.shape[0]
    embedded = tf.reshape(tf.matmul(tf.reshape(rows, [-1, 5]), kernel), [texts, -1, 6])
    flat = tf.reshape(tf.transpose(embedded, [1, 0, 2]), [-1, 6])  # a1 p1 (n1) a2 ...
    return losses.sentence_loss(name, flat, texts, gold, 20.0)
def replica_step(name, rows, gold):
    with tf.GradientTape() as tape:
        loss = loss_of(name, rows, gold)
        scaled = loss / strategy.num_replicas_in_sync
    grad = tape.gradient(scaled, kernel)
    context = tf.distribute.get_replica_context()
    return context.all_reduce("sum", scaled), context.all_reduce("sum", grad)
CASES = [(name, 2) for name in losses.LOSSES] + [
    (name, 3) for name in losses.LOSSES if "negatives" in name]
for name, texts in CASES:
    rows = inputs[:texts]
    with tf.GradientTape() as tape:
        expected = loss_of(name, rows, scores)
    expected_grad = tape.gradient(expected, kernel)
    halves = lambda ctx: (rows[:, ctx.replica_id_in_sync_group * 4:][:, :4],
                          scores[ctx.replica_id_in_sync_group * 4:][:4])
    values = strategy.experimental_distribute_values_from_function(halves)
    loss, grad = strategy.run(tf.function(lambda v, n=name: replica_step(n, *v)),
                              args=(values,))
    loss = strategy.experimental_local_results(loss)[0]
    grad = strategy.experimental_local_results(grad)[0]
    np.testing.assert_allclose(loss.numpy(), expected.numpy(), rtol=1e-5, err_msg=name)
    np.testing.assert_allclose(grad.numpy(), expected_grad.numpy(), rtol=1e-4, atol=1e-6,
                               err_msg=name)
    print("SAME", name, texts)
"""


def test_two_replicas_rank_against_the_global_batch_with_its_gradient():
    # Each replica holds half of a batch of 8; in-batch negatives and CoSENT gather the
    # other half: the loss and the summed gradients equal one device's on all 8.
    completed = subprocess.run([sys.executable, "-c", _TWO_REPLICAS], capture_output=True,
                               text=True, timeout=600, cwd=os.path.dirname(__file__),
                               check=False)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert completed.stdout.count("SAME") == len(losses.LOSSES) + 2, completed.stdout


_MIRRORED_RUN = """
import pathlib, sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import test_sentence_embeddings as t
from bert_tf.runs import registry
folder = pathlib.Path(sys.argv[1])
t.write_rows(folder / "data" / "train.tsv", ["sentence1", "sentence2"], t.positive_pairs(32, 0))
t.write_sts(folder / "sts", train=0, dev=15)
run = dict(eval_file=str(folder / "sts" / "dev.tsv"), eval_batch_size=4, num_train_epochs=1.0,
           train_batch_size=8, loss="multiple_negatives_symmetric_ranking")
trained = registry.run("sentence_embeddings", t.options(
    folder, do_train=True, do_eval=True, distribution_strategy="mirrored", **run))
again = registry.run("sentence_embeddings", t.options(folder, do_eval=True, **run))
print("RESULTS", trained["global_step"], trained["eval_spearman"], again["eval_spearman"])
"""


@pytest.mark.slow
def test_a_mirrored_run_trains_and_scores_as_one_device_does(tmp_path):
    # Two replicas: batches of 4 pairs each, 15 dev pairs in uneven batches; scoring the
    # checkpoint again on one device gives the same Spearman (the order is kept).
    completed = subprocess.run([sys.executable, "-c", _MIRRORED_RUN, str(tmp_path)],
                               capture_output=True, text=True, timeout=600,
                               cwd=os.path.dirname(__file__), check=False)
    assert completed.returncode == 0, completed.stderr[-3000:]
    [line] = [line for line in completed.stdout.splitlines() if line.startswith("RESULTS")]
    _, step, mirrored, one_device = line.split()
    assert step == "4"
    assert float(mirrored) == pytest.approx(float(one_device), abs=1e-6)
