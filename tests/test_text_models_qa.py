"""`TextQuestionAnswerer`: extractive question answering on Python text, as bert-run-squad."""

import json
import pathlib

import numpy as np
import pytest
import tensorflow as tf

import bert_tf
from bert_tf.models import BertEncoder
from bert_tf.runs import export_checkpoint
from bert_tf.tasks.squad import data as squad_data
from bert_tf.tasks.squad import features as squad_features
from bert_tf.tasks.squad import task as squad_task
from harness import (RUNNER_OVERRIDES, SPECIAL_TOKENS, tiny_config, tiny_model,
                     write_released_checkpoint)
import test_run_squad

# What every tiny answerer of this file windows with (as test_run_squad's runs).
WINDOWS = dict(max_seq_length=16, doc_stride=4, max_query_length=4, max_answer_length=4)


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """A tiny google-research folder (vocab 99, hidden 32, intermediate 37, 2 layers, 16
    positions) whose vocab holds test_run_squad's words."""
    folder = tmp_path_factory.mktemp("released") / "uncased_L-2_H-32_A-4"
    config = tiny_config(**RUNNER_OVERRIDES)
    vocab = SPECIAL_TOKENS + ["where", "?", "café", "cafe", "."] + test_run_squad.WORDS
    vocab += [f"[unused{i}]" for i in range(config.vocab_size - len(vocab))]
    write_released_checkpoint(str(folder), tiny_model(BertEncoder, config, seed=4), vocab)
    return folder


def squad_rows(path, first_answer=True):
    """(questions, contexts, answers, ids) of a SQuAD file of test_run_squad.write_squad:
    each question's first answer, or the list of its answers."""
    paragraphs = json.loads(pathlib.Path(path).read_text(encoding="utf-8"))["data"][0][
        "paragraphs"]
    qas = [paragraph["qas"][0] for paragraph in paragraphs]
    return ([qa["question"] for qa in qas], [paragraph["context"] for paragraph in paragraphs],
            [qa["answers"][0] if first_answer else qa["answers"] for qa in qas],
            [qa["id"] for qa in qas])


@pytest.fixture(scope="module")
def fitted(released, tmp_path_factory):
    """A new span head fitted on "Where?" -> "Café" (test_run_squad's rule), its
    history and the dev rows."""
    folder = tmp_path_factory.mktemp("data")
    train = squad_rows(test_run_squad.write_squad(folder / "train.json", 40, seed=0))
    dev = squad_rows(test_run_squad.write_squad(folder / "dev.json", 12, seed=1))
    model = bert_tf.TextQuestionAnswerer.from_pretrained(released, seed=1, **WINDOWS)
    with pytest.raises(ValueError, match="the span_labeler head is new"):
        model.predict(dev[0], dev[1])
    answers = {"text": [a["text"] for a in train[2]],  # a dict of columns, as HF datasets
               "answer_start": [a["answer_start"] for a in train[2]]}
    history = model.fit(train[0], train[1], answers, epochs=8, batch_size=8,
                        learning_rate=3e-3, seed=1, verbose=0,
                        validation_data=((dev[0], dev[1]), dev[2]))
    return model, history.history, dev


def test_fit_learns_the_span_rule_and_gives_each_answer_its_place(fitted):
    model, history, (questions, contexts, answers, _) = fitted
    assert history["loss"][-1] < history["loss"][0] / 10, history["loss"]
    assert history["val_loss"][-1] < history["val_loss"][0], history["val_loss"]
    predicted = model.predict(questions, contexts, verbose=0)
    assert [p["answer"] for p in predicted] == ["Café"] * len(questions)
    for p, context, gold in zip(predicted, contexts, answers):
        assert (p["start"], p["end"]) == (gold["answer_start"], gold["answer_start"] + 4)
        assert context[p["start"]:p["end"]] == "Café" and 0.5 < p["score"] <= 1.0
        assert set(p) == {"answer", "score", "start", "end"}  # no null odds: SQuAD 1.1
    scores = model.evaluate(questions, contexts, [a["text"] for a in answers], verbose=0)
    assert scores == {"exact_match": 100.0, "f1": 100.0}
    # The tuple form of the other text models, and several gold answers a question.
    wrong = model.evaluate((questions[:2], contexts[:2]), [["red", "Café"], ["blue"]],
                           verbose=0)
    assert wrong == {"exact_match": 50.0, "f1": 50.0}


