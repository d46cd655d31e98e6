"""bert_tf.compat: google-research/bert's module API (tokenization, modeling,
optimization, a DataProcessor of one's own) over bert_tf.

The tokenization tests are the original's tokenization_test.py cases, written against
the compat API (its assertions are the spec); BertModel is compared with BertEncoder and
with the independent numpy forward pass; the optimizer with a schedule table worked out
by hand and with the original's update rule in numpy.
"""

import dataclasses
import inspect
import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

import numpy_bert
from bert_tf.compat import modeling, optimization, run_classifier, tokenization
from bert_tf.models import BertEncoder
from bert_tf.runs import export_checkpoint
from bert_tf.tasks.classification import task as classification_task
from bert_tf.tasks.classification.options import ClassifierOptions
from bert_tf.tasks.classification import user_processors
from bert_tf.train import optimization as our_optimization
from bert_tf.weights import from_pretrained
from harness import (tiny_config, tiny_config_dict, tiny_model, write_released_checkpoint,
                     write_tiny_model_files, write_tsv)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORIGINAL_VOCAB = ["[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un", "runn",
                  "##ing"]


# ------------------------------------------------ tokenization: the original's test cases
def test_full_tokenizer(tmp_path):
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_bytes("".join(x + "\n" for x in ORIGINAL_VOCAB + [","]).encode("utf-8"))
    tokenizer = tokenization.FullTokenizer(str(vocab_file))
    os.unlink(vocab_file)  # read when made, as the original
    tokens = tokenizer.tokenize("UNwant\u00E9d,running")
    assert tokens == ["un", "##want", "##ed", ",", "runn", "##ing"]
    assert tokenizer.convert_tokens_to_ids(tokens) == [7, 4, 5, 10, 8, 9]
    assert tokenizer.convert_ids_to_tokens([7, 4, 5, 10, 8, 9]) == tokens


def test_chinese():
    tokenizer = tokenization.BasicTokenizer()
    assert tokenizer.tokenize("ah\u535A\u63A8zz") == ["ah", "\u535A", "\u63A8", "zz"]


def test_basic_tokenizer_lower():
    tokenizer = tokenization.BasicTokenizer(do_lower_case=True)
    assert tokenizer.tokenize(" \tHeLLo!how  \n Are yoU?  ") == [
        "hello", "!", "how", "are", "you", "?"]
    assert tokenizer.tokenize("H\u00E9llo") == ["hello"]


def test_basic_tokenizer_no_lower():
    tokenizer = tokenization.BasicTokenizer(do_lower_case=False)
    assert tokenizer.tokenize(" \tHeLLo!how  \n Are yoU?  ") == [
        "HeLLo", "!", "how", "Are", "yoU", "?"]


def test_wordpiece_tokenizer():
    vocab = {token: i for i, token in enumerate(ORIGINAL_VOCAB)}
    tokenizer = tokenization.WordpieceTokenizer(vocab=vocab)
    assert tokenizer.tokenize("") == []
    assert tokenizer.tokenize("unwanted running") == ["un", "##want", "##ed", "runn", "##ing"]
    assert tokenizer.tokenize("unwantedX running") == ["[UNK]", "runn", "##ing"]


def test_convert_tokens_to_ids():
    vocab = {token: i for i, token in enumerate(ORIGINAL_VOCAB)}
    assert tokenization.convert_tokens_to_ids(
        vocab, ["un", "##want", "##ed", "runn", "##ing"]) == [7, 4, 5, 8, 9]
    inv_vocab = {i: token for token, i in vocab.items()}
    assert tokenization.convert_ids_to_tokens(inv_vocab, [7, 4]) == ["un", "##want"]


def test_is_whitespace():
    for char in (" ", "\t", "\r", "\n", "\u00A0"):
        assert tokenization._is_whitespace(char)
    for char in ("A", "-"):
        assert not tokenization._is_whitespace(char)


def test_is_control():
    assert tokenization._is_control("\u0005")
    for char in ("A", " ", "\t", "\r", "\U0001F4A9"):
        assert not tokenization._is_control(char)


