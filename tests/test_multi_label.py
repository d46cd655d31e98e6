"""Multi-label classification (run_classifier --multi_label): reading label sets, the
binary cross-entropy, micro / macro F1, a tiny end-to-end run, packing and the export."""

import json
import math

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.runs import export_checkpoint
from bert_tf.tasks.classification import data as classification_data
from bert_tf.runs.text_files import InputExample
from bert_tf.tasks.classification import metrics, multi_label
from bert_tf.tasks.classification import task as classification_task
from bert_tf.tasks.classification.options import ClassifierOptions
from bert_tf.text.tokenization import FullTokenizer
from harness import write_tiny_model_files, write_tsv

WORDS = ["sun", "rain", "wind", "the", "a", "day", "was", "is", "very", "quite", "today",
         "and", "then"]
FILLER = WORDS[3:]
LABELS = ["rainy", "sunny", "windy"]  # sorted: what the train file infers


def weather_rows(count, seed):
    """(text, label set): a label for each of "sun" / "rain" / "wind" in the text."""
    rng = np.random.default_rng(seed)
    rows = []
    for index in range(count):
        present = [word for bit, word in enumerate(("sun", "rain", "wind")) if index >> bit & 1]
        words = list(rng.choice(FILLER, size=4)) + present
        rng.shuffle(words)
        names = {"sun": "sunny", "rain": "rainy", "wind": "windy"}
        rows.append((" ".join(words), [names[word] for word in present]))
    return rows


def write_weather(folder, train=64, dev=16, test=6):
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in (("train", weather_rows(train, 0)), ("dev", weather_rows(dev, 1))):
        write_tsv(folder / f"{name}.tsv", [("text", "label")] +
                  [(text, ",".join(labels)) for text, labels in rows])
    write_tsv(folder / "test.tsv", [("id", "text")] + [
        (f"t{i}", text) for i, (text, _) in enumerate(weather_rows(test, 2))])


def options(tmp_path, **changes):
    vocab_file, config_file = write_tiny_model_files(tmp_path, WORDS)
    values = dict(task_name="generic", multi_label=True, id_column="id",
                  data_dir=str(tmp_path / "data"), output_dir=str(tmp_path / "out"),
                  vocab_file=vocab_file, bert_config_file=config_file, max_seq_length=12,
                  train_batch_size=16, eval_batch_size=5, predict_batch_size=4,
                  learning_rate=5e-3, num_train_epochs=40.0, warmup_proportion=0.1,
                  save_checkpoints_steps=1000, steps_per_loop=40, seed=1, dropout_rate=0.0,
                  allow_random_encoder=True)
    values.update(changes)
    return ClassifierOptions(**values)


# ----------------------------------------------------------------------------- metrics
def test_metrics_equal_hand_computed_values():
    gold = np.array([[1, 0, 1], [0, 1, 0], [1, 1, 0], [0, 0, 0]])
    predicted = np.array([[1, 0, 0], [0, 1, 1], [1, 1, 0], [0, 0, 0]])
    results = metrics.multi_label_metrics(predicted, gold, ["a", "b", "c"])
    # Per label: a tp 2 fp 0 fn 0; b tp 2 fp 0 fn 0; c tp 0 fp 1 fn 1. Totals tp 4, fp 1,
    # fn 1; rows 2 and 4 match exactly.
    assert results["f1_micro"] == pytest.approx(8 / 10)
    assert results["precision_micro"] == results["recall_micro"] == pytest.approx(4 / 5)
    assert results["f1_macro"] == pytest.approx((1 + 1 + 0) / 3)
    assert results["subset_accuracy"] == 0.5
    assert (results["precision/a"], results["recall/b"], results["f1/c"]) == (1.0, 1.0, 0.0)
    assert results["precision/c"] == results["recall/c"] == 0.0
    with pytest.raises(ValueError, match=r"\[N, C\] arrays of the same shape, C = 2"):
        metrics.multi_label_metrics(predicted, gold, ["a", "b"])