def test_a_long_context_is_answered_from_its_second_window(fitted):
    model = fitted[0]
    context = "red green blue house tree river stone bird road hill red green   Café. red"
    # [CLS] where ? [SEP], 11 context pieces, [SEP] a window, 4 pieces apart: "Café" is
    # the 13th piece, past the first window.
    [example] = squad_data.squad_examples(
        [{"paragraphs": [{"context": context, "qas": [{"id": "q", "question": "Where?"}]}]}],
        "test", is_training=False)
    windows = squad_features.convert_examples_to_features(
        [example], model.tokenizer, 16, 4, 4, is_training=False)
    [piece] = model.tokenizer.tokenize("Café")  # "cafe": uncased rules strip accents
    assert len(windows) == 2 and piece not in windows[0].tokens and piece in windows[1].tokens
    [answer] = model.predict("Where?", context, verbose=0)
    assert answer["answer"] == "Café"
    assert (answer["start"], answer["end"]) == (65, 69) and context[65:69] == "Café"


def test_save_and_reload_give_the_same_answers_and_scores(fitted, tmp_path):
    model, _, (questions, contexts, _, _) = fitted
    predicted = model.predict(questions, contexts, verbose=0)
    model.save(tmp_path / "run")
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["model_type"] == "span_labeler" and saved["task"] == "squad/python"
    assert {name: saved["options"][name] for name in WINDOWS} == WINDOWS
    again = bert_tf.TextQuestionAnswerer.from_pretrained(tmp_path / "run")
    assert (again.doc_stride, again.max_query_length, again.max_answer_length) == (4, 4, 4)
    reloaded = again.predict((questions, contexts), verbose=0)
    assert [(p["answer"], p["start"], p["end"]) for p in reloaded] == [
        (p["answer"], p["start"], p["end"]) for p in predicted]
    np.testing.assert_allclose([p["score"] for p in reloaded],
                               [p["score"] for p in predicted], atol=1e-5)
    with pytest.raises(ValueError, match="trained with version_2_with_negative=False"):
        bert_tf.TextQuestionAnswerer.from_pretrained(tmp_path / "run",
                                                     version_2_with_negative=True)


@pytest.mark.slow
def test_a_saved_folder_exports_with_no_other_flag(fitted, tmp_path):
    model = fitted[0]
    # The SavedModel answers from one window: contexts that fit in one.
    questions, contexts = ["Where?"] * 3, [CONTEXT, "Café. red", "blue tree river Café."]
    predicted = model.predict(questions, contexts, verbose=0)
    assert [p["answer"] for p in predicted] == ["Café"] * 3
    model.save(tmp_path / "run")
    export_dir = export_checkpoint.export_from_checkpoint(export_checkpoint.ExportOptions(
        init_checkpoint=str(tmp_path / "run"), export_dir=str(tmp_path / "exported")))
    serving = tf.saved_model.load(export_dir).signatures["serving_default"]
    served = serving(question=tf.constant(questions), context=tf.constant(contexts))
    assert [text.decode("utf-8") for text in served["answer_text"].numpy()] == [
        p["answer"] for p in predicted]


def test_a_squad_run_folder_answers_as_its_predictions_json(tmp_path):
    train_file = test_run_squad.write_squad(tmp_path / "train.json", 40, seed=0)
    dev_file = test_run_squad.write_squad(tmp_path / "dev.json", 12, seed=1)
    run = test_run_squad.options(tmp_path, do_train=True, do_predict=True,
                                 train_file=train_file, predict_file=dev_file,
                                 num_train_epochs=2.0)
    squad_task.run(run)
    command = json.loads((tmp_path / "out" / "predictions.json").read_text())
    model = bert_tf.TextQuestionAnswerer.from_pretrained(run.output_dir)
    assert (model.preprocessor.max_seq_length, model.doc_stride) == (16, 4)
    assert not model.version_2_with_negative
    questions, contexts, _, ids = squad_rows(tmp_path / "dev.json")
    predicted = model.predict(questions, contexts, batch_size=3, verbose=0)
    assert [p["answer"] for p in predicted] == [command[i] for i in ids]


# ------------------------------------------------------------------ bad input
@pytest.fixture(scope="module")
def new_head(released):
    return bert_tf.TextQuestionAnswerer.from_pretrained(released, **WINDOWS)


CONTEXT = "red house Café. blue tree"