def test_is_punctuation():
    for char in ("-", "$", "`", "."):
        assert tokenization._is_punctuation(char)
    for char in ("A", " "):
        assert not tokenization._is_punctuation(char)


# ------------------------------------------- tokenization: the rest of the module's API
ORIGINAL_SIGNATURES = {
    "convert_to_unicode": ["text"], "printable_text": ["text"], "load_vocab": ["vocab_file"],
    "convert_by_vocab": ["vocab", "items"], "convert_tokens_to_ids": ["vocab", "tokens"],
    "convert_ids_to_tokens": ["inv_vocab", "ids"], "whitespace_tokenize": ["text"],
    "validate_case_matches_checkpoint": ["do_lower_case", "init_checkpoint"],
    "FullTokenizer": ["vocab_file", "do_lower_case"], "BasicTokenizer": ["do_lower_case"],
    "WordpieceTokenizer": ["vocab", "unk_token", "max_input_chars_per_word"],
    "_is_whitespace": ["char"], "_is_control": ["char"], "_is_punctuation": ["char"]}


@pytest.mark.parametrize("name", sorted(ORIGINAL_SIGNATURES))
def test_every_original_name_takes_the_original_arguments(name):
    parameters = list(inspect.signature(getattr(tokenization, name)).parameters)
    expected = ORIGINAL_SIGNATURES[name]
    assert parameters[:len(expected)] == expected  # FullTokenizer adds keep_special_tokens


def test_module_functions_behave_as_the_original(tmp_path):
    assert tokenization.convert_to_unicode(b"caf\xc3\xa9") == "café"
    assert tokenization.convert_to_unicode("café") == "café"
    assert tokenization.printable_text(b"caf\xc3\xa9") == "café"
    for function in (tokenization.convert_to_unicode, tokenization.printable_text):
        with pytest.raises(ValueError, match="unsupported string type"):
            function(3)
    assert tokenization.whitespace_tokenize("  a b\tc \n") == ["a", "b", "c"]
    assert tokenization.whitespace_tokenize("   ") == []
    (tmp_path / "vocab.txt").write_text("[UNK]\nhello\n##s\n", encoding="utf-8")
    vocab = tokenization.load_vocab(str(tmp_path / "vocab.txt"))
    assert list(vocab.items()) == [("[UNK]", 0), ("hello", 1), ("##s", 2)]
    assert tokenization.FullTokenizer(str(tmp_path / "vocab.txt")).tokenize(
        "Hellos hi") == ["hello", "##s", "[UNK]"]


def test_validate_case_matches_checkpoint():
    check = tokenization.validate_case_matches_checkpoint
    check(True, "/m/uncased_L-12_H-768_A-12/bert_model.ckpt")
    check(False, "/m/cased_L-12_H-768_A-12/bert_model.ckpt")
    check(False, "/m/my_model/bert_model.ckpt")  # not a released name: nothing to check
    check(False, None)
    with pytest.raises(ValueError, match=r"`--do_lower_case=False`.*lowercased model.*"
                                         r"`--do_lower_case=True`"):
        check(False, "/m/uncased_L-12_H-768_A-12/bert_model.ckpt")
    with pytest.raises(ValueError, match=r"cased model.*`--do_lower_case=False`"):
        check(True, "/m/multi_cased_L-12_H-768_A-12/bert_model.ckpt")


