"""The library as a notebook uses it: `Preprocessor` and `TextClassifier` on Python texts."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import bert_tf
from bert_tf.models import BertEncoder
from bert_tf.runs import export_checkpoint
from bert_tf.runs import options as task_options
from bert_tf.tasks.classification import task as classification_task
from bert_tf.tasks.ner import data as ner_data
from bert_tf.tasks.ner import task as ner_task
from bert_tf.tasks.sentence_embeddings import encode as encode_lib
from bert_tf.text.preprocessor import Preprocessor
from bert_tf.text.tokenization import FullTokenizer
from harness import (SPECIAL_TOKENS, tiny_config, tiny_model, write_released_checkpoint)
import test_run_ner
from test_run_classifier import WORDS, options, sentiment_rows, write_sst2

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """A tiny google-research folder whose vocab holds test_run_classifier's words."""
    folder = tmp_path_factory.mktemp("released") / "uncased_L-2_H-32_A-4"
    config = tiny_config(max_position_embeddings=16)
    vocab = SPECIAL_TOKENS + WORDS + ["."]
    vocab += [f"[unused{i}]" for i in range(config.vocab_size - len(vocab))]
    write_released_checkpoint(str(folder), tiny_model(BertEncoder, config, seed=4), vocab)
    return folder


def _expected(tokenizer, texts_a, texts_b=None, length=None):
    """Model inputs written out by hand from the Python tokenizer's tokens: [CLS] a [SEP]
    (b [SEP]), the longer segment cut first (ties: the second), padded to the longest row."""
    rows = []
    for index, text in enumerate(texts_a):
        a = tokenizer.tokenize(text)
        b = None if texts_b is None else tokenizer.tokenize(texts_b[index])
        if b is None:
            a = a[:length - 2]
        while b is not None and len(a) + len(b) > length - 3:
            (a if len(a) > len(b) else b).pop()
        tokens = ["[CLS]"] + a + ["[SEP]"] + ([] if b is None else b + ["[SEP]"])
        types = [0] * (len(a) + 2) + ([] if b is None else [1] * (len(b) + 1))
        rows.append((tokenizer.convert_tokens_to_ids(tokens), types))
    longest = max(len(ids) for ids, _ in rows)
    fill = lambda values: values + [0] * (longest - len(values))  # noqa: E731
    return {"input_ids": np.array([fill(ids) for ids, _ in rows]),
            "input_mask": np.array([fill([1] * len(ids)) for ids, _ in rows]),
            "segment_ids": np.array([fill(types) for _, types in rows])}


def test_the_preprocessor_lays_out_texts_and_pairs_as_the_runners(released):
    pre = Preprocessor.from_pretrained(released, max_seq_length=9)
    tokenizer = FullTokenizer(str(released / "vocab.txt"), do_lower_case=True)
    texts_a = ["The movie was very good.", "bad", "a plot"]
    texts_b = ["The acting is quite bad.", "the story was really very good music", "x"]
    for got, want in ((pre(texts_a), _expected(tokenizer, texts_a, length=9)),
                      (pre((texts_a, texts_b)), _expected(tokenizer, texts_a, texts_b, 9)),
                      (pre(np.array(texts_a)), _expected(tokenizer, texts_a, length=9)),
                      (pre("bad"), _expected(tokenizer, ["bad"], length=9))):
        assert {name: value.dtype for name, value in got.items()} == dict.fromkeys(want,
                                                                                   tf.int32)
        for name in want:
            np.testing.assert_array_equal(got[name].numpy(), want[name], err_msg=name)
    # In tf.data: graph ops on batches of strings; padded to max_seq_length on request.
    dataset = tf.data.Dataset.from_tensor_slices((texts_a, texts_b)).batch(3)
    [batch] = list(dataset.map(lambda a, b: pre((a, b))))
    np.testing.assert_array_equal(batch["input_ids"].numpy(),
                                  _expected(tokenizer, texts_a, texts_b, 9)["input_ids"])
    padded = Preprocessor.from_pretrained(released, max_seq_length=9, trim=False)(["bad"])
    assert padded["input_ids"].shape == (1, 9)
    # Called eagerly it runs one traced function per column count, whatever the batch.
    traced = pre.__dict__["_traced_calls"]
    assert sorted(traced) == [1, 2] and all(
        function.experimental_get_tracing_count() == 1 for function in traced.values())