@pytest.mark.parametrize("call, error, message", [
    (lambda m: m.fit(["Where?", "Where?"], [CONTEXT], [("Café", 10)] * 2), ValueError,
     "questions has 2 texts but contexts has 1: expected one context per question"),
    (lambda m: m.fit([" "], [CONTEXT], [("Café", 10)]), ValueError,
     r"questions\[0\] is an empty text"),
    (lambda m: m.predict(["Where?"], [""]), ValueError, r"contexts\[0\] is an empty text"),
    (lambda m: m.fit(["Where?"], [CONTEXT], [{"text": "Café", "answer_start": 4}]),
     ValueError, r"answers\[0\]: 'Café' is not at answer_start=4 of contexts\[0\], which "
     r"reads 'hous' there \(it is at 10\)"),
    (lambda m: m.fit(["Where?"], [CONTEXT], [("Paris", 0)]), ValueError,
     r"'Paris' is not at answer_start=0 .* \(it is nowhere in contexts\[0\]\)"),
    (lambda m: m.fit(["Where?"], [CONTEXT], [None]), ValueError,
     r"answers\[0\] is None: no answer, but this model answers every question"),
    (lambda m: m.fit(["Where?"], [CONTEXT], [("Café", 10), ("Café", 10)]), ValueError,
     "answers has 2 answers but questions has 1"),
    (lambda m: m.fit(["Where?"], [CONTEXT], ["Café"]), TypeError,
     r"answers\[0\] is 'Café': expected \{'text': ..., 'answer_start': ...\}"),
    (lambda m: m.predict(["Where?"]), ValueError,
     "takes questions and their contexts"),
    (lambda m: m.predict(["Where?"], [CONTEXT]), ValueError, "the span_labeler head is new"),
])
def test_bad_input_is_named_before_any_work(new_head, call, error, message):
    with pytest.raises(error, match=message):
        call(new_head)
    assert getattr(new_head, "optimizer", None) is None  # nothing was compiled or trained


def test_the_config_rebuilds_the_model(new_head):
    config = new_head.get_config()  # the constructor's arguments
    assert bert_tf.TextQuestionAnswerer.from_config(config).get_config() == config


def test_a_run_of_another_task_is_refused_when_predicting(released, tmp_path):
    bert_tf.TextClassifier.from_pretrained(released, num_classes=2,
                                           max_seq_length=16).save(tmp_path / "cls")
    model = bert_tf.TextQuestionAnswerer.from_pretrained(tmp_path / "cls", **WINDOWS)
    with pytest.raises(ValueError, match=r"cls\W+config.json is a classifier run \(task "
                       r"classification/python\), fine-tuned for another task"):
        model.predict(["Where?"], [CONTEXT])
    with pytest.raises(ValueError, match=r"max_seq_length=384 exceeds the "
                       r"max_position_embeddings \(16\)"):
        bert_tf.TextQuestionAnswerer.from_pretrained(released)


@pytest.mark.slow
def test_a_squad_2_run_folder_answers_and_scores_as_the_runner(released, tmp_path):
    train_file = test_run_squad.write_squad(tmp_path / "train.json", 40, seed=0,
                                            impossible_every=3)
    dev_file = test_run_squad.write_squad(tmp_path / "dev.json", 9, seed=1, impossible_every=3)
    run = test_run_squad.options(tmp_path, do_train=True, do_predict=True,
                                 train_file=train_file, predict_file=dev_file,
                                 version_2_with_negative=True, num_train_epochs=1.0)
    evaluation = squad_task.run(run)
    command = json.loads((tmp_path / "out" / "predictions.json").read_text())
    null_odds = json.loads((tmp_path / "out" / "null_odds.json").read_text())
    model = bert_tf.TextQuestionAnswerer.from_pretrained(run.output_dir)
    assert model.version_2_with_negative
    questions, contexts, gold, ids = squad_rows(dev_file, first_answer=False)
    predicted = model.predict(questions, contexts, verbose=0)
    assert [p["answer"] for p in predicted] == [command[i] for i in ids]
    np.testing.assert_allclose([p["null_odds"] for p in predicted],
                               [null_odds[i] for i in ids], atol=1e-4)
    assert all((p["start"], p["end"]) == (0, 0) for p in predicted if not p["answer"])
    scores = model.evaluate(questions, contexts, [[a["text"] for a in g] for g in gold],
                            verbose=0)
    assert scores == pytest.approx({name: value for name, value in evaluation.items()
                                    if name != "global_step"})
    # A new head learns SQuAD 2.0 from answers of None.
    new = bert_tf.TextQuestionAnswerer.from_pretrained(released, version_2_with_negative=True,
                                                       seed=1, **WINDOWS)
    questions, contexts, gold, _ = squad_rows(train_file, first_answer=False)
    history = new.fit(questions, contexts, [g[0] if g else None for g in gold], epochs=1,
                      batch_size=8, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert "null_odds" in new.predict(questions[:1], contexts[:1], verbose=0)[0]