# ----------------------------------------------------------------------------- modeling
def test_bert_config_is_the_originals(tmp_path):
    config = modeling.BertConfig(vocab_size=99)
    assert config.to_dict() == dict(
        vocab_size=99, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
        intermediate_size=3072, hidden_act="gelu", hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1, max_position_embeddings=512, type_vocab_size=16,
        initializer_range=0.02)
    values = tiny_config_dict()
    assert modeling.BertConfig.from_dict(values).to_dict() == values
    assert modeling.BertConfig.from_dict({"vocab_size": 7}).hidden_size == 768
    text = modeling.BertConfig.from_dict(values).to_json_string()
    assert text.endswith("}\n") and json.loads(text) == values
    assert text == json.dumps(values, indent=2, sort_keys=True) + "\n"
    (tmp_path / "bert_config.json").write_text(text)
    loaded = modeling.BertConfig.from_json_file(str(tmp_path / "bert_config.json"))
    assert loaded.to_dict() == values
    (tmp_path / "bad.json").write_text(json.dumps(dict(values, hiden_size=3)))
    with pytest.raises(ValueError, match=r"bad.json: unknown BERT config keys \['hiden_size'\]"):
        modeling.BertConfig.from_json_file(str(tmp_path / "bad.json"))
    with pytest.raises(ValueError, match="hidden_size.*divisible"):
        modeling.BertModel(modeling.BertConfig(99, hidden_size=30), False, [[1, 2]])


def _inputs():
    ids = np.array([[2, 7, 8, 9, 3, 0], [2, 10, 11, 3, 12, 3]], "int32")
    mask = np.array([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]], "int32")
    types = np.array([[0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 1, 1]], "int32")
    return ids, mask, types


@pytest.fixture(scope="module")
def released_tiny(tmp_path_factory):
    """(folder, reference encoder, weights by name) of a tiny released checkpoint."""
    folder = tmp_path_factory.mktemp("tiny") / "uncased_L-2_H-32_A-4"
    encoder = write_released_checkpoint(str(folder), tiny_model(BertEncoder, tiny_config(), 3))
    reader = tf.train.load_checkpoint(str(folder / "bert_model.ckpt"))
    weights = {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}
    return folder, encoder, weights


def test_bert_model_getters_equal_the_encoder_and_numpy(released_tiny):
    folder, encoder, weights = released_tiny
    config = modeling.BertConfig.from_json_file(str(folder / "bert_config.json"))
    ids, mask, types = _inputs()
    model = modeling.BertModel(config, is_training=False, input_ids=ids, input_mask=mask,
                               token_type_ids=types)
    report = modeling.init_from_checkpoint(model, str(folder / "bert_model.ckpt"))
    assert report.newly_initialized == [] and report.unmatched == []
    expected = encoder({"input_ids": ids, "input_mask": mask, "segment_ids": types})
    np.testing.assert_allclose(model.get_sequence_output(), expected["sequence_output"],
                               atol=1e-5)
    np.testing.assert_allclose(model.get_pooled_output(), expected["pooled_output"], atol=1e-5)
    layers = model.get_all_encoder_layers()
    assert len(layers) == 2
    for ours, theirs in zip(layers, expected["encoder_outputs"]):
        np.testing.assert_allclose(ours, theirs, atol=1e-5)
    sequence, pooled, per_layer = numpy_bert.encoder_forward(weights, 2, 4, ids, mask, types)
    np.testing.assert_allclose(model.get_sequence_output(), sequence, atol=1e-5)
    np.testing.assert_allclose(model.get_pooled_output(), pooled, atol=1e-5)
    np.testing.assert_allclose(layers[0], per_layer[0], atol=1e-5)
    embeddings = numpy_bert.layer_norm(
        weights["bert/embeddings/word_embeddings"][ids]
        + weights["bert/embeddings/token_type_embeddings"][types]
        + weights["bert/embeddings/position_embeddings"][:ids.shape[1]][None],
        weights["bert/embeddings/LayerNorm/gamma"], weights["bert/embeddings/LayerNorm/beta"])
    np.testing.assert_allclose(model.get_embedding_output(), embeddings, atol=1e-5)
    np.testing.assert_array_equal(model.get_embedding_table(),
                                  weights["bert/embeddings/word_embeddings"])
    assert model.get_embedding_table().shape == (99, 32)


