"""Data values checked where they are read, before any work (issue 26, classes 2 and 6).

Each runner reads and checks every file it will use in its task's `setup`, before the
training, the feature files and the first checkpoint: every test here asserts both the
message (file, line or element, what was found, what was expected) and that nothing
was trained.
"""

import dataclasses
import json

import pytest
import tensorflow as tf

from bert_tf.tasks.classification import task as classification_task
from bert_tf.tasks.classification.options import ClassifierOptions
from bert_tf.tasks.ner import task as ner_task
from bert_tf.tasks.ner.options import NerOptions
from bert_tf.tasks.squad import task as squad_task
from bert_tf.tasks.squad.options import SquadOptions
from harness import write_squad_json, write_tiny_model_files, write_tsv

WORDS = ["good", "bad", "movie", "plot", "john", "paris", "went", "to", "where", "?",
         "red", "house", "."]


def runner_options(options_class, tmp_path, **changes):
    """Tiny-model options of `options_class`; trains from random weights on purpose."""
    vocab_file, config_file = write_tiny_model_files(tmp_path, WORDS)
    values = dict(output_dir=str(tmp_path / "out"), vocab_file=vocab_file,
                  bert_config_file=config_file, max_seq_length=12, train_batch_size=2,
                  num_train_epochs=1.0, seed=1)
    names = {field.name for field in dataclasses.fields(options_class)}
    if "allow_random_encoder" in names:
        values["allow_random_encoder"] = True
    values.update(changes)
    return options_class(**values)


def classifier_options(tmp_path, **changes):
    return runner_options(ClassifierOptions, tmp_path, **{
        "task_name": "generic", "data_dir": str(tmp_path / "data"), **changes})


def assert_nothing_trained(tmp_path):
    out = tmp_path / "out"
    assert tf.train.latest_checkpoint(str(out)) is None
    assert not list(out.glob("*.tf_record")) and not (out / "label_list.txt").exists()


def write_jsonl(path, records):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(record) + "\n" for record in records))


GOOD = [{"text": "good movie", "label": "pos"}, {"text": "bad plot", "label": "neg"}]


@pytest.mark.parametrize("bad, message", [
    ({"text": None, "label": "pos"}, r"text column 'text' holds null; expected a string"),
    ({"text": ["a", "b"], "label": "pos"}, r"text column 'text' holds a list; expected a "
                                           "string"),
    ({"text": "good", "label": 1}, r"label 1 is an integer, but the label of line 1 "
                                   r"\('pos'\) is a string"),
    ({"text": "good", "label": None}, r"label column 'label' holds null; expected a string "
                                      "or an integer"),
])
def test_classifier_refuses_json_values_of_another_type(tmp_path, bad, message):
    write_jsonl(tmp_path / "data" / "train.jsonl", GOOD + [bad])
    with pytest.raises(ValueError, match=r"train.jsonl:3: " + message):
        classification_task.run(classifier_options(tmp_path, do_train=True))
    assert_nothing_trained(tmp_path)


def test_classifier_refuses_an_empty_csv_label(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.csv").write_text("text,label\ngood movie,pos\n"
                                                 "bad plot,\nbad movie,neg\n")
    with pytest.raises(ValueError, match=r"train.csv:3: empty label \(column 'label'\)"):
        classification_task.run(classifier_options(tmp_path, do_train=True))
    assert_nothing_trained(tmp_path)


def test_classifier_names_a_csv_file_the_csv_module_cannot_read(tmp_path):
    # Lines ending in CR only (old Mac exports): csv.Error, now one line naming the file.
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.csv").write_bytes(b"text,label\rgood movie,pos\rbad,neg\r")
    with pytest.raises(ValueError, match=r"train.csv:1: not readable as CSV .*CR only"):
        classification_task.run(classifier_options(tmp_path, do_train=True))
    assert_nothing_trained(tmp_path)


def test_classifier_refuses_a_train_file_of_one_label(tmp_path):
    write_jsonl(tmp_path / "data" / "train.jsonl", [GOOD[0], GOOD[0]])
    with pytest.raises(ValueError, match=r"train.jsonl: the train file holds only label "
                                         r"'pos'; classification needs at least two"):
        classification_task.run(classifier_options(tmp_path, do_train=True))
    assert_nothing_trained(tmp_path)
    with pytest.raises(ValueError, match=r"labels \['pos'\]: classification needs at "
                                         "least two different class names"):
        classification_task.run(classifier_options(tmp_path, do_train=True, labels=["pos"]))
    assert_nothing_trained(tmp_path)


def test_classifier_refuses_a_dev_label_unknown_to_train_before_training(tmp_path):
    write_jsonl(tmp_path / "data" / "train.jsonl", GOOD)
    write_jsonl(tmp_path / "data" / "dev.jsonl", GOOD + [{"text": "plot", "label": "meh"}])
    with pytest.raises(ValueError, match=r"dev.jsonl:3: label 'meh' is not one of the "
                                         r"labels of the train file .*train.jsonl"):
        classification_task.run(classifier_options(tmp_path, do_train=True, do_eval=True))
    assert_nothing_trained(tmp_path)


@pytest.mark.parametrize("content", ["", "text,label\n", "text,label\n\n\n"])
def test_classifier_refuses_an_empty_test_file_before_training(tmp_path, content):
    write_jsonl(tmp_path / "data" / "train.jsonl", GOOD)
    (tmp_path / "data" / "test.csv").write_text(content)
    with pytest.raises(ValueError, match=r"test.csv: no examples \(the file is empty or "
                                         r"holds only a header\)"):
        classification_task.run(classifier_options(tmp_path, do_train=True,
                                                   do_predict=True))
    assert_nothing_trained(tmp_path)


