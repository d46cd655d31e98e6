"""SavedModel export: answers in a fresh process (tensorflow + tensorflow_text only),
equals the Keras model on features built independently in Python, rejects bad input."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.serving import export
from bert_tf.serving.text_signatures import (
    classifier_text_signature, span_text_signature, tagger_text_signature)
from bert_tf.serving import signatures as sig
from bert_tf.models import BertClassifier, BertEncoder, BertSpanLabeler, BertTokenClassifier
from bert_tf.text import input_layout_graph
from bert_tf.text.tokenization import FullTokenizer
from bert_tf.text.preprocessor import Preprocessor
from harness import tiny_config, tiny_model, write_vocab

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "##s", "the",
         "un", "##aff", "##able", ",", ".", "!", "?", "cafe", "ca", "##fe", "中", "国",
         "д", "##а", "да", "привет", "мир", "a", "b", "##c", "'", "where", "is", "red",
         "house", "blue", "tree", "john", "lives", "in", "paris"]
SEQ = 16
LABELS = ["neg", "neutral", "pos"]
TAGS = ["O", "B-PER", "I-PER", "B-LOC"]
LONG_TEXT = "Hello world, the red house! " * 358  # 10,024 characters
SERVE_SCRIPT = r"""
import json, sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  registers the WordPiece ops, as TF Serving links them
request = json.load(open(sys.argv[1]))
out = {}


def run_tf1(export_dir, signature, inputs):
    # The TF1 session loader, as TF Serving and `saved_model_cli run` load a model.
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        meta_graph = tf.compat.v1.saved_model.load(session, ["serve"], export_dir)
        signature_def = meta_graph.signature_def[signature]
        feed = {signature_def.inputs[k].name: v for k, v in inputs.items()}
        return session.run({k: t.name for k, t in signature_def.outputs.items()}, feed)


for name, spec in request.items():
    signatures = tf.saved_model.load(spec["dir"]).signatures
    out[name + "/signatures"] = np.array(sorted(signatures.keys()))
    for index, call in enumerate(spec["calls"]):
        if call["signature"] == "serve_examples":
            examples = [tf.train.Example(features=tf.train.Features(feature={
                key: tf.train.Feature(int64_list=tf.train.Int64List(value=values))
                for key, values in row.items()})).SerializeToString()
                for row in call["rows"]]
            inputs = {"examples": tf.constant(examples)}
        elif call["signature"] == "serve_ids":
            inputs = {k: tf.constant(v, tf.int32) for k, v in call["inputs"].items()}
        else:
            inputs = {k: tf.constant(v, tf.string) for k, v in call["inputs"].items()}
        if call.get("tf1"):
            inputs = {k: v.numpy() for k, v in inputs.items()}
            results = run_tf1(spec["dir"], call["signature"], inputs)
        else:
            results = signatures[call["signature"]](**inputs)
            results = {key: value.numpy() for key, value in results.items()}
        for key, value in results.items():
            out[f"{name}/{index}/{key}"] = value