def test_bert_model_defaults_dropout_and_training(released_tiny):
    folder, encoder, _ = released_tiny
    ids, _, _ = _inputs()
    config = modeling.BertConfig.from_dict(tiny_config_dict(hidden_dropout_prob=0.5))
    plain = modeling.BertModel(config, False, ids, encoder=encoder)  # mask 1, types 0
    explicit = modeling.BertModel(config, False, ids, np.ones_like(ids), np.zeros_like(ids),
                                  encoder=encoder)
    np.testing.assert_array_equal(plain.get_pooled_output(), explicit.get_pooled_output())
    assert plain.config.hidden_dropout_prob == 0.0 and config.hidden_dropout_prob == 0.5
    model = modeling.BertModel(config, True, ids, scope="bert")
    modeling.init_from_checkpoint(model, str(folder))  # a released folder works too
    assert model.encoder.name == "bert"
    assert not np.allclose(model.get_sequence_output(), plain.get_sequence_output())
    with tf.GradientTape() as tape:  # training: the same weights on a new batch
        step = modeling.BertModel(config, True, ids[:1], encoder=model.encoder)
        loss = tf.reduce_sum(step.get_pooled_output() ** 2)
    gradients = tape.gradient(loss, step.trainable_variables)
    assert len(gradients) == len(encoder.trainable_variables)
    assert all(gradient is not None for gradient in gradients)
    with pytest.raises(ValueError, match=r"`input_ids` must be \[batch_size, seq_length\]"):
        modeling.BertModel(config, False, ids[0], encoder=encoder)


def test_assignment_map_names_the_checkpoint_variables(released_tiny):
    folder, encoder, weights = released_tiny
    ids, _, _ = _inputs()
    model = modeling.BertModel(modeling.BertConfig.from_dict(tiny_config_dict()), False, ids)
    assignment_map, initialized = modeling.get_assignment_map_from_checkpoint(
        model, str(folder / "bert_model.ckpt"))
    assert sorted(assignment_map) == sorted(weights)
    variable = assignment_map["bert/encoder/layer_1/attention/self/query/kernel"]
    assert variable is model.encoder.layer_1.self_attention.query.kernel
    assert initialized["bert/pooler/dense/bias"] == 1
    assert initialized["bert/pooler/dense/bias:0"] == 1
    with pytest.raises(TypeError, match="takes the model"):
        modeling.get_assignment_map_from_checkpoint([variable], str(folder))
    del encoder


@pytest.mark.slow
def test_the_shared_checkpoint_equals_our_encoder(shared_data_dir):
    folder = shared_data_dir / "checkpoints" / "uncased_L-6_H-384_A-12"
    if not folder.is_dir():
        pytest.skip(f"{folder} not found")
    tokenizer = tokenization.FullTokenizer(str(folder / "vocab.txt"), do_lower_case=True)
    tokens = ["[CLS]"] + tokenizer.tokenize("The quick brown fox jumps.") + ["[SEP]"]
    ids = np.array([tokenizer.convert_tokens_to_ids(tokens)], "int32")
    config = modeling.BertConfig.from_json_file(str(folder / "bert_config.json"))
    model = modeling.BertModel(config, False, ids)
    report = modeling.init_from_checkpoint(model, str(folder / "bert_model.ckpt"))
    assert report.newly_initialized == [] and report.unmatched == []
    expected = from_pretrained(BertEncoder, str(folder))({"input_ids": ids})
    np.testing.assert_allclose(model.get_sequence_output(), expected["sequence_output"],
                               atol=1e-5)
    np.testing.assert_allclose(model.get_pooled_output(), expected["pooled_output"], atol=1e-5)
    for ours, theirs in zip(model.get_all_encoder_layers(), expected["encoder_outputs"]):
        np.testing.assert_allclose(ours, theirs, atol=1e-5)
    reader = tf.train.load_checkpoint(str(folder / "bert_model.ckpt"))
    weights = {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}
    sequence, pooled, _ = numpy_bert.encoder_forward(weights, 6, 12, ids, np.ones_like(ids),
                                                     np.zeros_like(ids))
    np.testing.assert_allclose(model.get_sequence_output(), sequence, atol=1e-5)
    np.testing.assert_allclose(model.get_pooled_output(), pooled, atol=1e-5)