# ------------------------------------------------------------------------------- data
def test_label_sets_from_tsv_csv_and_jsonl(tmp_path):
    (tmp_path / "train.tsv").write_text("text\tlabel\nx\tPER, LOC\ny\t\nz\tLOC,LOC\n")
    processor = multi_label.MultiLabelProcessor(text_column="text")
    assert processor.get_labels(str(tmp_path)) == ["LOC", "PER"]
    examples = processor.get_examples(str(tmp_path), "train")
    assert [e.label for e in examples] == [("PER", "LOC"), (), ("LOC",)]
    features = classification_data.convert_examples_to_features(
        examples, ["LOC", "PER"], 8, FullTokenizer(
            write_tiny_model_files(tmp_path / "model", WORDS)[0]))
    assert [f.label_id for f in features] == [[1.0, 1.0], [0.0, 0.0], [1.0, 0.0]]
    jsonl = tmp_path / "jsonl"
    jsonl.mkdir()
    (jsonl / "train.jsonl").write_text('{"t": "x", "y": ["b", "a"]}\n{"t": "y", "y": []}\n')
    processor = multi_label.MultiLabelProcessor(text_column="t", label_column="y")
    assert processor.get_labels(str(jsonl)) == ["a", "b"]
    assert [e.label for e in processor.get_examples(str(jsonl), "train")] == [("b", "a"), ()]
    semicolons = tmp_path / "csv"
    semicolons.mkdir()
    (semicolons / "train.csv").write_text('text,label\n"x, y",a;b\nz,b\n')
    processor = multi_label.MultiLabelProcessor(";", text_column="text")
    assert [e.label for e in processor.get_examples(str(semicolons), "train")] == [
        ("a", "b"), ("b",)]


@pytest.mark.parametrize("dev_line, message", [
    ("x\tLOC,MISC", r"dev.tsv:3: label 'MISC' is not one of the labels of the train file "
                    r".*train.tsv \['LOC', 'PER'\]"),
    ("x\tLOC,,PER", r"dev.tsv:3: empty label in 'LOC,,PER' .*remove the doubled or "
                    "trailing separator"),
])
def test_a_bad_label_names_file_line_and_label(tmp_path, dev_line, message):
    (tmp_path / "train.tsv").write_text("text\tlabel\nx\tPER\ny\tLOC\n")
    (tmp_path / "dev.tsv").write_text(f"text\tlabel\ny\tPER\n{dev_line}\n")
    processor = multi_label.MultiLabelProcessor(text_column="text")
    with pytest.raises(ValueError, match=message):
        processor.get_examples(str(tmp_path), "dev")


def test_json_values_of_another_type_are_refused(tmp_path):
    for value, message in ((None, r"train.jsonl:1: label column 'label' holds null; "
                                  r"expected a list of labels"),
                           ([1, "a"], r"train.jsonl:1: label 'a' is a string, but the label "
                                      r"of line 1 \(1\) is an integer")):
        (tmp_path / "train.jsonl").write_text(json.dumps({"text": "x", "label": value}))
        with pytest.raises(ValueError, match=message):
            multi_label.MultiLabelProcessor().get_labels(str(tmp_path))


# ------------------------------------------------------------------------------- loss
def independent_bce(logits, labels, pos_weights):
    """-[p y log s + (1 - y) log(1 - s)], s = 1 / (1 + e^-x), averaged, in plain Python."""
    total, count = 0.0, 0
    for row_logits, row_labels in zip(logits, labels):
        for x, y, p in zip(row_logits, row_labels, pos_weights):
            s = 1.0 / (1.0 + math.exp(-x))
            total -= p * y * math.log(s) + (1.0 - y) * math.log(1.0 - s)
            count += 1
    return total / count


