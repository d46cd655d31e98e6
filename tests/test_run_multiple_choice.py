"""Multiple choice (SWAG): files, features, the model, training, export and the command.

The SWAG-format files are built from real sentences (`swag_rows`): the start of a
sentence is `sent1`, its next word `sent2`, and the right ending the rest of that
sentence; the wrong endings are the rests of other sentences. Only sentences whose rest
repeats a word of their start are used, and wrong endings share no word with the start,
so that a tiny model can learn the task from a few hundred examples. The learning run
reads CoNLL-2003 (../shared/data, skipped without it); the other tests read the
project's demo corpus (demo/data/corpus.txt).
"""

import collections
import csv
import json
import pathlib
import random
import re
import subprocess
import sys
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.models import BertEncoder
from bert_tf.runs import export_checkpoint
from bert_tf.tasks.multiple_choice import data as choice_data
from bert_tf.tasks.multiple_choice import task as choice_task
from bert_tf.tasks.multiple_choice.options import MultipleChoiceOptions
from bert_tf.text import tokenization
from bert_tf.weights import checkpoints
from bert_tf.tasks.multiple_choice.model import BertMultipleChoice
from flag_contract import check_every_flag_reaches_options
from harness import (SPECIAL_TOKENS, tiny_config, tiny_model, write_released_checkpoint,
                     write_tiny_model_files)

REPO = pathlib.Path(__file__).resolve().parents[1]
DEMO_CORPUS = REPO / "demo" / "data" / "corpus.txt"
SWAG_HEADER = ["video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
               "ending0", "ending1", "ending2", "ending3", "label"]


# ------------------------------------------------------------------------ test data
def corpus_sentences(path=DEMO_CORPUS):
    """The demo corpus's sentences, as lists of words."""
    return [line.split() for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def conll_sentences(path):
    """CoNLL-2003's sentences (first column), as lists of words."""
    sentences, words = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        fields = line.split()
        if fields and fields[0] != "-DOCSTART-":
            words.append(fields[0])
        elif words:
            sentences.append(words)
            words = []
    return sentences


def _word_set(words):
    return {word.lower() for word in words if word.isalpha()}


def swag_rows(sentences, count, seed, num_choices=4):
    """SWAG rows (sent1, sent2, endings, label) from real sentences (module docstring)."""
    rng = random.Random(seed)
    candidates = []
    for words in sentences:
        middle = len(words) // 2
        start, rest = words[:middle], words[middle + 1:]
        if 6 <= len(words) <= 24 and _word_set(start) & _word_set(rest):
            candidates.append((start, words[middle], rest))
    rng.shuffle(candidates)
    rows = []
    for start, head, rest in candidates:
        wrong = [other for _, _, other in rng.sample(candidates, len(candidates))
                 if other is not rest and not _word_set(start) & _word_set(other)]
        if len(wrong) < num_choices - 1 or len(rows) == count:
            continue
        label = rng.randrange(num_choices)
        endings = wrong[:label] + [rest] + wrong[label:num_choices - 1]
        rows.append((" ".join(start), head, [" ".join(e) for e in endings], label))
    return rows


def write_swag_csv(path, rows, labelled=True):
    """SWAG's CSV layout (its extra columns too; the test file has no label)."""
    header = SWAG_HEADER if labelled else SWAG_HEADER[:-1]
    with open(path, "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(header)
        for index, (sent1, sent2, endings, label) in enumerate(rows):
            writer.writerow([f"real-{index}", index, f"{sent1} {sent2}", sent1, sent2,
                             "gold", *endings] + ([label] if labelled else []))
    return str(path)


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(record) + "\n" for record in records),
                    encoding="utf-8")
    return str(path)


def words_of(rows, size=94):
    """The `size` most frequent lower-cased words and marks of `rows` (the tiny vocab)."""
    counts = collections.Counter(
        word for sent1, sent2, endings, _ in rows for text in (sent1, sent2, *endings)
        for word in re.findall(r"\w+|[^\w\s]", text.lower()))
    return [word for word, _ in counts.most_common(size)]