out["bert_tf_modules"] = np.array([m for m in sys.modules if m.split(".")[0] == "bert_tf"])
np.savez(sys.argv[2], **out)
"""


# ----------------------------------------------------------------- independent golden
def truncate_seq_pair(tokens_a, tokens_b, budget):
    """The original google-research `_truncate_seq_pair`."""
    tokens_a, tokens_b = list(tokens_a), list(tokens_b)
    while len(tokens_a) + len(tokens_b) > budget:
        (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()
    return tokens_a, tokens_b


def pack(tokenizer, token_lists, seq=SEQ):
    """[CLS] a [SEP] (b [SEP]) as numpy arrays, the way the fine-tuning features are."""
    tokens, segments = ["[CLS]"], [0]
    for index, part in enumerate(token_lists):
        tokens += list(part) + ["[SEP]"]
        segments += [index] * (len(part) + 1)
    ids = tokenizer.convert_tokens_to_ids(tokens)
    pad = seq - len(ids)
    return {"input_ids": np.array(ids + [0] * pad, np.int32),
            "input_mask": np.array([1] * len(ids) + [0] * pad, np.int32),
            "segment_ids": np.array(segments + [0] * pad, np.int32)}


def stack(rows):
    return {key: np.stack([row[key] for row in rows]) for key in rows[0]}


def keras_logits(model, features, key="logits"):
    return model({k: tf.constant(v) for k, v in features.items()}, training=False)[key].numpy()


def softmax(logits):
    exp = np.exp(logits - logits.max(-1, keepdims=True))
    return exp / exp.sum(-1, keepdims=True)


# ----------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def files(tmp_path_factory):
    vocab_file = write_vocab(tmp_path_factory.mktemp("export_vocab") / "vocab.txt", VOCAB)
    return {"vocab": vocab_file, "config": tiny_config(vocab_size=len(VOCAB)),
            "tokenizer": FullTokenizer(vocab_file, do_lower_case=True)}


def run_fresh_process(request, folder):
    """Runs SERVE_SCRIPT in a new interpreter; returns its outputs."""
    request_file, output_file = folder / "request.json", folder / "outputs.npz"
    request_file.write_text(json.dumps(request), encoding="utf-8")
    result = subprocess.run([sys.executable, "-c", SERVE_SCRIPT, str(request_file),
                             str(output_file)], capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 0, result.stderr[-3000:]
    with np.load(output_file, allow_pickle=True) as outputs:
        return dict(outputs)


def text(value):
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


# --------------------------------------------------------------------- fresh process
PAIRS = [("Hello, worlds! the unaffable cafe", "Café? where is the red house"),
         ("", ""),
         (LONG_TEXT, "blue tree"),
         ("привет мир 中国", "да Да"),
         ("hello", "مرحبا بالعالم"),
         ("hel\u200blo wor\x00lds", "ca\u00adfe")]
SENTENCES = ["John lives in Paris .", "", LONG_TEXT, "привет  мир\t中国 Café unaffable",
             "  spaced   words ", "John\u3000lives\u00a0in\x1cParis\u2028hel\u200blo"]


def classifier_golden(model, tokenizer):
    rows = [pack(tokenizer, truncate_seq_pair(tokenizer.tokenize(a), tokenizer.tokenize(b),
                                              SEQ - 3)) for a, b in PAIRS]
    features = stack(rows)
    return features, keras_logits(model, features)


def tagger_golden(model, tokenizer, sentence):
    """Tags per whitespace word, from each word's first piece (the NER task's layout)."""
    words, pieces = [], []
    position = 0
    for word in sentence.split():
        start = sentence.index(word, position)
        position = start + len(word)
        word_pieces = (tokenizer.tokenize(word) or ["[UNK]"])[:SEQ - 2]
        if len(pieces) < SEQ - 2:
            words.append((word, start, position, 1 + len(pieces)))
        pieces += word_pieces
    logits = keras_logits(model, stack([pack(tokenizer, [pieces[:SEQ - 2]])]))[0]
    return [(word, start, end, TAGS[int(np.argmax(logits[first]))])
            for word, start, end, first in words]


@pytest.mark.slow
def test_fresh_process_answers_like_keras(files, tmp_path):
    tokenizer = files["tokenizer"]
    classifier = tiny_model(BertClassifier, files["config"], 1, num_classes=3)
    classifier_dir = export.export_classifier(
        classifier, Preprocessor(files["vocab"], True, SEQ, text_pair=True),
        tmp_path / "classifier", label_names=LABELS)
    features, logits = classifier_golden(classifier, tokenizer)
    ids = {k: v.tolist() for k, v in features.items()}
    rows = [{k: v[i].tolist() for k, v in features.items()} for i in range(len(PAIRS))]
    texts = {"text_a": [a for a, _ in PAIRS], "text_b": [b for _, b in PAIRS]}
    calls = [{"signature": "serving_default", "inputs": texts},
             {"signature": "serve_ids", "inputs": ids},
             {"signature": "serve_examples", "rows": rows},
             {"signature": "serving_default", "tf1": True, "inputs": texts}]
    out = run_fresh_process({"classifier": {"dir": classifier_dir, "calls": calls}}, tmp_path)

    assert list(out["bert_tf_modules"]) == []
    assert list(out["classifier/signatures"]) == sorted(export.SIGNATURE_NAMES)
    assert os.path.isfile(os.path.join(classifier_dir, "assets", "vocab.txt"))
    np.testing.assert_allclose(out["classifier/0/logits"], logits, atol=1e-5)
    np.testing.assert_allclose(out["classifier/0/probabilities"], softmax(logits), atol=1e-5)
    np.testing.assert_array_equal(out["classifier/0/label_ids"], logits.argmax(-1))
    assert [text(v) for v in out["classifier/0/labels"]] == [
        LABELS[i] for i in logits.argmax(-1)]
    np.testing.assert_allclose(out["classifier/1/logits"], logits, atol=1e-5)
    np.testing.assert_allclose(out["classifier/2/logits"], logits, atol=1e-5)
    np.testing.assert_allclose(out["classifier/3/probabilities"], softmax(logits), atol=1e-5)


def test_trim_to_longest_cuts_the_padding_columns_only():
    features = {name: tf.constant([[2, 5, 3, 0, 0, 0], [2, 5, 6, 7, 3, 0]], tf.int32)
                for name in sig.FEATURE_NAMES}
    features["input_mask"] = tf.constant([[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 0]], tf.int32)
    trimmed = input_layout_graph.trim_to_longest(features)
    for name in sig.FEATURE_NAMES:
        np.testing.assert_array_equal(trimmed[name], features[name].numpy()[:, :5])


class ShapeRecordingModule(export.ServingModule):
    """Records the sequence length the model was last run at."""

    def __init__(self, *args):
        super().__init__(*args)
        self.last_length = tf.Variable(0, dtype=tf.int32, trainable=False)

    def run_model(self, features):
        self.last_length.assign(tf.shape(features["input_ids"])[1])
        return super().run_model(features)


@pytest.mark.parametrize("doc_stride", [None, 4])
def test_classifier_runs_a_batch_at_its_longest_row(files, doc_stride):
    """A batch of short texts costs its tokens, not max_seq_length; logits unchanged."""
    tokenizer = files["tokenizer"]
    classifier = tiny_model(BertClassifier, files["config"], 1, num_classes=3)
    module = ShapeRecordingModule(classifier, Preprocessor(files["vocab"], True, SEQ))
    serve = classifier_text_signature(module, LABELS, False, text_pair=False,
                                      doc_stride=doc_stride)
    texts = ["hello world", "the red house ."]  # [CLS] the red house . [SEP]: 6 tokens
    out = serve(text_a=tf.constant(texts))
    assert int(module.last_length.numpy()) == 6
    golden = stack([pack(tokenizer, [tokenizer.tokenize(t)]) for t in texts])  # [2, SEQ]
    np.testing.assert_allclose(out["logits"], keras_logits(classifier, golden), atol=1e-5)


def test_tagger_tags_whitespace_words_in_graph(files):
    """serving_default of the NER export, traced in-process, against per-word golden."""
    tagger = tiny_model(BertTokenClassifier, files["config"], 2, num_classes=len(TAGS))
    module = export.ServingModule(tagger, Preprocessor(files["vocab"], True, SEQ))
    serve = tagger_text_signature(module, TAGS)
    out = {key: value.numpy() for key, value in serve(text=tf.constant(SENTENCES)).items()}
    for row, sentence in enumerate(SENTENCES):
        expected = tagger_golden(tagger, files["tokenizer"], sentence)
        count = int(out["num_words"][row])
        got = [(text(out["words"][row, i]), int(out["word_start"][row, i]),
                int(out["word_end"][row, i]), text(out["tags"][row, i]))
               for i in range(count)]
        assert got == expected, sentence[:40]
        assert all(sentence[start:end] == word for word, start, end, _ in got)
        assert set(out["tag_ids"][row, count:]) <= {-1}


def test_span_labeler_decodes_best_span_in_graph(files):
    """serving_default of the SQuAD export, traced in-process, against numpy decoding."""
    tokenizer = files["tokenizer"]
    model = tiny_model(BertSpanLabeler, files["config"], 3)
    module = export.ServingModule(model, Preprocessor(files["vocab"], True, SEQ))
    serve = span_text_signature(module, max_query_length=4, max_answer_length=3)
    questions = ["where is the red house?", "", "中国?", "hello"]
    contexts = ["Café, the red house, blue tree!", "a b", "", LONG_TEXT]
    out = {key: value.numpy() for key, value in serve(
        question=tf.constant(questions), context=tf.constant(contexts)).items()}
    for row, (question, context) in enumerate(zip(questions, contexts)):
        query = tokenizer.tokenize(question)[:4]
        tokens, starts, ends = tokenizer.tokenize_with_offsets(context)
        keep = min(len(tokens), SEQ - 3 - len(query))
        features = stack([pack(tokenizer, [query, tokens[:keep]])])
        logits = model({k: tf.constant(v) for k, v in features.items()}, training=False)
        start_logits = logits["start_logits"].numpy()[0]
        end_logits = logits["end_logits"].numpy()[0]
        np.testing.assert_allclose(out["start_logits"][row], start_logits, atol=1e-5)
        best, best_score = None, -np.inf
        for i in range(keep):
            for j in range(i, min(keep, i + 3)):
                score = start_logits[len(query) + 2 + i] + end_logits[len(query) + 2 + j]
                if score > best_score:
                    best, best_score = (i, j), score
        if best is None:
            assert (int(out["answer_start"][row]), text(out["answer_text"][row])) == (-1, "")
            continue
        begin, end = starts[best[0]], ends[best[1]]
        assert int(out["answer_start"][row]) == begin and int(out["answer_end"][row]) == end
        assert text(out["answer_text"][row]) == context[begin:end]
        np.testing.assert_allclose(out["score"][row], best_score, atol=1e-5)


# -------------------------------------------------------------------- in-graph pieces
@pytest.mark.parametrize("engine", sig.ENGINES)
def test_tokenizer_ids_and_offsets_match_full_tokenizer(files, engine):
    tokenizer = files["tokenizer"]
    serving = sig.ServingTokenizer(files["vocab"], do_lower_case=True, engine=engine)
    texts = ["Hello, worlds! unaffable", "Café CAFÉ", "中国hello", "да Да привет", "",
             "x" * 300, "hello\tworld!", "𝔘 hello"]
    if engine == sig.DEFAULT_ENGINE:  # exact: the original deletes these inside words
        texts += ["hel\u200blo wor\x00lds", "ca\u00adfe\u200d!"]
    ids, starts, ends = serving.tokenize_with_offsets(tf.constant(texts))
    for row, value in enumerate(texts):
        tokens, token_starts, token_ends = tokenizer.tokenize_with_offsets(value)
        assert ids[row].numpy().tolist() == tokenizer.convert_tokens_to_ids(tokens), value
        assert starts[row].numpy().tolist() == token_starts, value
        assert ends[row].numpy().tolist() == token_ends, value


# ----------------------------------------------------------------------------- bad input
def test_bad_vocab_config_and_lengths_fail_before_writing(files, tmp_path):
    model = tiny_model(BertClassifier, files["config"], 4, num_classes=3)
    target = tmp_path / "export"
    bigger = write_vocab(tmp_path / "big_vocab.txt", VOCAB + ["extra"])
    no_cls = write_vocab(tmp_path / "no_cls.txt", [t for t in VOCAB if t != "[CLS]"])
    cases = [(FileNotFoundError, dict(vocab_file=str(tmp_path / "missing.txt"))),
             (ValueError, dict(vocab_file=bigger)),
             (ValueError, dict(vocab_file=no_cls)),
             (ValueError, dict(max_seq_length=65)),
             (ValueError, dict(label_names=["a", "b"])),
             (TypeError, dict(model=tiny_model(BertEncoder, files["config"], 4)))]
    for error, change in cases:
        kwargs = dict(model=model, vocab_file=files["vocab"], do_lower_case=True,
                      max_seq_length=SEQ, export_dir=target, label_names=LABELS)
        kwargs.update(change)
        with pytest.raises(error) as info:
            preprocessor = Preprocessor(*(kwargs.pop(name) for name in (
                "vocab_file", "do_lower_case", "max_seq_length")))
            export.export_classifier(preprocessor=preprocessor, **kwargs)
        if "vocab_file" in change:
            assert os.path.basename(change["vocab_file"]) in str(info.value)
        assert not target.exists()


def _disagreement(signature, **inputs):
    """The error message of `signature` called on `inputs` (lists of str or int rows)."""
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        signature(**{name: tf.constant(value) for name, value in inputs.items()})
    return str(info.value)


@pytest.mark.slow
def test_signatures_refuse_inputs_that_disagree(files, tmp_path):
    # Before: text_a [2] with text_b [3] failed deep inside ("Incompatible shapes: [2]
    # vs. [3]" at add_8), and serve_ids answered 2 rows for input_mask of 1 or 3 rows.
    classifier = tiny_model(BertClassifier, files["config"], 10, num_classes=3)
    span = tiny_model(BertSpanLabeler, files["config"], 11)
    classifier_dir = export.export_classifier(
        classifier, Preprocessor(files["vocab"], True, SEQ, text_pair=True),
        tmp_path / "classifier")
    span_dir = export.export_span_labeler(
        span, Preprocessor(files["vocab"], True, SEQ), tmp_path / "span")
    signatures = tf.saved_model.load(classifier_dir).signatures
    span_signature = tf.saved_model.load(span_dir).signatures["serving_default"]
    for texts in (["a b"], ["a b", "the"]):
        message = _disagreement(signatures["serving_default"], text_a=texts,
                                text_b=["a", "b", "c"])
        assert f"text_b has shape] [3] [but text_a has shape] [{len(texts)}]" in message
    message = _disagreement(span_signature, question=["a", "b"], context=["c"])
    assert "context has shape] [1] [but question has shape] [2]" in message
    ids = [[2, 5, 3] + [0] * (SEQ - 3)] * 2
    for rows in (1, 3):
        message = _disagreement(signatures["serve_ids"], input_ids=ids,
                                input_mask=[[1] * SEQ] * rows, segment_ids=[[0] * SEQ] * 2)
        assert f"input_mask has shape] [{rows} {SEQ}] [but input_ids has shape] [2 {SEQ}]" in (
            message)
    agreeing = signatures["serving_default"](text_a=tf.constant(["a", "b"]),
                                             text_b=tf.constant(["c", "d"]))
    assert agreeing["logits"].shape == (2, 3)


def test_long_name_lists_are_cut_in_messages(tmp_path):
    # A duplicate among 400 label names listed all 400 (about 5,000 characters).
    names = [f"label_{index}" for index in range(400)]
    with pytest.raises(ValueError) as info:
        export.check_label_names(names + ["label_0", "label_7"], 402)
    assert str(info.value) == ("label_names lists label_0, label_7 more than once; each of "
                               "the 402 classes needs its own name")
    with pytest.raises(ValueError, match=r"has 400 names \(label_0, .*label_4 and 395 "
                                         r"more\) but the model has 3 classes$"):
        export.check_label_names(names, 3)
    for index in range(39):
        (tmp_path / f"file_{index:02d}.txt").write_text("x")
    with pytest.raises(FileExistsError, match=r"holds file_00.txt, .* and 34 more\)") as info:
        export.resolve_export_dir(tmp_path)
    assert len(str(info.value)) < 400


def test_export_dir_rules(tmp_path):
    fresh = tmp_path / "fresh"
    assert export.resolve_export_dir(fresh) == str(fresh)
    assert export.resolve_export_dir(fresh, versioned=True) == str(fresh / "1")
    saved = tmp_path / "saved"
    saved.mkdir()
    (saved / "saved_model.pb").write_bytes(b"")
    with pytest.raises(FileExistsError, match="overwrite"):
        export.resolve_export_dir(saved)
    assert export.resolve_export_dir(saved, overwrite=True) == str(saved)
    base = tmp_path / "base"
    for version in ("1", "7", "10"):
        (base / version).mkdir(parents=True)
    (base / "notes").mkdir()
    assert export.resolve_export_dir(base) == str(base / "11")
    other = tmp_path / "other"
    other.mkdir()
    (other / "file.txt").write_text("x")
    with pytest.raises(FileExistsError, match="not empty"):
        export.resolve_export_dir(other, overwrite=True)


# ---------------------------------------------------------------------------- slow ones
SAVED_MODEL_CLI_RUN = ("import sys, tensorflow_text; from tensorflow.python.tools import "
                       "saved_model_cli; sys.argv[0] = 'saved_model_cli'; "
                       "saved_model_cli.main()")


def saved_model_cli(*args, run=False):
    """`saved_model_cli` (for `run`, in a Python that registered the tensorflow_text ops)."""
    command = ([sys.executable, "-c", SAVED_MODEL_CLI_RUN] if run else
               [os.path.join(os.path.dirname(sys.executable), "saved_model_cli")])
    result = subprocess.run(command + list(args), capture_output=True, text=True,
                            timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.mark.slow
def test_saved_model_cli_show_and_run_every_signature(files, tmp_path):
    model = tiny_model(BertClassifier, files["config"], 5, num_classes=3)
    base = tmp_path / "models" / "bert"
    path = export.export_classifier(
        model, Preprocessor(files["vocab"], True, SEQ), base, label_names=LABELS,
        versioned=True)
    assert path == str(base / "1")
    shown = saved_model_cli("show", "--all", "--dir", path)
    for name in export.SIGNATURE_NAMES:
        assert f"signature_def['{name}']" in shown
    for name in ("text_a", "probabilities", "label_ids", "labels", "examples", "segment_ids"):
        assert f"['{name}']" in shown
    def literal(values):  # saved_model_cli takes Python literals only
        return str(list(values) + [0] * (SEQ - len(values)))
    ids, mask, segments = literal([2, 5, 6, 3]), literal([1, 1, 1, 1]), literal([])
    runs = {"serving_default": ["--input_exprs", "text_a=['hello world', '中国']"],
            "serve_ids": ["--input_exprs",
                          f"input_ids=[{ids}];input_mask=[{mask}];segment_ids=[{segments}]"],
            "serve_examples": ["--input_examples",
                               f"examples=[{{'input_ids': {ids}, 'input_mask': {mask}, "
                               f"'segment_ids': {segments}}}]"]}
    for name, inputs in runs.items():
        output = saved_model_cli("run", "--dir", path, "--tag_set", "serve",
                                 "--signature_def", name, *inputs, run=True)
        assert "logits" in output or "labels" in output, output
    # A second export into the base path is version 2; the first is left alone.
    assert export.export_classifier(model, Preprocessor(files["vocab"], True, SEQ), base,
                                    label_names=LABELS) == str(base / "2")
    with pytest.raises(FileExistsError):
        export.export_classifier(
            model, Preprocessor(files["vocab"], True, SEQ), path, label_names=LABELS)
    before = os.path.getmtime(os.path.join(path, "saved_model.pb"))
    export.export_classifier(
        model, Preprocessor(files["vocab"], True, SEQ), path, label_names=LABELS,
        overwrite=True)
    assert os.path.getmtime(os.path.join(path, "saved_model.pb")) >= before
    assert sorted(os.listdir(base)) == ["1", "2"]


@pytest.mark.slow
def test_span_labeler_and_encoder_in_fresh_process(files, tmp_path):
    tokenizer = files["tokenizer"]
    span = tiny_model(BertSpanLabeler, files["config"], 6)
    encoder = tiny_model(BertEncoder, files["config"], 7)
    regression = tiny_model(BertClassifier, files["config"], 8, num_classes=1)
    span_dir = export.export_span_labeler(
        span, Preprocessor(files["vocab"], True, SEQ), tmp_path / "span", max_query_length=4)
    encoder_dir = export.export_encoder(
        encoder, Preprocessor(files["vocab"], True, SEQ), tmp_path / "encoder")
    regression_dir = export.export_classifier(
        regression, Preprocessor(files["vocab"], True, SEQ), tmp_path / "regression")
    texts = ["Hello, worlds!", "", LONG_TEXT, "привет мир 中国"]
    out = run_fresh_process({
        "span": {"dir": span_dir, "calls": [{"signature": "serving_default", "inputs": {
            "question": ["where is the red house?", "", "中国", "hello"],
            "context": ["Café, the red house!", "", LONG_TEXT, "привет мир"]}}]},
        "encoder": {"dir": encoder_dir, "calls": [
            {"signature": "serving_default", "inputs": {"text": texts}}]},
        "regression": {"dir": regression_dir, "calls": [
            {"signature": "serving_default", "inputs": {"text_a": texts}}]}}, tmp_path)
    assert list(out["bert_tf_modules"]) == []
    features = stack([pack(tokenizer, [tokenizer.tokenize(t)[:SEQ - 2]]) for t in texts])
    np.testing.assert_allclose(out["regression/0/score"],
                               keras_logits(regression, features)[:, 0], atol=1e-5)
    np.testing.assert_allclose(out["encoder/0/pooled_output"],
                               keras_logits(encoder, features, "pooled_output"), atol=1e-5)
    np.testing.assert_allclose(out["encoder/0/sequence_output"],
                               keras_logits(encoder, features, "sequence_output"), atol=1e-5)
    np.testing.assert_array_equal(out["encoder/0/input_mask"], features["input_mask"])
    assert text(out["span/0/answer_text"][0]) in "Café, the red house!"
    assert (int(out["span/0/answer_start"][1]), text(out["span/0/answer_text"][1])) == (-1, "")
    assert out["span/0/start_logits"].shape == (4, SEQ)


@pytest.mark.slow
def test_export_model_cli_from_a_training_checkpoint(files, tmp_path):
    model = tiny_model(BertTokenClassifier, files["config"], 9, num_classes=len(TAGS))
    output_dir = tmp_path / "ner_output"
    tf.train.Checkpoint(model=model, global_step=tf.Variable(7, dtype=tf.int64)).write(
        str(output_dir / "ckpt-7"))
    with open(output_dir / "checkpoint", "w", encoding="utf-8") as state:
        state.write('model_checkpoint_path: "ckpt-7"\n')
    files["config"].to_json_file(str(tmp_path / "bert_config.json"))
    (tmp_path / "labels.txt").write_text("\n".join(TAGS) + "\n", encoding="utf-8")
    command = [os.path.join(os.path.dirname(sys.executable), "bert-export-model"),
               "--model_type=ner", f"--init_checkpoint={output_dir}",
               f"--bert_config_file={tmp_path / 'bert_config.json'}",
               f"--vocab_file={files['vocab']}", f"--labels_file={tmp_path / 'labels.txt'}",
               f"--max_seq_length={SEQ}", f"--export_dir={tmp_path / 'serving' / 'ner'}",
               "--versioned"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == str(tmp_path / "serving" / "ner" / "1")
    serving = tf.saved_model.load(result.stdout.strip()).signatures["serving_default"]
    got = serving(text=tf.constant(["John lives in Paris ."]))
    expected = tagger_golden(model, files["tokenizer"], "John lives in Paris .")
    assert [text(tag) for tag in got["tags"].numpy()[0, :5]] == [t for *_, t in expected]
    # Wrong label count: the checkpoint's head does not match, nothing is written.
    bad = [arg for arg in command if not arg.startswith("--labels_file")] + [
        "--label_names=O,B-PER"]
    result = subprocess.run(bad, capture_output=True, text=True, timeout=600)
    assert result.returncode != 0 and "ckpt-7" in result.stderr
    assert sorted(os.listdir(tmp_path / "serving" / "ner")) == ["1"]


def test_stale_temporary_export_folders_of_dead_processes_are_removed(tmp_path):
    # A SIGKILLed export leaves `.<name>.tmp-<pid>-<uuid>`; the next export to the same
    # target removes it, but never the folder of a process still writing.
    dead_pid = 2 ** 22 + 12345  # above Linux's default pid_max: no such process
    stale = tmp_path / f".model.tmp-{dead_pid}-abc"
    live = tmp_path / f".model.tmp-{os.getpid()}-def"
    other = tmp_path / f".other.tmp-{dead_pid}-abc"
    for folder in (stale, live, other):
        folder.mkdir()
    export._remove_stale_temporaries(str(tmp_path), "model")  # pylint: disable=protected-access
    assert not stale.exists()
    assert live.exists() and other.exists()