def test_loss_is_binary_cross_entropy_over_labels_and_examples():
    logits = np.array([[2.0, -1.0, 0.5], [-3.0, 0.25, 4.0]], np.float32)
    labels = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]], np.float32)
    features = {"label_ids": tf.constant(labels)}
    got = float(multi_label.loss_fn()(features, {"logits": tf.constant(logits)}))
    assert got == pytest.approx(independent_bce(logits, labels, [1, 1, 1]), rel=1e-5)
    assert multi_label.mean_loss(logits, labels) == pytest.approx(got, rel=1e-5)
    pos = np.array([3.0, 0.5, 1.0], np.float32)  # torch's pos_weight
    weighted = float(multi_label.loss_fn(pos)(features, {"logits": tf.constant(logits)}))
    assert weighted == pytest.approx(independent_bce(logits, labels, pos), rel=1e-5)
    assert multi_label.mean_loss(logits, labels, pos) == pytest.approx(weighted, rel=1e-5)
    # Packed rows [B, K, C]: the mean over the real examples only.
    packed = {"label_ids": tf.constant(np.stack([labels, labels * 0])),
              "sequence_weights": tf.constant([[1.0, 1.0], [0.0, 0.0]])}
    got = multi_label.loss_fn()(packed, {"logits": tf.constant(np.stack([logits, logits]))})
    assert float(got) == pytest.approx(independent_bce(logits, labels, [1, 1, 1]), rel=1e-5)