def options(tmp_path, words, **changes):
    vocab_file, config_file = write_tiny_model_files(tmp_path, words,
                                                     max_position_embeddings=32)
    values = dict(data_dir=str(tmp_path / "data"), output_dir=str(tmp_path / "out"),
                  vocab_file=vocab_file, bert_config_file=config_file, max_seq_length=32,
                  train_batch_size=16, eval_batch_size=32, predict_batch_size=4,
                  learning_rate=2e-3, num_train_epochs=5.0, warmup_proportion=0.1,
                  save_checkpoints_steps=1000, steps_per_loop=50, seed=1, dropout_rate=0.0,
                  allow_random_encoder=True)
    values.update(changes)
    return MultipleChoiceOptions(**values)


def write_tiny_inputs(tmp_path):
    """The data of `tiny_options` (shared with test_commands): SWAG rows of the demo
    corpus."""
    (tmp_path / "data").mkdir(exist_ok=True)
    write_swag_csv(tmp_path / "data" / "train.csv", swag_rows(corpus_sentences(), 32, 0))


def tiny_options(tmp_path, **changes):
    """A short training run of this task (shared with test_commands)."""
    words = words_of(swag_rows(corpus_sentences(), 32, 0))
    return options(tmp_path, words, **{"do_train": True, "num_train_epochs": 1.0,
                                       **changes})


# -------------------------------------------------------------------- files, features
VOCAB = SPECIAL_TOKENS + ["the", "river", "town", "flows", "east", "west", "is", "old",
                          "where", "does", "it", "go", "?", "."]


def test_swag_pairs_and_features_are_laid_out_as_run_swag(tmp_path, tokenizer):
    rows = [("the river", "it", ["flows east .", "is old .", "flows west .", "go ."], 2)]
    path = write_swag_csv(tmp_path / "val.csv", rows)
    [example] = choice_data.read_examples(path, "eval")
    assert (example.context, example.question, example.label) == ("the river", "", 2)
    assert example.choices == ("it flows east .", "it is old .", "it flows west .",
                               "it go .")
    features = choice_data.convert_examples([example], 10, tokenizer)
    ids = {token: index for index, token in enumerate(VOCAB)}
    # [CLS] the river [SEP] it flows west . [SEP] pad: choice 2, hand-written.
    expected = [ids[t] for t in "[CLS] the river [SEP] it flows west . [SEP]".split()] + [0]
    assert features["input_ids"].shape == (1, 4, 10)
    assert features["input_ids"][0, 2].tolist() == expected
    assert features["segment_ids"][0, 2].tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 1, 0]
    assert features["input_mask"][0, 3].tolist() == [1] * 8 + [0, 0]
    assert features["label_ids"].tolist() == [2]
    # The test file has no label column: unlabelled examples.
    test = choice_data.read_examples(write_swag_csv(tmp_path / "test.csv", rows, False),
                                     "predict", labelled=False)
    assert test[0].label is None and test[0].choices == example.choices


def test_jsonl_pair_keeps_the_question_and_cuts_the_context(tmp_path, tokenizer):
    path = write_jsonl(tmp_path / "dev.jsonl", [
        {"context": "the old town is where the river flows east",
         "question": "where does it go ?", "choices": ["east .", "west ."], "label": 0},
        {"question": "where does it go ?", "choices": ["east .", "west ."], "label": "1"}])
    first, second = choice_data.read_examples(path, "eval")
    assert (second.context, second.label) == ("", 1)
    features = choice_data.convert_examples([first, second], 14, tokenizer)
    ids = {token: index for index, token in enumerate(VOCAB)}
    # 9 context + 5 question + 2 choice tokens into 14 - 3 = 11: the pair keeps 9 + 2
    # (longest first); the first segment is the question's 5 after the context's first 4.
    expected = "[CLS] the old town is where does it go ? [SEP] east . [SEP]".split()
    assert features["input_ids"][0, 0].tolist() == [ids[t] for t in expected]
    no_context = "[CLS] where does it go ? [SEP] west . [SEP]".split()
    assert features["input_ids"][1, 1].tolist()[:10] == [ids[t] for t in no_context]