def test_the_preprocessor_settings_come_from_any_model_folder(released, tmp_path):
    assert Preprocessor.from_pretrained(released).do_lower_case  # uncased_L-...: its name
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "vocab.txt").write_text((released / "vocab.txt").read_text())
    (hf / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
    assert not Preprocessor.from_pretrained(hf).do_lower_case
    st = tmp_path / "st"
    (st / "0_Transformer").mkdir(parents=True)
    (st / "modules.json").write_text(json.dumps([{"path": "0_Transformer"}]))
    (st / "0_Transformer" / "vocab.txt").write_text((released / "vocab.txt").read_text())
    (st / "0_Transformer" / "sentence_bert_config.json").write_text('{"max_seq_length": 7}')
    assert Preprocessor.from_pretrained(st).max_seq_length == 7
    saved = tmp_path / "saved"
    Preprocessor.from_pretrained(released, max_seq_length=11, text_pair=True,
                                 do_lower_case=False).save(saved)
    again = Preprocessor.from_pretrained(saved)
    assert (again.max_seq_length, again.text_pair, again.do_lower_case) == (11, True, False)
    config = Preprocessor.from_pretrained(saved).get_config()
    assert Preprocessor.from_config(config).get_config() == config


@pytest.mark.parametrize("call, error, message", [
    (lambda pre: pre((["a", "b"], ["c"])), ValueError, "text_a has 2 texts but text_b has 1"),
    (lambda pre: pre([1, 2]), TypeError, r"texts\[0\] is int 1: expected a str"),
    (lambda pre: pre(("a", "b", "c")), ValueError, "a tuple of 3 items: expected 2"),
    (lambda pre: Preprocessor(pre.vocab_file, max_seq_length=2), ValueError,
     "max_seq_length=2: expected an integer of at least 3"),
    (lambda pre: Preprocessor(pre.vocab_file, text_pair=True)(["a"]), ValueError,
     "got single texts, but this model takes sentence pairs"),
])
def test_the_preprocessor_refuses_bad_input_naming_it(released, call, error, message):
    with pytest.raises(error, match=message):
        call(Preprocessor.from_pretrained(released))


# ------------------------------------------------------------------ TextClassifier
def _pairs(count, seed):
    """Sentence pairs whose label is 1 iff the second text says "good"."""
    rows = sentiment_rows(count, seed)
    return (["the movie"] * count, [text for text, _ in rows]), [int(y) for _, y in rows]


def test_fit_predict_save_and_export_a_classifier(released, tmp_path):
    model = bert_tf.TextClassifier.from_pretrained(released, labels=["0", "1"],
                                                   max_seq_length=12, dropout_rate=0.0,
                                                   seed=1)
    x, y = _pairs(64, 0)
    with pytest.raises(ValueError, match="the classifier head is new"):
        model.predict(x)
    history = model.fit(x, y, validation_data=_pairs(16, 1), epochs=20, batch_size=16,
                        learning_rate=3e-3, seed=1, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < losses[0] / 10, losses  # the "good"/"bad" rule is learnt
    assert history.history["val_accuracy"][-1] == 1.0
    dev_x, dev_y = _pairs(16, 2)
    assert model.evaluate(dev_x, dev_y, verbose=0)["accuracy"] == 1.0
    predicted = model.predict(dev_x, verbose=0)
    assert predicted["labels"] == [str(label) for label in dev_y]
    assert predicted["probabilities"].shape == (16, 2)

    model.save(tmp_path / "run")
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (saved["model_type"], saved["labels"], saved["export"]["text_pair"]) == (
        "classifier", ["0", "1"], True)
    again = bert_tf.TextClassifier.from_pretrained(tmp_path / "run")
    np.testing.assert_allclose(again.predict(dev_x, verbose=0)["probabilities"],
                               predicted["probabilities"], atol=1e-5)
    # bert-export-model reads the folder with no flag but where to write.
    export_dir = export_checkpoint.export_from_checkpoint(export_checkpoint.ExportOptions(
        init_checkpoint=str(tmp_path / "run"), export_dir=str(tmp_path / "exported")))
    served = tf.saved_model.load(export_dir).signatures["serving_default"](
        text_a=tf.constant(dev_x[0]), text_b=tf.constant(dev_x[1]))
    assert [label.decode() for label in served["labels"].numpy()] == predicted["labels"]
    np.testing.assert_allclose(served["probabilities"].numpy(), predicted["probabilities"],
                               atol=1e-5)


def test_a_run_folder_of_the_command_predicts_what_the_command_predicted(tmp_path):
    write_sst2(tmp_path / "data")
    run = options(tmp_path, do_train=True, do_predict=True, num_train_epochs=2.0)
    classification_task.run(run)
    command = np.loadtxt(tmp_path / "out" / "test_results.tsv", delimiter="\t")
    model = bert_tf.TextClassifier.from_pretrained(run.output_dir)
    assert model.labels == ["0", "1"] and model.preprocessor.max_seq_length == 12
    texts = [text for text, _ in sentiment_rows(6, 2)]
    np.testing.assert_allclose(model.predict(texts, verbose=0)["probabilities"], command,
                               atol=1e-5)
    with pytest.raises(ValueError, match="x holds sentence pairs .* trained on single texts"):
        model.predict((texts, texts))


@pytest.mark.parametrize("call, message", [
    (lambda m: m.fit(["good", "bad"], ["1"]), "y has 1 labels but x has 2 texts"),
    (lambda m: m.fit(["good", "bad"], ["1", "maybe"]),
     r"y\[1\] is 'maybe', not one of the labels \['0', '1'\]"),
    (lambda m: m.fit(["good", " "], [1, 0]), r"x\[1\] is an empty text"),
    (lambda m: m.fit((["good"], ["a", "b"]), [1]), "x\\[0\\] has 1 texts but x\\[1\\] has 2"),
    (lambda m: m.fit(["good"], [1], batch_size=0), "train_batch_size must be"),
])
def test_bad_training_data_is_named_before_any_work(released, call, message):
    model = bert_tf.TextClassifier.from_pretrained(released, num_classes=2)
    with pytest.raises(ValueError, match=message):
        call(model)
    assert getattr(model, "optimizer", None) is None  # nothing was compiled or trained


def test_a_new_head_starts_as_the_commands_heads(released):
    # fit must train what the command trains: the head's kernel distribution included.
    default = task_options.TaskHead().head_initializer
    model = bert_tf.TextClassifier.from_pretrained(released, num_classes=2)
    assert model.task_model.head_initializer == default == "normal"


def test_a_new_head_needs_its_classes(released):
    with pytest.raises(ValueError, match=r"pass labels=\[...\] .* or num_classes=N"):
        bert_tf.TextClassifier.from_pretrained(released)


def test_loading_from_python_shows_the_load_report(released):
    # absl shows only warnings until flags are parsed; the library turns INFO on.
    code = ("import bert_tf; from bert_tf.models import BertEncoder; "
            "from bert_tf.weights import from_pretrained; "
            f"from_pretrained(BertEncoder, {str(released)!r})")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "loaded 39 variables" in done.stderr, done.stderr[-2000:]


# ------------------------------------------------------------------ TextTagger
def _tagged(count, seed, length=6):
    """Sentences of test_run_ner (people and places among fillers), IOB2 tags."""
    rng = np.random.default_rng(seed)
    pairs = [test_run_ner.sentence(rng, length) for _ in range(count)]
    return ([[w.capitalize() for w in words] for words, _ in pairs],
            [ner_data.to_iob2(tags) for _, tags in pairs])


def test_a_tagger_run_folder_of_the_command_tags_as_the_command(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    test_run_ner.write_conll(data / "eng.train", 64, 0)
    test_run_ner.write_conll(data / "eng.testb", 4, 2, length=14)  # windows (doc_stride 4)
    test_run_ner.write_conll(data / "eng.testa", 4, 1)
    run = test_run_ner.options(tmp_path, do_train=True, do_predict=True,
                               num_train_epochs=2.0)
    ner_task.run(run)
    command_tags = [ner_data.to_iob2([row.split()[-1] for row in block.splitlines()])
                    for block in (tmp_path / "out" / "test_predictions.txt").read_text()
                    .strip().split("\n\n")]
    sentences = ner_data.read_tagged_file(str(data / "eng.testb"))
    tagger = bert_tf.TextTagger.from_pretrained(run.output_dir)
    assert tagger.doc_stride == 4 and tagger.labels[0] == "O"
    predicted = tagger.predict([s.words for s in sentences], verbose=0)
    assert predicted["tags"] == command_tags


def test_fit_and_predict_a_tagger_on_lists_of_words(tmp_path):
    folder = tmp_path / "cased_L-2_H-32_A-4"
    config = tiny_config(max_position_embeddings=16)
    vocab = SPECIAL_TOKENS + [w.capitalize() for w in test_run_ner.WORDS if "#" not in w]
    vocab += ["##son"] + [f"[unused{i}]" for i in range(config.vocab_size - len(vocab) - 1)]
    write_released_checkpoint(str(folder), tiny_model(BertEncoder, config, seed=5), vocab)
    labels = ["O", "B-LOC", "B-PER", "I-LOC"]
    tagger = bert_tf.TextTagger.from_pretrained(folder, labels=labels, max_seq_length=12,
                                                dropout_rate=0.0, seed=3)
    x, y = _tagged(64, 0)
    with pytest.raises(ValueError, match=r"y\[0\] has 1 tags but x\[0\] has 6 words"):
        tagger.fit(x, [["O"]] + y[1:])
    with pytest.raises(ValueError, match=r"y\[0\] holds 'B-ORG', not one of the tags"):
        tagger.fit(x, [["B-ORG"] * 6] + y[1:])
    # IOB1 (CoNLL's files): I-LOC opens a chunk, B-LOC in IOB2, which the tagger learns.
    iob1 = [["O", "I-LOC", "I-LOC"] + ["O"] * (len(words) - 3) for words in x]
    with pytest.raises(ValueError, match=r"y\[0\] starts a chunk with I-LOC \(IOB1\).*"
                                         r"labels_of"):
        bert_tf.TextTagger.from_pretrained(folder, labels=["O", "I-LOC"]).fit(x, iob1)
    assert bert_tf.TextTagger.labels_of(iob1[:1] + [["I-PER", "I-PER"], ["B-LOC"]]) == [
        "O", "B-LOC", "B-PER", "I-LOC", "I-PER"]
    history = tagger.fit(x, y, epochs=25, batch_size=16, learning_rate=3e-3, seed=3,
                         verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0] / 10
    test_x, test_y = _tagged(6, 2, length=14)
    predicted = tagger.predict([" ".join(words) for words in test_x], verbose=0)
    assert predicted["words"] == test_x and predicted["tags"] == test_y
    tagger.save(tmp_path / "run")
    again = bert_tf.TextTagger.from_pretrained(tmp_path / "run")
    assert again.predict(test_x, verbose=0)["tags"] == test_y


# ------------------------------------------------------------------ TextEncoder
def test_the_text_encoder_gives_the_vectors_of_bert_encode(released, tmp_path):
    texts = ["the movie was good .", "a very bad plot", "music"]
    (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n")
    encode_lib.run(encode_lib.EncodeOptions(
        input_file=str(tmp_path / "texts.txt"), output_file=str(tmp_path / "v.npy"),
        init_checkpoint=str(released)))
    encoder = bert_tf.TextEncoder.from_pretrained(released)
    vectors = encoder.encode(texts)
    assert vectors.shape == (3, 32)
    np.testing.assert_allclose(vectors, np.load(tmp_path / "v.npy"), atol=1e-6)
    with pytest.raises(ValueError, match=r"x\[1\] is an empty text"):
        encoder.encode(["fine", ""])