# -------------------------------------------------------------------------- end to end
@pytest.mark.slow
def test_train_eval_predict_and_export(tmp_path):
    write_weather(tmp_path / "data")
    export_dir = tmp_path / "export"
    run = options(tmp_path, do_train=True, do_eval=True, do_predict=True,
                  export_dir=str(export_dir))
    task = classification_task.ClassificationTask(run)
    outcome = classification_task.driver.execute(task)
    results, out = outcome.results, tmp_path / "out"
    # 64 / 16 * 40 = 160 steps: each word's label is learnt (an untrained head: a loss
    # of about log 2 = 0.69).
    assert results["global_step"] == 160
    assert results["eval_f1_micro"] >= 0.9 and results["eval_loss"] < 0.3, results
    assert {f"eval_{kind}/{label}" for kind in ("precision", "recall", "f1")
            for label in LABELS} <= set(results)
    assert {"eval_f1_macro", "eval_loss"} <= set(results)
    assert set(task.metric_names()) <= set(results)
    assert f"eval_f1_micro = {results['eval_f1_micro']}" in (
        out / "eval_results.txt").read_text().splitlines()
    probabilities = np.loadtxt(out / "test_results.tsv", delimiter="\t")
    assert probabilities.shape == (6, 3)
    assert not np.allclose(probabilities.sum(axis=1), 1.0)  # sigmoid, not softmax
    lines = (out / "predictions.tsv").read_text().splitlines()
    assert lines[0] == "index\tprediction\trainy\tsunny\twindy"
    rows = [line.split("\t") for line in lines[1:]]
    assert [row[0] for row in rows] == [f"t{i}" for i in range(6)]
    assert [row[1] for row in rows] == [
        ",".join(label for label, p in zip(LABELS, row) if p >= 0.5) for row in probabilities]
    assert rows[3][1] == "rainy,sunny"  # "sun" and "rain" in the text
    np.testing.assert_allclose(np.array([row[2:] for row in rows], float), probabilities,
                               atol=1e-6)
    # The SavedModel answers sigmoid probabilities per label and the label names.
    serving = tf.saved_model.load(str(export_dir)).signatures["serving_default"]
    served = serving(text_a=tf.constant([text for text, _ in weather_rows(6, 2)]))
    np.testing.assert_allclose(served["probabilities"].numpy(), probabilities, atol=1e-5)
    assert served["label_names"].numpy()[0].tolist() == [label.encode() for label in LABELS]
    names = [[name.decode() for name in row if name] for row in served["labels"].numpy()]
    assert [",".join(row) for row in names] == [row[1] for row in rows]
    assert served["predicted"].numpy().tolist() == (probabilities >= 0.5).astype(int).tolist()
    # bert-export-model of the run's output_dir serves the same (the run says multi-label).
    again = export_checkpoint.export_from_checkpoint(export_checkpoint.ExportOptions(
        model_type="classifier", init_checkpoint=str(out), export_dir=str(tmp_path / "e2"),
        vocab_file=run.vocab_file, bert_config_file=run.bert_config_file, max_seq_length=12))
    served = tf.saved_model.load(again).signatures["serving_default"](
        text_a=tf.constant([text for text, _ in weather_rows(6, 2)]))
    np.testing.assert_allclose(served["probabilities"].numpy(), probabilities, atol=1e-5)
    assert served["predicted"].numpy().tolist() == (probabilities >= 0.5).astype(int).tolist()
    export_options = dict(model_type="classifier", init_checkpoint=str(out),
                          vocab_file=run.vocab_file, bert_config_file=run.bert_config_file,
                          max_seq_length=12)
    # --multi_label_threshold: a threshold between two of the probabilities moves the
    # predicted labels of bert-export-model's SavedModel.
    ranked = np.sort(probabilities.ravel())
    threshold = float(ranked[len(ranked) // 3: len(ranked) // 3 + 2].mean())  # a midpoint
    assert (probabilities >= threshold).sum() != (probabilities >= 0.5).sum()
    third = export_checkpoint.export_from_checkpoint(export_checkpoint.ExportOptions(
        export_dir=str(tmp_path / "e3"), multi_label_threshold=threshold, **export_options))
    served = tf.saved_model.load(third).signatures["serving_default"](
        text_a=tf.constant([text for text, _ in weather_rows(6, 2)]))
    assert served["predicted"].numpy().tolist() == (
        probabilities >= threshold).astype(int).tolist()
    for change, message in [
            (dict(multi_label_threshold=1.0), "must be between 0 and 1"),
            (dict(multi_label_threshold=0.3, export_format="huggingface"),
             "gives logits or probabilities only"),
            (dict(multi_label_threshold=0.3, model_type="encoder"),
             "applies to the classifier of a --multi_label run")]:
        with pytest.raises(ValueError, match=message):
            export_checkpoint.export_from_checkpoint(export_checkpoint.ExportOptions(
                **dict(export_options, export_dir=str(tmp_path / "bad"), **change)))
        assert not (tmp_path / "bad").exists()


def test_packed_rows_keep_each_example_with_its_labels(tmp_path):
    # Each example is one distinct word; packed rows must carry that example's labels
    # in its slot (the packing moves one value per example: a column per label).
    vocab_file, _ = write_tiny_model_files(tmp_path, WORDS)
    tokenizer = FullTokenizer(vocab_file)
    examples = [InputExample(
        str(i), word, None, tuple(LABELS[bit] for bit in range(3) if i >> bit & 1))
        for i, word in enumerate(WORDS)]
    path = str(tmp_path / "train.tf_record")
    classification_data.write_example_features(examples, LABELS, 8, tokenizer, path)
    batch = next(iter(classification_data.classifier_dataset(
        path, 8, 4, True, False, seed=0, max_sequences_per_row=3, num_multi_labels=3)))
    assert batch["label_ids"].shape == (4, 3, 3)
    word_ids = tokenizer.convert_tokens_to_ids(WORDS)
    seen = 0
    for row in range(4):
        for slot in range(3):
            if batch["sequence_weights"][row, slot] == 0:
                continue
            token = int(batch["input_ids"][row, batch["cls_positions"][row, slot] + 1])
            index = word_ids.index(token)
            expected = [float(index >> bit & 1) for bit in range(3)]
            assert batch["label_ids"][row, slot].numpy().tolist() == expected
            seen += 1
    assert seen > 4  # rows hold several examples


@pytest.mark.parametrize("change, message", [
    (dict(task_name="sst-2"), "multi_label needs task_name=generic"),
    (dict(is_regression=True), "multi_label and is_regression exclude each other"),
    (dict(multi_label_threshold=1.0), "multi_label_threshold must be between 0 and 1"),
    (dict(label_separator=""), "label_separator is empty"),
])
def test_bad_settings_are_refused_before_any_work(tmp_path, change, message):
    write_weather(tmp_path / "data")
    with pytest.raises(ValueError, match=message):
        classification_task.run(options(tmp_path, do_train=True, **change))
    assert not (tmp_path / "out" / "train.tf_record").exists()