# ------------------------------------------------------------------------- optimization
def _learning_rates(optimizer, steps):
    rates = []
    for step in range(steps):
        optimizer.iterations.assign(step)
        rates.append(float(optimizer.learning_rate))
    return rates


def test_schedule_is_the_originals_table():
    # init_lr 0.1, 10 steps, 3 of warm-up: 0.1 * t / 3 while t < 3, then the decay over
    # all 10 steps, 0.1 * (1 - t / 10), reaching 0 at step 10.
    table = [0.0, 0.1 / 3, 0.2 / 3, 0.07, 0.06, 0.05, 0.04, 0.03, 0.02, 0.01, 0.0, 0.0]
    rates = _learning_rates(optimization.create_optimizer(0.1, 10, 3), len(table))
    np.testing.assert_allclose(rates, table, atol=1e-8)
    no_warmup = [0.1 * (1 - t / 10) for t in range(10)] + [0.0]
    rates = _learning_rates(optimization.create_optimizer(0.1, 10, 0, use_tpu=True), 11)
    np.testing.assert_allclose(rates, no_warmup, atol=1e-8)


def _original_updates(values, gradients, rates):
    """google-research/bert's update in numpy: clip_by_global_norm(1.0), then
    AdamWeightDecayOptimizer (no bias correction; no decay for LayerNorm and bias)."""
    values = {name: value.astype(np.float64) for name, value in values.items()}
    m = {name: np.zeros_like(value) for name, value in values.items()}
    v = {name: np.zeros_like(value) for name, value in values.items()}
    for step_gradients, rate in zip(gradients, rates):
        norm = np.sqrt(sum(np.sum(g.astype(np.float64) ** 2) for g in step_gradients.values()))
        scale = 1.0 / max(norm, 1.0)
        for name, gradient in step_gradients.items():
            gradient = gradient * scale
            m[name] = 0.9 * m[name] + 0.1 * gradient
            v[name] = 0.999 * v[name] + 0.001 * gradient ** 2
            update = m[name] / (np.sqrt(v[name]) + 1e-6)
            if name == "kernel":  # LayerNorm's gamma / beta and the bias: no decay
                update += 0.01 * values[name]
            values[name] = values[name] - rate * update
    return values


def test_updates_equal_our_adamw_path_and_the_original_rule():
    rng = np.random.default_rng(0)
    initial = {name: rng.normal(size=shape).astype("float32")
               for name, shape in (("kernel", (3, 4)), ("bias", (4,)), ("gamma", (4,)),
                                   ("beta", (4,)))}
    gradients = [{name: (rng.normal(size=value.shape) * (3.0 if step % 2 else 0.1))
                  .astype("float32") for name, value in initial.items()}
                 for step in range(6)]  # odd steps clipped, even ones not

    def run(optimizer):
        variables = {name: keras.Variable(value, name=name) for name, value in initial.items()}
        for step_gradients in gradients:
            optimizer.apply_gradients([(tf.constant(step_gradients[name]), variables[name])
                                       for name in variables])
        return {name: variable.numpy() for name, variable in variables.items()}

    compat = run(optimization.create_optimizer(0.1, 10, 3))
    ours = run(our_optimization.create_optimizer(
        0.1, 10, 3, weight_decay_rate=0.01, clipnorm=1.0, epsilon=1e-6,
        lr_schedule="google_research", adam_bias_correction=False))
    rates = [0.0, 0.1 / 3, 0.2 / 3, 0.07, 0.06, 0.05]
    reference = _original_updates(initial, gradients, rates)
    for name in initial:
        np.testing.assert_array_equal(compat[name], ours[name])
        np.testing.assert_allclose(compat[name], reference[name], rtol=1e-5, atol=1e-6)
        assert not np.allclose(compat[name], initial[name])


def test_create_optimizer_refuses_the_originals_loss_argument():
    with pytest.raises(TypeError, match="took the loss first"):
        optimization.create_optimizer(tf.constant(1.0), 10, 1)


