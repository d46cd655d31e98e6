"""Classification processors on small GLUE-layout files, features, TFRecord cache."""

import functools
import json

import numpy as np
import pytest

from bert_tf.runs import text_files
from bert_tf.runs.task import cached_features
from bert_tf.tasks.classification import data as classification_data
from bert_tf.runs.text_files import InputExample
from harness import write_tsv

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "dog", "ran",
         "a", "big", "##s", "on", "mat", "."]


def mnli_row(index, a, b, label=None):
    row = [str(index), "p", "q", "genre", "bp1", "bp2", "p1", "p2", a, b]
    return row + ([label, label] if label else [])


# task -> (files {name: rows}, split, expected [(text_a, text_b, label)])
GLUE_CASES = {
    "cola": ({"train.tsv": [["gj04", "1", "", "The cat sat."], ["gj04", "0", "*", "Cat the."]]},
             "train", [("The cat sat.", None, "1"), ("Cat the.", None, "0")]),
    "sst-2": ({"dev.tsv": [["sentence", "label"], ["a big dog ", "1"]]},
              "dev", [("a big dog ", None, "1")]),
    "mrpc": ({"train.tsv": [["\ufeffQuality", "#1 ID", "#2 ID", "#1 String", "#2 String"],
                            ["1", "11", "12", "The cat sat.", "A cat sat."]]},
             "train", [("The cat sat.", "A cat sat.", "1")]),
    "sts-b": ({"dev.tsv": [["index", "genre", "filename", "year", "old_index", "source1",
                            "source2", "sentence1", "sentence2", "score"],
                           ["0", "g", "f", "y", "o", "s1", "s2", "A dog.", "The dog.",
                            "3.800"]]},
              "dev", [("A dog.", "The dog.", 3.8)]),
    "qqp": ({"train.tsv": [["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
                           ["5", "1", "2", "cat?", "dog?", "0"]]},
            "train", [("cat?", "dog?", "0")]),
    "mnli": ({"dev_matched.tsv": [mnli_row("index", "s1", "s2", "gold_label"),
                                  mnli_row(0, "A cat.", "A dog.", "neutral")]},
             "dev", [("A cat.", "A dog.", "neutral")]),
    "mnli-mm": ({"dev_mismatched.tsv": [mnli_row("index", "s1", "s2", "gold_label"),
                                        mnli_row(0, "Dogs.", "Cats.", "contradiction")]},
                "dev", [("Dogs.", "Cats.", "contradiction")]),
    "qnli": ({"dev.tsv": [["index", "question", "sentence", "label"],
                          ["0", "Who?", "The cat.", "not_entailment"]]},
             "dev", [("Who?", "The cat.", "not_entailment")]),
    "rte": ({"train.tsv": [["index", "sentence1", "sentence2", "label"],
                           ["0", "A big dog.", "A dog.", "entailment"]]},
            "train", [("A big dog.", "A dog.", "entailment")]),
    "wnli": ({"train.tsv": [["index", "sentence1", "sentence2", "label"],
                            ["0", "The cat sat.", "It sat.", "1"]]},
             "train", [("The cat sat.", "It sat.", "1")]),
}


@pytest.mark.parametrize("task_name", sorted(GLUE_CASES))
def test_glue_processors_read_their_layout(tmp_path, task_name):
    files, split, expected = GLUE_CASES[task_name]
    for name, rows in files.items():
        write_tsv(tmp_path / name, rows)
    examples = classification_data.get_processor(task_name).get_examples(str(tmp_path), split)
    assert [(e.text_a, e.text_b, e.label) for e in examples] == expected
    assert examples[0].guid == f"{split}-0"


def test_glue_test_files_keep_their_index(tmp_path):
    write_tsv(tmp_path / "test.tsv", [["index", "#1 ID", "#2 ID", "#1 String", "#2 String"],
                                      ["7", "1", "2", "A cat.", "A dog."]])
    processor = classification_data.get_processor("MRPC")
    [example] = processor.get_examples(str(tmp_path), "test")
    assert (example.guid, example.text_a, example.text_b, example.label) == (
        "test-7", "A cat.", "A dog.", None)
    write_tsv(tmp_path / "cola" / "test.tsv", [["id", "sentence"], ["3", "The cat."]])
    [example] = classification_data.get_processor("cola").get_examples(str(tmp_path / "cola"),
                                                                       "test")
    assert (example.guid, example.text_a) == ("test-3", "The cat.")


def test_labels_metrics_and_aliases():
    assert classification_data.get_processor("sts-b").get_labels() is None
    assert classification_data.get_processor("STSB").is_regression
    assert classification_data.get_processor("mnli").get_labels() == [
        "contradiction", "entailment", "neutral"]
    assert classification_data.get_processor("cola").metric_names[0] == "matthews_corrcoef"
    assert classification_data.get_processor("mrpc").metric_names == ("acc_and_f1",)
    assert classification_data.get_processor("mnli_mismatched").submission_name == "MNLI-mm.tsv"


def test_xnli_filters_language_and_maps_contradictory(tmp_path):
    write_tsv(tmp_path / "multinli" / "multinli.train.de.tsv",
              [["premise", "hypo", "label"], ["Ein Hund.", "Eine Katze.", "contradictory"]])
    header = ["language", "gold_label", "a", "b", "c", "d", "sentence1", "sentence2"]
    write_tsv(tmp_path / "xnli.dev.tsv", [header,
                                          ["de", "neutral", "", "", "", "", "A.", "B."],
                                          ["fr", "entailment", "", "", "", "", "C.", "D."]])
    processor = classification_data.get_processor("xnli", language="de")
    [train] = processor.get_examples(str(tmp_path), "train")
    assert (train.text_a, train.label) == ("Ein Hund.", "contradiction")
    [dev] = processor.get_examples(str(tmp_path), "dev")
    assert (dev.text_a, dev.text_b, dev.label) == ("A.", "B.", "neutral")


@pytest.mark.parametrize("extension", ["csv", "tsv", "jsonl"])
def test_generic_processor_named_columns(tmp_path, extension):
    rows = [{"id": "a1", "review": "the cat, sat", "other": "x", "stars": "pos"},
            {"id": "a2", "review": "a dog ran", "other": "y", "stars": "neg"}]
    names = list(rows[0])
    for split in ("train", "test"):
        path = tmp_path / f"{split}.{extension}"
        kept = [name for name in names if split == "train" or name != "stars"]
        if extension == "jsonl":
            path.write_text("".join(json.dumps({k: r[k] for k in kept}) + "\n" for r in rows))
        elif extension == "csv":
            path.write_text(",".join(kept) + "\n" + "".join(
                ",".join(f'"{r[k]}"' for k in kept) + "\n" for r in rows))
        else:
            write_tsv(path, [kept] + [[r[k] for k in kept] for r in rows])
    processor = classification_data.get_processor(
        "generic", text_column="review", text_pair_column="other", label_column="stars",
        id_column="id")
    assert processor.get_labels(str(tmp_path)) == ["neg", "pos"]
    assert processor.metric_names == ("accuracy", "f1")
    train = processor.get_examples(str(tmp_path), "train")
    assert [(e.guid, e.text_a, e.text_b, e.label) for e in train] == [
        ("train-a1", "the cat, sat", "x", "pos"), ("train-a2", "a dog ran", "y", "neg")]
    test = processor.get_examples(str(tmp_path), "test")
    assert [(e.guid, e.label) for e in test] == [("test-a1", None), ("test-a2", None)]


def test_generic_regression_and_missing_column(tmp_path):
    (tmp_path / "train.jsonl").write_text('{"text": "a", "score": 0.5}\n{"text": "b"}\n')
    processor = classification_data.get_processor("generic", label_column="score",
                                                  is_regression=True)
    with pytest.raises(ValueError, match=r"train.jsonl:2: no label column 'score'"):
        processor.get_examples(str(tmp_path), "train")
    (tmp_path / "train.jsonl").write_text('{"text": "a", "score": 0.5}\n')
    assert processor.get_examples(str(tmp_path), "train")[0].label == 0.5
    assert processor.metric_names == ("pearson_and_spearman",)
    with pytest.raises(FileNotFoundError, match=r"dev file was expected at one of .*dev.tsv"):
        processor.get_examples(str(tmp_path), "dev")


def test_bad_input_names_file_line_and_label(tmp_path):
    with pytest.raises(ValueError, match="unknown task_name 'glue'; known tasks: cola, "
                                         "generic, mnli, mnli-mm, mrpc, qnli, qqp, rte"):
        classification_data.get_processor("glue")
    processor = classification_data.get_processor("rte")
    with pytest.raises(FileNotFoundError, match=r"train file was expected at .*train.tsv"):
        processor.get_examples(str(tmp_path), "train")
    write_tsv(tmp_path / "train.tsv", [["index", "sentence1", "sentence2", "label"],
                                       ["0", "a", "b", "entailment"], ["1", "a", "b"]])
    with pytest.raises(ValueError, match=r"train.tsv:3: 3 tab-separated columns, expected 4"):
        processor.get_examples(str(tmp_path), "train")
    write_tsv(tmp_path / "train.tsv", [["index", "sentence1", "sentence2", "label"],
                                       ["0", "a", "b", "neutral"]])
    with pytest.raises(ValueError, match=r"train.tsv:2: label 'neutral' is not one of the "
                                         r"task's labels \['entailment', 'not_entailment'\]"):
        processor.get_examples(str(tmp_path), "train")
    write_tsv(tmp_path / "dev.tsv", [["index"] * 10, ["0"] * 9 + ["high"]])
    with pytest.raises(ValueError, match=r"dev.tsv:2: score 'high' is not a number"):
        classification_data.get_processor("sts-b").get_examples(str(tmp_path), "dev")


def test_features_pair_and_single(tokenizer):
    ids = {token: index for index, token in enumerate(VOCAB)}
    example = InputExample
    examples = [example("dev-0", "The cats sat on the mat.", "A dog.", "1"),
                example("dev-1", "big dog", None, "0")]
    pair, single = classification_data.convert_examples_to_features(examples, ["0", "1"], 12,
                                                                    tokenizer)
    # a: the cat ##s sat on the mat . (8) b: a dog . (3); 12 - 3 = 9 -> a loses 2 tokens.
    expected = ["[CLS]", "the", "cat", "##s", "sat", "on", "the", "[SEP]", "a", "dog", ".",
                "[SEP]"]
    assert pair.input_ids == [ids[t] for t in expected]
    assert pair.segment_ids == [0] * 8 + [1] * 4 and pair.input_mask == [1] * 12
    assert pair.label_id == 1
    assert single.input_ids == [ids[t] for t in ["[CLS]", "big", "dog", "[SEP]"]] + [0] * 8
    assert single.input_mask == [1] * 4 + [0] * 8 and single.label_id == 0
    bad = [InputExample("x", "a", None, "2", "f.tsv:9")]
    with pytest.raises(ValueError, match="f.tsv:9: label '2'"):
        classification_data.convert_examples_to_features(bad, ["0", "1"], 8, tokenizer)


def test_cache_features_round_trip(tmp_path, tokenizer):
    data_file = tmp_path / "dev.tsv"
    data_file.write_text("x\n")
    examples = [InputExample(f"dev-{i}", "the cat sat", "a dog", 0.5 * i)
                for i in range(3)]
    record = str(tmp_path / "dev.tf_record")

    def cache(max_seq_length):
        key = classification_data.feature_cache_key(examples, None, max_seq_length,
                                                    tokenizer, [str(data_file)])
        return cached_features(record, key, functools.partial(
            classification_data.write_example_features, examples, None, max_seq_length,
            tokenizer))

    assert cache(8) == (3, False)
    assert cache(8) == (3, True)  # reused
    data_file.write_text("y\n")  # same size and maybe the same mtime: new content
    assert cache(8) == (3, False)
    assert cache(10) == (3, False)  # new length: rewritten
    dataset = classification_data.classifier_dataset(record, 10, 2, is_training=False,
                                                     is_regression=True)
    batches = list(dataset.as_numpy_iterator())
    labels = np.concatenate([batch["label_ids"] for batch in batches])
    np.testing.assert_allclose(labels, [0.0, 0.5, 1.0])
    features = classification_data.convert_examples_to_features(examples, None, 10, tokenizer)
    np.testing.assert_array_equal(batches[0]["input_ids"][0], features[0].input_ids)
    assert batches[0]["input_ids"].dtype == np.int32


def test_prediction_files(tmp_path):
    examples = [InputExample("test-7", "a"),
                InputExample("test-9", "b")]
    probabilities = np.array([[0.9, 0.1], [0.25, 0.75]])
    classification_data.write_test_results(str(tmp_path / "test_results.tsv"), probabilities, False)
    assert (tmp_path / "test_results.tsv").read_text() == (
        "0.900000\t0.100000\n0.250000\t0.750000\n")
    classification_data.write_submission(str(tmp_path / "RTE.tsv"), examples, probabilities,
                                         ["entailment", "not_entailment"])
    assert (tmp_path / "RTE.tsv").read_text() == (
        "index\tprediction\n7\tentailment\n9\tnot_entailment\n")
    classification_data.write_submission(str(tmp_path / "STS-B.tsv"), examples,
                                         np.array([[3.14159], [0.5]]), None)
    assert (tmp_path / "STS-B.tsv").read_text() == "index\tprediction\n7\t3.142\n9\t0.500\n"


def test_trim_padding_cuts_each_batch_to_its_longest(tmp_path, tokenizer):
    data_file = tmp_path / "train.tsv"
    data_file.write_text("x\n")
    texts = ["the cat", "the cat sat on the mat", "a dog", "dog"]
    examples = [InputExample(f"dev-{i}", text, None, "0")
                for i, text in enumerate(texts)]
    record = str(tmp_path / "dev.tf_record")
    classification_data.write_example_features(examples, ["0", "1"], 12, tokenizer, record)
    batches = list(classification_data.classifier_dataset(
        record, 12, 2, is_training=False, is_regression=False,
        trim_padding=True).as_numpy_iterator())
    # [CLS] the cat sat on the mat [SEP] = 8; [CLS] a dog [SEP] = 4.
    assert [batch["input_ids"].shape for batch in batches] == [(2, 8), (2, 4)]
    assert batches[1]["input_mask"].tolist() == [[1, 1, 1, 1], [1, 1, 1, 0]]
    assert batches[0]["label_ids"].shape == (2,)


@pytest.mark.parametrize("name, header", [("train.tsv", b"text\tlabel\n"),
                                          ("train.csv", b"text,label\n"),
                                          ("train.jsonl", b"")])
def test_undecodable_or_binary_files_name_file_line_and_byte(tmp_path, name, header):
    good = {"train.tsv": b"fine\t1\n", "train.csv": b"fine,1\n",
            "train.jsonl": b'{"text": "fine", "label": "1"}\n'}[name]
    processor = text_files.GenericProcessor(labels=["0", "1"])
    bad = good.replace(b"fine", b"caf\xe9")
    (tmp_path / name).write_bytes(header + good + bad)
    column = bad.index(b"\xe9") + 1
    with pytest.raises(ValueError, match=rf"{name}:{3 if header else 2}: not UTF-8 text "
                                         rf"\(byte 0xe9 at column {column}\)"):
        processor.get_examples(str(tmp_path), "train")
    (tmp_path / name).write_bytes(header + good + b"\x00\x01\x02binary\n")
    with pytest.raises(ValueError, match=rf"{name}:{3 if header else 2}: NUL byte at "
                                         "column 1: not a text file"):
        processor.get_examples(str(tmp_path), "train")
    # A byte-order mark is not part of the first column's name.
    (tmp_path / name).write_bytes(b"\xef\xbb\xbf" + header + good)
    assert [e.text_a for e in processor.get_examples(str(tmp_path), "train")] == ["fine"]


def test_generic_labels_integers_empty_test_labels_and_finite_scores(tmp_path):
    # Integer labels, all of one type, are classes named by their digits.
    (tmp_path / "train.jsonl").write_text('{"text": "a", "label": 1}\n'
                                          '{"text": "b", "label": 0}\n')
    (tmp_path / "test.csv").write_text("text,label\nthe cat,\na dog,1\n")
    processor = text_files.GenericProcessor()
    assert processor.get_labels(str(tmp_path)) == ["0", "1"]
    assert [e.label for e in processor.get_examples(str(tmp_path), "train")] == ["1", "0"]
    # In the test file an empty label means unlabelled.
    assert [e.label for e in processor.get_examples(str(tmp_path), "test")] == [None, "1"]
    for value, found in (("true", "a boolean"), ("1.5", "a number")):
        (tmp_path / "train.jsonl").write_text(f'{{"text": "a", "label": {value}}}\n')
        with pytest.raises(ValueError, match=rf"train.jsonl:1: label column 'label' holds "
                                             rf"{found}; expected a string or an integer"):
            text_files.GenericProcessor().get_labels(str(tmp_path))
    (tmp_path / "train.csv").write_text("text,label\n  ,pos\n")
    (tmp_path / "train.jsonl").unlink()
    with pytest.raises(ValueError, match=r"train.csv:2: text column 'text' is empty"):
        text_files.GenericProcessor(labels=["pos", "neg"]).get_examples(str(tmp_path),
                                                                        "train")
    # A score must be a finite number: nan would make the loss nan.
    (tmp_path / "train.csv").write_text("text,score\na,nan\n")
    regression = text_files.GenericProcessor(label_column="score", is_regression=True)
    with pytest.raises(ValueError, match=r"train.csv:2: label 'nan' is not a finite number"):
        regression.get_examples(str(tmp_path), "train")
    (tmp_path / "train.csv").unlink()
    (tmp_path / "train.jsonl").write_text('{"text": "a", "score": null}\n')
    with pytest.raises(ValueError, match=r"train.jsonl:1: label column 'score' holds null; "
                                         "expected a number"):
        regression.get_examples(str(tmp_path), "train")


def test_glue_empty_label_is_named(tmp_path):
    write_tsv(tmp_path / "train.tsv", [["sentence", "label"], ["a big dog", ""]])
    with pytest.raises(ValueError, match=r"train.tsv:2: empty label; expected one of the "
                                         r"task's labels \['0', '1'\]"):
        classification_data.get_processor("sst-2").get_examples(str(tmp_path), "train")