@pytest.mark.parametrize("content, message", [
    ('{"question": "q", "choices": ["a", "b"], "label": 0}\n'
     '{"question": "q", "choices": ["a", "b", "c"], "label": 0}\n',
     r"bad.jsonl:2: 3 choices, but .*bad.jsonl:1 has 2; every row of a file needs the "
     r"same number of choices"),
    ('{"question": "q", "choices": ["a", "b"], "label": 0}\n'
     '{"question": "q", "choices": ["a", "b"], "label": 2}\n',
     r"bad.jsonl:2: label 2 is out of range: the row has 2 choices, so the label must be "
     r"0 .. 1"),
    ('{"question": "q", "choices": ["a", "b"], "label": -1}\n', r"bad.jsonl:1: label -1 is "
     r"out of range"),
    ('{"question": "q", "choices": ["a", "b"], "label": true}\n',
     r"bad.jsonl:1: label True is a boolean; expected the index"),
    ('{"question": "q", "choices": ["a"], "label": 0}\n',
     r"bad.jsonl:1: choices must be a list of at least two non-empty strings"),
    ('{"prompt": "q", "choices": ["a", "b"], "label": 0}\n',
     r"bad.jsonl:1: no question; each line needs \"question\", \"choices\""),
    ('{"question": "q", "choices": ["a", "b"]}\n', r"bad.jsonl:1: no label; the train and "
     r"eval files need the index of the right choice"),
])
def test_bad_jsonl_names_file_line_and_value(tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        choice_data.read_examples(str(path), "train")


@pytest.mark.parametrize("header, row, message", [
    ("sent1,sent2,ending0,ending1,label", "a,b,c,d,5",
     r"bad.csv:2: label 5 is out of range: the row has 2 choices"),
    ("sent1,ending0,ending1,label", "a,c,d,0",
     r"bad.csv: no column sent2 \(columns: sent1, ending0, ending1, label\); a SWAG CSV "
     r"needs the columns sent1, sent2, ending0, ending1, \.\.\."),
    ("sent1,sent2,ending0,ending1,ending3,label", "a,b,c,d,e,0",
     r"bad.csv: no column ending2 \(columns: .*\(numbered from 0 without a gap\)"),
    ("sent1,sent2,ending0,ending1,ending2,label", "a,b,c,,e,0",
     r"bad.csv:2: ending1 empty; every choice needs its text"),
    ("sent1,sent2,ending0,ending1,label", "a,b,c,d,x",
     r"bad.csv:2: label 'x' is not a choice index; expected 0 .. 1"),
])
def test_bad_swag_csv_names_file_line_and_columns(tmp_path, header, row, message):
    path = tmp_path / "bad.csv"
    path.write_text(f"{header}\n{row}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        choice_data.read_examples(str(path), "train")


def test_a_test_file_labels_every_row_or_none(tmp_path):
    path = write_jsonl(tmp_path / "test.jsonl", [
        {"question": "q", "choices": ["a", "b"]},
        {"question": "q", "choices": ["a", "b"], "label": 1}])
    with pytest.raises(ValueError, match=r"test.jsonl:2: a label, but .*test.jsonl:1 has "
                                         r"none; label every row or none"):
        choice_data.read_examples(path, "predict", labelled=False)


# ----------------------------------------------------------------------------- model
def test_model_scores_each_choice_from_its_pooled_output():
    model = tiny_model(BertMultipleChoice, tiny_config(), seed=3, dropout_rate=0.3,
                       head_initializer="normal")
    rng = np.random.default_rng(0)
    inputs = {"input_ids": rng.integers(5, 99, (2, 3, 7)).astype("int32"),
              "input_mask": np.ones((2, 3, 7), "int32"),
              "segment_ids": np.zeros((2, 3, 7), "int32")}
    inputs["input_mask"][:, :, 5:] = 0
    logits = model(inputs, training=False)["logits"].numpy()
    assert logits.shape == (2, 3)
    # Independently: each [S] row alone through the encoder, then w . pooled + b.
    kernel, bias = (v.numpy() for v in model.head.dense.weights)
    for b in range(2):
        for c in range(3):
            row = {name: value[b:b + 1, c] for name, value in inputs.items()}
            pooled = model.encoder(row, training=False)["pooled_output"].numpy()[0]
            assert logits[b, c] == pytest.approx(pooled @ kernel[:, 0] + bias[0], abs=1e-5)
    config = model.get_config()
    assert (config["dropout_rate"], config["head_initializer"]) == (0.3, "normal")
    assert "cls/multiple_choice/output_weights" in checkpoints.google_variable_map(model)
    with pytest.raises(ValueError, match=r"input_ids` of shape \[batch, num_choices, "
                                         r"seq_length\], got rank 2"):
        model({name: value[:, 0] for name, value in inputs.items()})


@pytest.mark.slow
def test_one_training_step_lowers_the_loss(tmp_path):
    rows = swag_rows(corpus_sentences(), 16, seed=0)
    path = write_swag_csv(tmp_path / "train.csv", rows)
    run = options(tmp_path, words_of(rows))
    tokenizer = tokenization.FullTokenizer(run.vocab_file, do_lower_case=True)
    features = choice_data.convert_examples(choice_data.read_examples(path, "train"), 32,
                                            tokenizer)
    task = choice_task.MultipleChoiceTask(run)
    task.context = types.SimpleNamespace(config=tiny_config(max_position_embeddings=32))
    keras.utils.set_random_seed(1)
    model = task.build_model()
    logits = model(features, training=False)["logits"].numpy().astype(np.float64)
    # Softmax cross-entropy of the right choice, computed here from the logits.
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    expected = -log_probs[np.arange(len(rows)), features["label_ids"]].mean()
    before = float(task.loss(features, model(features, training=False)))
    assert before == pytest.approx(expected, rel=1e-5)
    optimizer = keras.optimizers.Adam(1e-3)
    with tf.GradientTape() as tape:
        loss = task.loss(features, model(features, training=True))
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                  model.trainable_variables))
    assert float(task.loss(features, model(features, training=False))) < before