# ------------------------------------------------------- a DataProcessor of one's own
PROCESSOR_MODULE = '''
import os
from bert_tf.compat import tokenization
from bert_tf.compat.run_classifier import DataProcessor, InputExample


class PairProcessor(DataProcessor):
    """As the original's MrpcProcessor: quality, id, id, sentence 1, sentence 2."""

    def get_train_examples(self, data_dir):
        return self._create_examples(
            self._read_tsv(os.path.join(data_dir, "train.tsv")), "train")

    def get_dev_examples(self, data_dir):
        return self._create_examples(self._read_tsv(os.path.join(data_dir, "dev.tsv")), "dev")

    def get_test_examples(self, data_dir):
        return self._create_examples(
            self._read_tsv(os.path.join(data_dir, "test.tsv")), "test")

    def get_labels(self):
        return ["0", "1"]

    def _create_examples(self, lines, set_type):
        examples = []
        for (i, line) in enumerate(lines):
            if i == 0:
                continue
            guid = "%s-%s" % (set_type, i)
            text_a = tokenization.convert_to_unicode(line[3])
            text_b = tokenization.convert_to_unicode(line[4])
            label = "0" if set_type == "test" else tokenization.convert_to_unicode(line[0])
            examples.append(
                InputExample(guid=guid, text_a=text_a, text_b=text_b, label=label))
        return examples


class NoTestProcessor(PairProcessor):
    get_test_examples = DataProcessor.get_test_examples


processors = {"pairs": PairProcessor, "no_test": NoTestProcessor}
'''
WORDS = ["good", "bad", "movie", "film", "plot", "the", "was", "very"]


def _write_pairs(data_dir, rng, count, name):
    rows = [("Quality", "#1 ID", "#2 ID", "#1 String", "#2 String")]
    for index in range(count):
        label = index % 2
        words = list(rng.choice(WORDS[2:], size=3))
        rows.append((str(label), str(index), str(index), " ".join(words),
                     " ".join(words + ["good" if label else "bad"])))
    write_tsv(data_dir / name, rows)


@pytest.fixture
def pair_task(tmp_path, monkeypatch):
    """(module path, data_dir, model files) of an original-style processor module."""
    monkeypatch.setattr(user_processors, "_REGISTRY", {})
    module = tmp_path / "my_processors.py"
    module.write_text(textwrap.dedent(PROCESSOR_MODULE))
    rng = np.random.default_rng(0)
    for name, count in (("train.tsv", 32), ("dev.tsv", 8), ("test.tsv", 6)):
        _write_pairs(tmp_path / "data", rng, count, name)
    vocab_file, config_file = write_tiny_model_files(tmp_path, WORDS)
    return str(module), tmp_path / "data", vocab_file, config_file


def test_a_processor_module_adds_its_task_names(pair_task, tmp_path):
    module, data_dir, vocab_file, config_file = pair_task
    options = ClassifierOptions(
        task_name="PAIRS", processor_module=module, data_dir=str(data_dir),
        output_dir=str(tmp_path / "out"), vocab_file=vocab_file,
        bert_config_file=config_file, do_train=True, do_predict=True)
    processor = classification_task.make_processor(options)
    assert run_classifier.registered_names() == ["no_test", "pairs"]
    assert processor.name == "pairs" and processor.get_labels() == ["0", "1"]
    assert processor.text_pair_column == "text_b"  # pairs: the export takes text_b
    examples = processor.get_examples(str(data_dir), "train")
    assert len(examples) == 32 and examples[1].guid == "train-2"
    assert examples[1].text_b.endswith("good") and examples[1].label == "1"
    assert processor.data_files(str(data_dir), "test") == [str(data_dir / "test.tsv")]
    task = classification_task.ClassificationTask(options)
    assert task.name == "classification/pairs"
    no_test = classification_task.make_processor(dataclasses.replace(options,
                                                                     task_name="no_test"))
    with pytest.raises(ValueError, match="NoTestProcessor.get_test_examples is not "
                                         "implemented; the run reads the test set"):
        no_test.get_examples(str(data_dir), "test")
    with pytest.raises(ValueError, match="'MRPC' is a built-in task's name"):
        run_classifier.register_processor("MRPC", run_classifier.DataProcessor)
    with pytest.raises(ValueError, match="'sst2' is a built-in task's name"):
        run_classifier.register_processor("sst2", run_classifier.DataProcessor)
    with pytest.raises(ValueError, match="processor_module 'no_such_module': no such module"):
        user_processors.load_processor_module("no_such_module")


