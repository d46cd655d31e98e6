"""Long documents in run_classifier (--long_document=windows): windows that cover every
token, logits pooled per document, a label seen only past the first window learnt, and
the SavedModel windowing raw text in the graph as the run did. Golden windows, features
and pooling are computed here, independently of bert_tf.text.windows."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.models import BertClassifier
from bert_tf.serving import export
from bert_tf.runs import driver, export_checkpoint
from bert_tf.tasks.classification import data as classification_data
from bert_tf.tasks.classification import long_documents
from bert_tf.tasks.classification import task as classification_task
from bert_tf.tasks.classification.options import ClassifierOptions
from bert_tf.runs.text_files import InputExample
from bert_tf.text import windows, windows_graph
from bert_tf.text.tokenization import FullTokenizer
from bert_tf.text.preprocessor import Preprocessor
from harness import (SPECIAL_TOKENS, tiny_config, tiny_model, write_tiny_model_files,
                     write_tsv)

FILLER = ["the", "a", "movie", "film", "plot", "acting", "was", "is", "very", "quite",
          "story", "music", "really", "scene", "cast"]
WORDS = FILLER + ["good", "bad"]
VOCAB = SPECIAL_TOKENS + WORDS
SEQ = 12  # a window holds 10 tokens of one text
STRIDE = 5


# ------------------------------------------------------------------ independent golden
def golden_spans(num_tokens, capacity, stride):
    """(start, length) of each window: starts 0, stride, ... until one reaches the end."""
    starts = [0]
    while starts[-1] + capacity < num_tokens:
        starts.append(starts[-1] + stride)
    return [(start, min(capacity, num_tokens - start)) for start in starts]


def golden_window_ids(words, seq=SEQ, stride=STRIDE):
    """[W, seq] input_ids, input_mask of one single-text document ([CLS] w [SEP])."""
    ids = [VOCAB.index(word) for word in words]
    rows = []
    for start, length in golden_spans(len(ids), seq - 2, stride):
        row = [VOCAB.index("[CLS]")] + ids[start:start + length] + [VOCAB.index("[SEP]")]
        rows.append(row + [0] * (seq - len(row)))
    input_ids = np.array(rows, np.int32)
    return {"input_ids": input_ids, "input_mask": (input_ids > 0).astype(np.int32),
            "segment_ids": np.zeros_like(input_ids)}


def golden_pool(window_logits, pooling):
    return window_logits.mean(axis=0) if pooling == "mean" else window_logits.max(axis=0)


def document_logits(model, words, pooling):
    """The document's logits from the model's logits of its golden windows."""
    features = golden_window_ids(words)
    logits = model({k: tf.constant(v) for k, v in features.items()},
                   training=False)["logits"].numpy()
    return golden_pool(logits.astype(np.float64), pooling)


def softmax(logits):
    exp = np.exp(logits - logits.max(-1, keepdims=True))
    return exp / exp.sum(-1, keepdims=True)


# ------------------------------------------------------------------------- tiny data
def late_label_rows(count, seed):
    """Documents of 14-20 words whose label word ("good" 1 / "bad" 0) sits past the first
    window (word 10 or later): truncation to 10 words never sees it."""
    rng = np.random.default_rng(seed)
    rows = []
    for index in range(count):
        words = list(rng.choice(FILLER, size=int(rng.integers(13, 20))))
        words.insert(int(rng.integers(10, len(words) + 1)), "good" if index % 2 else "bad")
        rows.append((" ".join(words), str(index % 2)))
    return rows


def long_test_text(seed=3, characters=10_000):
    """A text of at least `characters` characters with "good" once near its end."""
    rng = np.random.default_rng(seed)
    words = []
    while sum(len(word) + 1 for word in words) < characters:
        words.append(str(rng.choice(FILLER)))
    words.insert(len(words) - 7, "good")
    return " ".join(words)


def write_data(folder, train=48, dev=24):
    for name, rows in (("train", late_label_rows(train, 0)), ("dev", late_label_rows(dev, 1))):
        write_tsv(folder / f"{name}.tsv", [("sentence", "label")] + rows)
    test = [text for text, _ in late_label_rows(4, 2)] + ["good", long_test_text()]
    write_tsv(folder / "test.tsv", [("index", "sentence")] + [
        (str(i), text) for i, text in enumerate(test)])
    return test


def options(tmp_path, **changes):
    vocab_file, config_file = write_tiny_model_files(tmp_path, WORDS)
    values = dict(task_name="SST-2", data_dir=str(tmp_path / "data"),
                  output_dir=str(tmp_path / "out"), vocab_file=vocab_file,
                  bert_config_file=config_file, max_seq_length=SEQ, train_batch_size=16,
                  eval_batch_size=7, predict_batch_size=5, learning_rate=2e-3,
                  num_train_epochs=12.0, warmup_proportion=0.1, steps_per_loop=20,
                  save_checkpoints_steps=1000, seed=1, dropout_rate=0.0,
                  allow_random_encoder=True)
    values.update(changes)
    return ClassifierOptions(**values)


# ------------------------------------------------------------------------------ tests
def test_windows_cover_every_token_fit_the_length_and_copy_labels(tmp_path):
    tokenizer = FullTokenizer(str(write_tiny_model_files(tmp_path, WORDS)[0]), True)
    long_words = late_label_rows(1, 5)[0][0].split() + FILLER  # 30+ words
    examples = [InputExample("a", " ".join(long_words), None, "1"),
                InputExample("b", "good movie", None, "0"),
                InputExample("c", "", None, "0")]
    features = classification_data.convert_examples_to_features(
        examples, ["0", "1"], SEQ, tokenizer, doc_stride=STRIDE)
    indices = [feature.example_index for feature in features]
    spans = golden_spans(len(long_words), SEQ - 2, STRIDE)
    assert indices == [0] * len(spans) + [1, 2] and len(spans) >= 5
    assert [f.label_id for f in features] == [1] * len(spans) + [0, 0]
    golden = golden_window_ids(long_words)
    np.testing.assert_array_equal([f.input_ids for f in features[:len(spans)]],
                                  golden["input_ids"])
    covered = set()
    for feature, (start, length) in zip(features, spans):
        assert len(feature.input_ids) == SEQ and sum(feature.input_mask) <= SEQ
        covered |= set(range(start, start + length))
    assert covered == set(range(len(long_words)))
    # What fits is one window, the very features truncation writes.
    truncated = classification_data.convert_examples_to_features(
        examples[1:], ["0", "1"], SEQ, tokenizer)
    assert [f.input_ids for f in features[-2:]] == [f.input_ids for f in truncated]


def test_pairs_keep_the_first_text_and_window_the_second(tmp_path):
    tokenizer = FullTokenizer(str(write_tiny_model_files(tmp_path, WORDS)[0]), True)
    first, second = "good movie very good plot the acting", " ".join(FILLER * 2)
    features = classification_data.convert_examples_to_features(
        [InputExample("p", first, second, "1"), InputExample("q", "bad", "the plot", "0")],
        ["0", "1"], SEQ + 4, tokenizer, doc_stride=3)
    # 16 = [CLS] a [SEP] b [SEP]: a keeps (16 - 3) // 2 = 6 words, b windows of 7.
    kept_a = [VOCAB.index(w) for w in first.split()[:6]]
    ids_b = [VOCAB.index(w) for w in second.split()]
    spans = golden_spans(len(ids_b), 7, 3)
    for feature, (start, length) in zip(features, spans):
        expected = [2] + kept_a + [3] + ids_b[start:start + length] + [3]
        assert feature.input_ids == expected + [0] * (16 - len(expected))
        assert feature.segment_ids[:len(expected)] == [0] * 8 + [1] * (length + 1)
    assert [f.example_index for f in features] == [0] * len(spans) + [1]
    assert features[-1].input_ids[:6] == [2, VOCAB.index("bad"), 3, VOCAB.index("the"),
                                          VOCAB.index("plot"), 3]


@pytest.mark.parametrize("pair", [False, True])
def test_graph_windows_equal_the_python_windows(pair):
    rng = np.random.default_rng(7)
    lengths_a = [0, 3, 9, 10, 11, 25, 40, 2]
    lengths_b = [0, 30, 1, 4, 22, 6, 40, 13]
    ids_a = [list(rng.integers(5, 99, n)) for n in lengths_a]
    ids_b = [list(rng.integers(5, 99, n)) for n in lengths_b] if pair else None
    stride = 2 if pair else 4
    expected = [window for index in range(len(ids_a)) for window in windows.window_segments(
        ids_a[index], ids_b[index] if pair else None, SEQ, stride)]
    segments, document = windows_graph.window_ragged_segments(
        tf.ragged.constant(ids_a, tf.int64),
        tf.ragged.constant(ids_b, tf.int64) if pair else None, SEQ, stride)
    got = [[segment[row].numpy().tolist() for segment in segments]
           for row in range(len(expected))]
    assert got == [[list(map(int, part)) for part in window] for window in expected]
    counts = [len(windows.window_segments(ids_a[i], ids_b[i] if pair else None, SEQ,
                                          stride)) for i in range(len(ids_a))]
    assert document.numpy().tolist() == np.repeat(np.arange(len(ids_a)), counts).tolist()


def test_bad_window_options_are_refused_before_any_work(tmp_path):
    write_data(tmp_path / "data")
    with pytest.raises(ValueError, match=r"doc_stride=10 must be smaller than the window's "
                                         r"capacity 10 \(max_seq_length=12"):
        classification_task.run(options(tmp_path, do_train=True, long_document="windows",
                                        doc_stride=10))
    with pytest.raises(ValueError, match=r"doc_stride must be a positive integer, got 0.*"
                                         r"leaves 10 tokens"):
        classification_task.run(options(tmp_path, do_train=True, long_document="windows",
                                        doc_stride=0))
    with pytest.raises(ValueError, match=r"--window_pooling=max applies to "
                                         r"--long_document=windows only"):
        classification_task.run(options(tmp_path, do_train=True, window_pooling="max"))
    with pytest.raises(ValueError, match=r"--doc_stride=3 applies to --long_document="):
        classification_task.run(options(tmp_path, do_train=True, doc_stride=3))
    with pytest.raises(ValueError, match="long_document must be one of truncate, windows"):
        classification_task.run(options(tmp_path, do_train=True, long_document="split"))
    assert not (tmp_path / "out" / "train.tf_record").exists()
    # A pair's second text has 12 - 3 - 4 = 5 tokens a window.
    with pytest.raises(ValueError, match=r"doc_stride=5 must be smaller than the window's "
                                         r"capacity 5 .*first text keeps up to 4"):
        windows.check_stride(5, SEQ, pair=True)


def test_pooling_numpy_golden():
    logits = np.array([[1.0, -2.0], [3.0, 0.5], [0.0, 0.0], [-1.0, 4.0]], np.float32)
    counts = np.array([2, 1, 1])
    np.testing.assert_allclose(long_documents.pool_logits(logits, counts, "mean"),
                               [[2.0, -0.75], [0.0, 0.0], [-1.0, 4.0]])
    np.testing.assert_allclose(long_documents.pool_logits(logits, counts, "max"),
                               [[3.0, 0.5], [0.0, 0.0], [-1.0, 4.0]])


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """One windowed run: train, eval, predict and export (mean pooling)."""
    tmp_path = tmp_path_factory.mktemp("windows_run")
    test_texts = write_data(tmp_path / "data")
    run_options = options(tmp_path, do_train=True, do_eval=True, do_predict=True,
                          long_document="windows", doc_stride=STRIDE,
                          export_dir=str(tmp_path / "export"))
    outcome = driver.execute(classification_task.ClassificationTask(run_options))
    test_results = np.loadtxt(tmp_path / "out" / "test_results.tsv", delimiter="\t")
    return tmp_path, test_texts, outcome, test_results


def test_windows_learn_a_label_past_the_first_window(trained_run):
    # Truncation keeps the first 10 words, which never hold the label word: it is at
    # chance by construction (the slow test below runs it). The windows learn it.
    for text, _ in late_label_rows(48, 0) + late_label_rows(24, 1):
        assert not {"good", "bad"} & set(text.split()[:SEQ - 2])
    _, _, outcome, _ = trained_run
    assert outcome.results["eval_examples"] == 24  # documents, not windows
    assert outcome.results["eval_accuracy"] >= 0.9, outcome.results
    assert outcome.results["eval_loss"] < 0.5 < np.log(2)  # below chance: it trained


@pytest.mark.slow
def test_windows_beat_truncation_on_a_label_past_the_first_window(trained_run, tmp_path):
    _, _, outcome, _ = trained_run
    write_data(tmp_path / "data")
    truncated = classification_task.run(options(tmp_path, do_train=True, do_eval=True))
    assert truncated["eval_examples"] == 24
    assert truncated["eval_accuracy"] <= 0.75, truncated
    assert outcome.results["eval_accuracy"] > truncated["eval_accuracy"]


@pytest.mark.parametrize("pooling", ["mean", "max"])
def test_eval_and_predict_report_the_pooled_window_logits(trained_run, pooling):
    tmp_path, test_texts, outcome, test_results = trained_run
    model = outcome.runner.model
    results = outcome.results
    if pooling == "max":  # the trained run again, eval and predict only, pooling by max
        results = classification_task.run(options(
            tmp_path, do_eval=True, do_predict=True, long_document="windows",
            doc_stride=STRIDE, window_pooling="max"))
    dev = late_label_rows(24, 1)
    logits = np.stack([document_logits(model, text.split(), pooling) for text, _ in dev])
    labels = np.array([int(label) for _, label in dev])
    probabilities = softmax(logits)
    assert results["eval_accuracy"] == pytest.approx(
        np.mean(probabilities.argmax(-1) == labels))
    assert results["eval_loss"] == pytest.approx(
        -np.mean(np.log(probabilities[np.arange(24), labels])), rel=1e-4)
    written = (test_results if pooling == "mean" else
               np.loadtxt(tmp_path / "out" / "test_results.tsv", delimiter="\t"))
    assert written.shape == (len(test_texts), 2)  # one row per document, in input order
    golden = softmax(np.stack([document_logits(model, text.split(), pooling)
                               for text in test_texts]))
    np.testing.assert_allclose(written, golden, atol=2e-6)


def test_export_windows_a_long_text_as_the_run_did(trained_run):
    tmp_path, test_texts, outcome, written = trained_run
    assert len(test_texts[-1]) >= 10_000 and len(test_texts[-1].split()) > 1500
    serving = tf.saved_model.load(str(tmp_path / "export")).signatures["serving_default"]
    served = serving(text_a=tf.constant(test_texts))
    # The run's test_results.tsv (Python windows, numpy pooling) and the golden.
    np.testing.assert_allclose(served["probabilities"].numpy(), written, atol=1e-5)
    golden = document_logits(outcome.runner.model, test_texts[-1].split(), "mean")
    np.testing.assert_allclose(served["logits"].numpy()[-1], golden, atol=1e-5)
    assert served["labels"].numpy()[-1].decode() == str(int(written[-1].argmax()))
    # bert-export-model exports the finished run again with its stride and pooling.
    run = options(tmp_path)
    again = export_checkpoint.export_from_checkpoint(export_checkpoint.ExportOptions(
        model_type="classifier", init_checkpoint=run.output_dir, vocab_file=run.vocab_file,
        bert_config_file=run.bert_config_file, max_seq_length=SEQ, doc_stride=STRIDE,
        window_pooling="mean", export_dir=str(tmp_path / "again")))
    served_again = tf.saved_model.load(again).signatures["serving_default"](
        text_a=tf.constant(test_texts[-1:]))
    np.testing.assert_allclose(served_again["probabilities"].numpy(), written[-1:],
                               atol=1e-5)


def test_exported_pair_classifier_pools_the_windows_of_the_second_text(tmp_path):
    # Mean pooling of one text: test_export_windows_a_long_text_as_the_run_did.
    pooling = "max"
    vocab_file = write_tiny_model_files(tmp_path, WORDS)[0]
    model = tiny_model(BertClassifier, tiny_config(), seed=3, num_classes=3)
    path = export.export_classifier(
        model, Preprocessor(vocab_file, True, 16, text_pair=True), str(tmp_path / "e"),
        doc_stride=3, window_pooling=pooling)
    first, long_second = "good movie", long_test_text(characters=300)
    serving = tf.saved_model.load(path).signatures["serving_default"]
    served = serving(text_a=tf.constant([first, "bad"]),
                     text_b=tf.constant([long_second, "the plot"]))["logits"].numpy()
    ids_a = [VOCAB.index(w) for w in first.split()]
    ids_b = [VOCAB.index(w) for w in long_second.split()]
    rows = []
    for start, length in golden_spans(len(ids_b), 16 - 3 - len(ids_a), 3):
        row = [2] + ids_a + [3] + ids_b[start:start + length] + [3]
        rows.append((row + [0] * (16 - len(row)),
                     [0] * (len(ids_a) + 2) + [1] * (length + 1) + [0] * (16 - len(row))))
    input_ids = np.array([ids for ids, _ in rows], np.int32)
    window_logits = model({"input_ids": tf.constant(input_ids),
                           "input_mask": tf.constant((input_ids > 0).astype(np.int32)),
                           "segment_ids": tf.constant([s for _, s in rows], tf.int32)},
                          training=False)["logits"].numpy()
    assert len(rows) > 10
    np.testing.assert_allclose(served[0], golden_pool(window_logits, pooling), atol=1e-5)
    with pytest.raises(ValueError, match=r"doc_stride=7 must be smaller than the window's "
                                         r"capacity 7"):
        export.export_classifier(
            model, Preprocessor(vocab_file, True, 16, text_pair=True), str(tmp_path / "f"),
            doc_stride=7)