@pytest.mark.parametrize("ids, message", [
    (["a1", "a\tb"], r"test.jsonl:2: id 'a\\tb' is empty or holds a tab, CR or LF"),
    (["a1", "x\n"], r"test.jsonl:2: id 'x\\n' is empty or holds a tab, CR or LF"),
    (["a1", "a1"], r"test.jsonl:2: id 'a1' is also the id of .*test.jsonl:1"),
])
def test_classifier_refuses_ids_that_cannot_key_the_predictions(tmp_path, ids, message):
    write_jsonl(tmp_path / "data" / "train.jsonl", GOOD)
    write_jsonl(tmp_path / "data" / "test.jsonl", [{"id": i, "text": "good"} for i in ids])
    with pytest.raises(ValueError, match=message):
        classification_task.run(classifier_options(tmp_path, do_train=True, do_predict=True,
                                                   id_column="id"))
    assert_nothing_trained(tmp_path)


def test_glue_test_file_with_a_repeated_index_is_refused(tmp_path):
    data = tmp_path / "data"
    write_tsv(data / "train.tsv", [("sentence", "label"), ("good movie", "1"),
                                   ("bad plot", "0")])
    write_tsv(data / "test.tsv", [("index", "sentence"), ("0", "good"), ("0", "bad")])
    with pytest.raises(ValueError, match=r"test.tsv:3: id '0' is also the id of "
                                         r".*test.tsv:2"):
        classification_task.run(classifier_options(tmp_path, task_name="sst-2",
                                                   do_train=True, do_predict=True))
    assert_nothing_trained(tmp_path)


def test_eval_only_without_any_model_is_refused_before_features(tmp_path):
    write_jsonl(tmp_path / "data" / "train.jsonl", GOOD)
    write_jsonl(tmp_path / "data" / "dev.jsonl", GOOD)
    with pytest.raises(ValueError, match=r"no training checkpoint in output_dir .*out and "
                                         "no init_checkpoint"):
        classification_task.run(classifier_options(tmp_path, do_eval=True))
    assert not list((tmp_path / "out").glob("*.tf_record"))
    write_ner(tmp_path, test=b"John O\n")  # the same check for every task: the driver
    with pytest.raises(ValueError, match=r"no training checkpoint in output_dir"):
        ner_task.run(ner_options(tmp_path, do_predict=True))


# --------------------------------------------------------------------------------- NER
def ner_options(tmp_path, **changes):
    return runner_options(NerOptions, tmp_path, **{"data_dir": str(tmp_path / "data"),
                                                   "doc_stride": 4, **changes})


def write_ner(tmp_path, train="John B-PER\nwent O\nto O\nParis B-LOC\n", test=None):
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    (data / "train.txt").write_text(train)
    if test is not None:
        (data / "test.txt").write_bytes(test)


@pytest.mark.parametrize("test", [b"", b"-DOCSTART- -X- O O\n\n\n"])
def test_ner_refuses_an_empty_predict_file_before_training(tmp_path, test):
    write_ner(tmp_path, test=test)
    with pytest.raises(ValueError, match=r"test.txt: no sentences \(the file is empty"):
        ner_task.run(ner_options(tmp_path, do_train=True, do_predict=True))
    assert_nothing_trained(tmp_path)


def test_ner_refuses_a_binary_predict_file_naming_line_and_byte(tmp_path):
    write_ner(tmp_path, test=b"John\n\xff\xfebinary\n")
    with pytest.raises(ValueError, match=r"test.txt: not a text file: .*test.txt:2: byte 0xff"):
        ner_task.run(ner_options(tmp_path, do_train=True, do_predict=True))
    assert_nothing_trained(tmp_path)


def test_ner_refuses_a_train_file_of_one_tag(tmp_path):
    write_ner(tmp_path, train="John O\nwent O\n")
    with pytest.raises(ValueError, match=r"train.txt: the train file holds only tag 'O'; "
                                         "tagging needs at least two"):
        ner_task.run(ner_options(tmp_path, do_train=True))
    assert_nothing_trained(tmp_path)


# ------------------------------------------------------------------------------- SQuAD
def squad_file(path, ids, question="Where?"):
    context = "red house Paris ."
    qas = [{"id": qid, "question": question,
            "answers": [{"text": "Paris", "answer_start": context.index("Paris")}]}
           for qid in ids]
    return write_squad_json(path, [{"context": context, "qas": qas}])


def squad_options(tmp_path, **changes):
    return runner_options(SquadOptions, tmp_path, **{
        "max_seq_length": 16, "max_query_length": 4, "doc_stride": 4,
        "train_file": squad_file(tmp_path / "train.json", ["t1", "t2"]), **changes})


def test_squad_refuses_a_repeated_id_before_training(tmp_path):
    dev = squad_file(tmp_path / "dev.json", ["q1", "q2", "q1"])
    with pytest.raises(ValueError, match=r"dev.json: data\[0\]\.paragraphs\[0\]\.qas\[2\]: "
                                         r"\"id\" 'q1' is also the id of data\[0\]\."
                                         r"paragraphs\[0\]\.qas\[0\]"):
        squad_task.run(squad_options(tmp_path, do_train=True, do_predict=True,
                                     predict_file=dev))
    assert_nothing_trained(tmp_path)


def test_squad_refuses_a_predict_file_without_questions_before_training(tmp_path):
    dev = write_squad_json(tmp_path / "dev.json", [])
    with pytest.raises(ValueError, match=r"predict_file .*dev.json: no questions"):
        squad_task.run(squad_options(tmp_path, do_train=True, do_predict=True,
                                     predict_file=dev))
    assert_nothing_trained(tmp_path)