# ------------------------------------------------------------- runs, export, command
def _run_with_export(tmp_path, **changes):
    """A tiny run from a released encoder: train on SWAG rows of the demo corpus, eval
    on its val.csv, predict long-context JSONL questions, export. Returns (the run's
    options, its results, the eval rows, the predicted questions)."""
    rows = swag_rows(corpus_sentences(), 40, seed=0)
    data = tmp_path / "data"
    data.mkdir()
    write_swag_csv(data / "train.csv", rows[:32])
    write_swag_csv(data / "val.csv", rows[32:])
    # Long contexts: the 24-token rows cut the context and keep the question.
    questions = [{"context": " ".join(sent1.split() * 4), "question": f"what about {head} ?",
                  "choices": endings, "label": label}
                 for sent1, head, endings, label in rows[32:36]]
    words = words_of(rows)
    released = tmp_path / "released"  # a google-research folder: the encoder loads
    write_tiny_model_files(released, words, max_position_embeddings=32)
    write_released_checkpoint(released, tiny_model(
        BertEncoder, tiny_config(max_position_embeddings=32), seed=0))
    run = options(tmp_path, words, do_train=True, do_eval=True, do_predict=True,
                  num_train_epochs=1.0, max_seq_length=24,
                  predict_file=write_jsonl(tmp_path / "questions.jsonl", questions),
                  init_checkpoint=str(released), allow_random_encoder=False, **changes)
    return run, choice_task.run(run), rows[32:], questions


def _predicted_probabilities(run, name):
    """The probability columns of `<name>_predictions.tsv` of a labelled split."""
    table = np.loadtxt(pathlib.Path(run.output_dir) / f"{name}_predictions.tsv",
                       delimiter="\t", skiprows=1)
    return table[:, 3:]


@pytest.mark.slow
def test_run_predicts_and_the_export_serves_the_same_probabilities(tmp_path):
    run, results, rows, questions = _run_with_export(
        tmp_path, export_dir=str(tmp_path / "export"), eval_every_steps=1,
        best_metric="eval_loss")
    assert results["global_step"] in (1, 2) and results["eval_examples"] == 8
    assert (tmp_path / "out" / "best" / "eval_results.txt").is_file()
    assert results["test_examples"] == 4 and 0 <= results["test_accuracy"] <= 1
    assert (tmp_path / "out" / "eval_results.txt").read_text().startswith("eval_accuracy = ")
    served = tf.saved_model.load(str(tmp_path / "export")).signatures["serving_default"]
    for name, texts in (("eval", [(s1, "", [f"{h} {e}" for e in ends])
                                  for s1, h, ends, _ in rows]),
                        ("test", [(q["context"], q["question"], q["choices"])
                                  for q in questions])):
        probabilities = _predicted_probabilities(run, name)
        outputs = served(context=tf.constant([t[0] for t in texts]),
                         question=tf.constant([t[1] for t in texts]),
                         choices=tf.constant([t[2] for t in texts]))
        np.testing.assert_allclose(outputs["probabilities"].numpy(), probabilities,
                                   atol=1e-5)
        assert outputs["prediction"].numpy().tolist() == probabilities.argmax(1).tolist()