class _PlainFileProcessor(run_classifier.DataProcessor):
    """Reads its data without `_read_tsv`, and gives guids without their split."""

    def get_train_examples(self, data_dir):
        with open(os.path.join(data_dir, "train.tsv"), encoding="utf-8") as file:
            rows = [line.rstrip("\n").split("\t") for line in file][1:]
        return [run_classifier.InputExample(str(i), row[3], None, int(row[0]))
                for i, row in enumerate(rows)]

    def get_labels(self):
        return [0, 1]


def test_a_registered_processor_without_read_tsv(pair_task):
    _, data_dir, _, _ = pair_task
    run_classifier.register_processor("Plain", _PlainFileProcessor)
    processor = user_processors.get_processor("plain", str(data_dir), ["train"])
    examples = processor.get_examples(str(data_dir), "train")
    assert examples[3].guid == "train-3" and examples[3].label == "1"
    assert processor.get_labels() == ["0", "1"] and processor.text_pair_column is None
    assert processor.data_files(str(data_dir), "train") == [
        str(data_dir / name) for name in ("dev.tsv", "test.tsv", "train.tsv")]


def test_an_original_style_processor_runs_bert_run_classifier(pair_task, tmp_path):
    module, data_dir, vocab_file, config_file = pair_task
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "run_classifier", f"--processor_module={module}",
         "--task_name=pairs", f"--data_dir={data_dir}", f"--output_dir={out}",
         f"--vocab_file={vocab_file}", f"--bert_config_file={config_file}", "--do_train",
         "--do_eval", "--do_predict", "--max_seq_length=16", "--train_batch_size=16",
         "--num_train_epochs=1", "--allow_random_encoder", "--dropout_rate=0"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 0, result.stderr[-3000:]
    results = dict(line.split(" = ") for line in (out / "eval_results.txt").read_text()
                   .splitlines())
    assert results["global_step"] == "2" and "eval_accuracy" in results
    predictions = (out / "predictions.tsv").read_text().splitlines()
    assert predictions[0] == "index\tprediction\t0\t1"
    assert [line.split("\t")[0] for line in predictions[1:]] == [str(i) for i in range(1, 7)]
    assert (out / "label_list.txt").read_text() == "0\n1\n"
    saved = json.loads((out / "config.json").read_text())
    assert saved["task"] == "classification/pairs" and saved["labels"] == ["0", "1"]
    assert saved["options"]["processor_module"] == module


@pytest.mark.slow
def test_a_run_of_an_original_style_processor_exports_with_no_task_flag(pair_task, tmp_path):
    module, data_dir, vocab_file, config_file = pair_task
    out = tmp_path / "out"
    classification_task.run(ClassifierOptions(
        task_name="pairs", processor_module=module, data_dir=str(data_dir),
        output_dir=str(out), vocab_file=vocab_file, bert_config_file=config_file,
        do_train=True, do_predict=True, max_seq_length=16, train_batch_size=16,
        num_train_epochs=1.0, allow_random_encoder=True))
    export_dir = export_checkpoint.export_from_checkpoint(export_checkpoint.ExportOptions(
        init_checkpoint=str(out), export_dir=str(tmp_path / "export")))
    serving = tf.saved_model.load(str(export_dir)).signatures["serving_default"]
    test = run_classifier.DataProcessor._read_tsv(str(data_dir / "test.tsv"))[1:]
    outputs = serving(text_a=tf.constant([row[3] for row in test]),
                      text_b=tf.constant([row[4] for row in test]))
    probabilities = np.loadtxt(out / "test_results.tsv", delimiter="\t")
    np.testing.assert_allclose(outputs["probabilities"].numpy(), probabilities, atol=1e-5)