@pytest.mark.slow
def test_export_model_serves_ids_and_examples_of_a_run(tmp_path):
    run, _, _, _ = _run_with_export(tmp_path)
    path = export_checkpoint.export_from_checkpoint(export_checkpoint.ExportOptions(
        model_type="multiple_choice", init_checkpoint=run.output_dir,
        vocab_file=run.vocab_file, bert_config_file=run.bert_config_file,
        max_seq_length=24, export_dir=str(tmp_path / "export")))
    signatures = tf.saved_model.load(path).signatures
    features = choice_data.convert_examples(
        choice_data.read_examples(run.predict_file, "predict"), 24,
        tokenization.FullTokenizer(run.vocab_file, do_lower_case=True))
    inputs = {name: features[name] for name in choice_data.FEATURE_NAMES}
    expected = _predicted_probabilities(run, "test")
    logits = signatures["serve_ids"](**{k: tf.constant(v) for k, v in inputs.items()})
    np.testing.assert_allclose(tf.nn.softmax(logits["logits"]).numpy(), expected,
                               atol=1e-5)
    examples = [tf.train.Example(features=tf.train.Features(feature={
        name: tf.train.Feature(int64_list=tf.train.Int64List(value=value[i].reshape(-1)))
        for name, value in inputs.items()})).SerializeToString() for i in range(4)]
    logits = signatures["serve_examples"](examples=tf.constant(examples))
    np.testing.assert_allclose(tf.nn.softmax(logits["logits"]).numpy(), expected,
                               atol=1e-5)
    with pytest.raises(tf.errors.InvalidArgumentError, match="examples disagree"):
        signatures["serve_examples"](examples=tf.constant([examples[0], tf.train.Example(
            features=tf.train.Features(feature={name: tf.train.Feature(
                int64_list=tf.train.Int64List(value=value[0, :2].reshape(-1)))
                for name, value in inputs.items()})).SerializeToString()]))


@pytest.mark.slow
def test_tiny_model_learns_swag_made_from_conll(tmp_path, shared_data_dir):
    rows = swag_rows(conll_sentences(shared_data_dir / "conll2003" / "eng.train"), 800,
                     seed=0)
    data = tmp_path / "data"
    data.mkdir()
    write_swag_csv(data / "train.csv", rows[:600])
    write_swag_csv(data / "val.csv", rows[600:])
    results = choice_task.run(options(tmp_path, words_of(rows), do_train=True,
                                      do_eval=True))
    # 600 examples / 16 * 5 epochs; chance is 1 in 4 (0.25 +- 0.03 on 200 examples).
    assert results["global_step"] == 187 and results["eval_examples"] == 200
    assert results["eval_accuracy"] >= 0.4, results


def test_every_flag_reaches_the_options_and_help_lists_them(tmp_path):
    assert check_every_flag_reaches_options(MultipleChoiceOptions) >= 40
    done = subprocess.run([sys.executable, "run_multiple_choice.py", "--help"], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    for flag in ("--data_dir", "--train_file", "--eval_file", "--predict_file",
                 "--max_seq_length", "--export_dir", "--[no]do_train"):
        assert flag in done.stdout, flag
    assert "--[no]pack_sequences" not in done.stdout  # an example is C rows already
    assert "bert-run-multiple-choice --data_dir=swagaf/data" in done.stdout
    missing = subprocess.run(
        [sys.executable, "run_multiple_choice.py", "--do_train",
         f"--data_dir={tmp_path}", f"--output_dir={tmp_path / 'out'}"],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines()[-1] == (
        f"bert-run-multiple-choice: error: no train file: expected one of "
        f"{tmp_path}/train.csv, {tmp_path}/train.jsonl (or pass train_file)")
