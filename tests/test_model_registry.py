"""The model-type registry (`bert_tf.serving.registry`): a head model defined and
registered here, in the test only, goes through the google-research checkpoint layout,
a SavedModel and a Hugging Face folder without a change to the library; the built-in
types answer by name, alias and class; nothing below the registry dispatches on a
built-in model class or model type name; an unregistered model is told how to register.
"""

import ast
import json
import pathlib

import keras
import numpy as np
import pytest
import tensorflow as tf
from safetensors import safe_open

from bert_tf.models import (BertClassifier, BertEncoder, BertPretrainer,
                            BertSpanLabeler, BertTokenClassifier)
from bert_tf.models.encoder import EncoderHeadModel
from bert_tf.serving import export, formats, huggingface, keras_hub, litert, registry, tfhub
from bert_tf.serving import signatures as sig
from bert_tf.serving.registry import ModelType
from bert_tf.text.tokenization import FullTokenizer
from bert_tf.train import warm_start
from bert_tf.weights import checkpoints
from bert_tf.tasks.multiple_choice.model import BertMultipleChoice
from bert_tf.tasks.electra.model import ElectraPretrainer  # noqa: E402 (registered after)
from bert_tf.tasks.sentence_embeddings.model import SentenceEncoder  # noqa: E402
from bert_tf.text.preprocessor import Preprocessor
from harness import SPECIAL_TOKENS, tiny_config, tiny_model, write_vocab

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "bert_tf"
WORDS = ["hello", "world", "the", "red", "house", "##s", "is", "blue", "."]
TEXTS = ["Hello world, the red houses!", "the house is blue ."]
LENGTH = 16
BUILT_INS = {"encoder": BertEncoder, "pretrainer": BertPretrainer,
             "classifier": BertClassifier, "token_classifier": BertTokenClassifier,
             "span_labeler": BertSpanLabeler, "multiple_choice": BertMultipleChoice,
             "electra": ElectraPretrainer, "sentence_encoder": SentenceEncoder}


# ------------------------------------------------------------------ the toy model type
@keras.saving.register_keras_serializable(package="bert_tf_tests")
class ToyScorer(EncoderHeadModel):
    """Three scores from the pooled output through a plain Keras Dense layer."""

    default_name = "toy_scorer"
    hf_head_names = {"cls/toy/output_weights": "toy_head.weight",
                     "cls/toy/output_bias": "toy_head.bias"}

    def __init__(self, encoder, num_scores=3, **kwargs):
        super().__init__(encoder, **kwargs)
        self.num_scores = num_scores
        self.scorer = keras.layers.Dense(num_scores, name="scorer", dtype=self.dtype_policy)

    def heads(self):
        return [self.scorer]

    def build(self, input_shape=None):
        if not self.encoder.built:
            self.encoder.build()
        self.scorer.build((None, self.config.hidden_size))
        self.built = True

    def google_head_entries(self):
        return {"cls/toy/output_weights": (self.scorer.kernel, True),
                "cls/toy/output_bias": (self.scorer.bias, False)}

    def call(self, inputs, training=None):
        pooled = self.encoder(inputs, training=training)["pooled_output"]  # [B, H]
        return {"scores": tf.cast(self.scorer(pooled), tf.float32)}  # [B, 3]

    def get_config(self):
        config = super().get_config()
        config.update(num_scores=self.num_scores)
        return config


def toy_text_signature(module):
    """`serving_default` of the toy: raw `text` [B] in, its scores out."""
    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string, "text")])
    def serve_text(text):
        return module.logits(sig.encode_texts(module.tokenizer, module.max_seq_length, text))
    return serve_text.get_concrete_function()


def export_toy(model, preprocessor, export_dir, **kwargs):
    export.check_model_and_vocab(model, ToyScorer, preprocessor)
    return export.export_signatures(model, preprocessor, export_dir,
                                    make_default=toy_text_signature, **kwargs)


TOY = ModelType(name="toy_scorer", model_class=ToyScorer, aliases=("toy",),
                formats=("saved_model", "huggingface", "litert"),
                refused={"keras_hub": "keras-hub has no toy scorer"},
                saved_model=export_toy, outputs=("scores",),
                hf_architecture="BertForToyScoring", litert_layout="[CLS] text [SEP]")


@pytest.fixture
def toy_type():
    registry.register(TOY)
    yield TOY
    registry.unregister(TOY.name)


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
    return write_vocab(tmp_path_factory.mktemp("vocab") / "vocab.txt",
                       SPECIAL_TOKENS + WORDS, size=99)


def randomized(model_cls, seed, **head):
    """A tiny model with every weight moved away from its initial value."""
    model = tiny_model(model_cls, tiny_config(), seed, **head)
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        variable.assign(variable.numpy() + rng.normal(0, 0.2, variable.shape))
    return model


def assert_same_weights(model, other):
    assert [v.path for v in model.weights] == [v.path for v in other.weights]
    for ours, theirs in zip(model.weights, other.weights):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy(), err_msg=ours.path)


def features_of(vocab_file, texts):
    """[CLS] text [SEP] ids as the training features lay them out, padded to LENGTH."""
    tokenizer = FullTokenizer(vocab_file, do_lower_case=True)
    ids = np.zeros((len(texts), LENGTH), np.int32)
    for row, text in enumerate(texts):
        tokens = ["[CLS]"] + tokenizer.tokenize(text)[:LENGTH - 2] + ["[SEP]"]
        ids[row, :len(tokens)] = tokenizer.convert_tokens_to_ids(tokens)
    return {"input_ids": ids, "input_mask": (ids > 0).astype(np.int32),
            "segment_ids": np.zeros_like(ids)}


# -------------------------------------------------------------- toy round trips
def test_toy_round_trips_through_the_google_checkpoint_layout(toy_type, tmp_path):
    model = randomized(ToyScorer, 1)
    checkpoints.save_google_checkpoint(model, tmp_path / "bert_model.ckpt", write_config=True)
    stored = dict(tf.train.list_variables(str(tmp_path / "bert_model.ckpt")))
    assert stored["cls/toy/output_weights"] == [3, 32]  # [out, in], as google-research
    assert stored["bert/encoder/layer_1/output/dense/kernel"] == [37, 32]
    fresh = randomized(ToyScorer, 2)
    report = checkpoints.load_google_checkpoint(fresh, tmp_path / "bert_model.ckpt")
    assert not report.newly_initialized and not report.unmatched
    assert_same_weights(model, fresh)
    loaded = checkpoints.from_pretrained(ToyScorer, tmp_path)  # the released-folder path
    assert_same_weights(model, loaded)


def test_toy_saved_model_answers_as_the_keras_model(toy_type, vocab, tmp_path):
    model = randomized(ToyScorer, 3)
    path = export.export_finetuned_model(
        model, Preprocessor(vocab, True, LENGTH), tmp_path / "toy", "toy")
    loaded = tf.saved_model.load(path)
    assert sorted(loaded.signatures) == sorted(export.SIGNATURE_NAMES)
    features = features_of(vocab, TEXTS)
    expected = model(features, training=False)["scores"].numpy()  # [2, 3]
    by_text = loaded.signatures["serving_default"](text=tf.constant(TEXTS))
    np.testing.assert_allclose(by_text["scores"], expected, atol=1e-5)
    by_ids = loaded.signatures["serve_ids"](**{k: tf.constant(v) for k, v in features.items()})
    assert sorted(by_ids) == ["scores"]
    np.testing.assert_allclose(by_ids["scores"], expected, atol=1e-5)


def test_toy_huggingface_folder_has_its_names_and_reads_back(toy_type, vocab, tmp_path):
    model = randomized(ToyScorer, 4)
    folder = huggingface.export_huggingface(model, Preprocessor(vocab, True), tmp_path / "hf")
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["architectures"] == ["BertForToyScoring"] and "id2label" not in config
    with safe_open(str(tmp_path / "hf" / "model.safetensors"), framework="np") as handle:
        names = set(handle.keys())
        np.testing.assert_array_equal(handle.get_tensor("toy_head.weight"),
                                      model.scorer.kernel.numpy().T)  # torch [out, in]
    assert {"toy_head.bias", "bert.pooler.dense.weight",
            "bert.encoder.layer.1.output.LayerNorm.weight"} <= names
    assert len(names) == len(model.weights)
    assert_same_weights(model, checkpoints.from_pretrained(ToyScorer, folder))


def test_toy_formats_follow_its_registration(toy_type, vocab):
    model = randomized(ToyScorer, 5)
    config = litert.litert_config(model, Preprocessor(vocab, True, LENGTH))
    assert (config["output_names"], config["layout"]) == (["scores"], "[CLS] text [SEP]")
    assert "label_names" not in config and "problem_type" not in config
    litert.check_model_class(ToyScorer)
    huggingface.check_model_class(ToyScorer)
    with pytest.raises(ValueError, match=r"a ToyScorer cannot be exported as a keras-hub "
                                         r"preset: keras-hub has no toy scorer\. Export it "
                                         r"with export_format=saved_model, huggingface, "
                                         r"litert or onnx"):
        keras_hub.check_model_class(ToyScorer)
    with pytest.raises(ValueError, match=r"a ToyScorer cannot be exported as a TF Hub"):
        tfhub.check_model_class(ToyScorer)


def test_a_warm_start_restores_the_heads_a_class_lists(tmp_path):
    warm_toy = type("WarmToy", (ToyScorer,),
                    {"pretrained_heads": (("scorer", "cls/toy/", "toy head"),)})
    model = randomized(warm_toy, 7)
    prefix = tf.train.Checkpoint(model=model).write(str(tmp_path / "ckpt-1"))
    fresh = randomized(warm_toy, 8)
    report = warm_start.start_from(fresh, None, prefix)
    assert {"cls/toy/output_weights", "cls/toy/output_bias"} <= set(report.loaded)
    assert not report.newly_initialized
    assert_same_weights(model, fresh)
    assert "toy head cls/toy/*: loaded" in warm_start.describe(report, fresh, prefix)
    plain = randomized(ToyScorer, 8)  # lists no head: the run's head is not read
    report = warm_start.start_from(plain, None, prefix)
    assert sorted(report.newly_initialized) == ["cls/toy/output_bias",
                                                "cls/toy/output_weights"]


# --------------------------------------------------------------------- the registry
def test_built_in_types_answer_by_name_alias_and_class():
    assert {name: registry.get(name).model_class for name in BUILT_INS} == BUILT_INS
    assert registry.get("squad") is registry.get("span_labeler")
    assert registry.get("ner") is registry.get("token_classifier")
    # Names in registration order (which task folder imports first varies), then aliases.
    assert sorted(registry.names()[:-2]) == sorted(BUILT_INS)
    assert registry.names()[-2:] == ("ner", "squad")
    assert export.canonical_model_type("squad") == "span_labeler"
    assert export.keras_model_class("ner") is BertTokenClassifier
    classifier = tiny_model(BertClassifier, tiny_config(), 0, num_classes=2)
    assert registry.for_model(classifier).name == "classifier"
    subclass = type("MyClassifier", (BertClassifier,), {})
    assert registry.for_model(subclass) is registry.get("classifier")  # nearest base
    assert registry.classes_for("tfhub") == [BertEncoder, SentenceEncoder]


def test_every_format_refusal_gives_its_reason():
    for entry in registry.types():
        assert set(entry.formats) | set(entry.refused) <= set(formats.names())
    with pytest.raises(ValueError, match=r"a BertPretrainer cannot be exported as a "
                                         r"SavedModel: --model_type=pretrainer exports "
                                         r"with --export_format=huggingface"):
        export.export_finetuned_model(None, None, "unused", "pretrainer")
    with pytest.raises(ValueError, match=r"a BertMultipleChoice has no Hugging Face "
                                         r"export; the format takes BertEncoder, "
                                         r"BertPretrainer, BertClassifier, "
                                         r"BertTokenClassifier, BertSpanLabeler"):
        huggingface.check_model_class(BertMultipleChoice)


def test_a_type_is_registered_once(toy_type):
    with pytest.raises(ValueError, match=r"\['toy_scorer', 'toy'\] already registered"):
        registry.register(TOY)
    with pytest.raises(ValueError, match=r"ToyScorer is model type 'toy_scorer' already"):
        registry.register(ModelType(name="other", model_class=ToyScorer,
                                    saved_model=export_toy))
    with pytest.raises(ValueError, match=r"'classifier'\] already registered"):
        registry.register(ModelType(name="classifier", model_class=ToyScorer,
                                    saved_model=export_toy))
    with pytest.raises(ValueError, match=r"supports litert without what the format needs"):
        ModelType(name="x", model_class=ToyScorer, formats=("litert",))
    with pytest.raises(ValueError, match=r"unknown export formats \['coreml'\]"):
        ModelType(name="x", model_class=ToyScorer, formats=(), refused={"coreml": "no"})


def test_an_unregistered_model_is_told_how_to_register(vocab, tmp_path):
    model = randomized(ToyScorer, 6)
    how = r"bert_tf\.serving\.registry\.register\(ModelType\("
    with pytest.raises(ValueError, match=r"ToyScorer is not a registered model type: "
                                         r"describe it once with " + how):
        registry.for_model(model)
    with pytest.raises(ValueError, match=r"unknown model_type 'toy'; expected one of "
                                         r"encoder, .*squad \(a model of your own: .*" + how):
        export.export_finetuned_model(
            model, Preprocessor(vocab, True, LENGTH), tmp_path / "toy", "toy")
    with pytest.raises(ValueError, match=r"ToyScorer is not a registered model type"):
        export.ServingModule(model, Preprocessor(vocab, True, LENGTH))


def test_a_head_without_checkpoint_names_is_told_where_to_name_them():
    unnamed = type("UnnamedScorer", (ToyScorer,),
                   {"google_head_entries": EncoderHeadModel.google_head_entries})
    model = tiny_model(unnamed, tiny_config(), 0)
    with pytest.raises(ValueError, match=r"UnnamedScorer: variables without a checkpoint "
                                         r"name: .*scorer/kernel.*; a head model names its "
                                         r"head's variables in `google_head_entries\(\)`"):
        checkpoints.google_variable_map(model)


# ------------------------------------------------------------- no dispatch by type
def _checked_modules():
    paths = sorted((PACKAGE / "weights").glob("*.py")) + sorted(
        (PACKAGE / "serving").glob("*.py"))
    paths += [PACKAGE / "train" / "warm_start.py", PACKAGE / "runs" / "export_checkpoint.py"]
    return [path for path in paths if path.name != "model_types.py"]  # the registrations


def _names(node):
    """The bare names in an expression (`BertEncoder`, or those of a tuple of them)."""
    return {sub.id for sub in ast.walk(node) if isinstance(sub, ast.Name)} | {
        sub.attr for sub in ast.walk(node) if isinstance(sub, ast.Attribute)}


def _dispatches(tree, classes, type_names):
    """(line, what) of every isinstance / issubclass on a built-in model class, table
    keyed by one, and comparison with one or with a built-in model type's name."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("isinstance", "issubclass") and len(node.args) == 2
                and _names(node.args[1]) & classes):
            yield node.lineno, f"{node.func.id}(..., {ast.unparse(node.args[1])})"
        elif isinstance(node, ast.Dict) and any(
                key is not None and _names(key) & classes for key in node.keys):
            yield node.lineno, "a table keyed by model classes"
        elif isinstance(node, ast.Compare):
            for side in [node.left] + node.comparators:
                constants = {sub.value for sub in ast.walk(side) if isinstance(sub, ast.Constant)
                             and isinstance(sub.value, str)}
                if constants & type_names:
                    yield node.lineno, f"a comparison with {ast.unparse(side)}"
                elif _names(side) & classes:
                    yield node.lineno, f"a comparison with {ast.unparse(side)}"


def test_no_module_below_the_registry_dispatches_on_a_model_type():
    classes = {cls.__name__ for cls in BUILT_INS.values()}
    type_names = set(registry.names())
    assert classes == {entry.model_class.__name__ for entry in registry.types()}
    found = []
    for path in _checked_modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [f"{path.relative_to(PACKAGE)}:{line}: {what}"
                  for line, what in _dispatches(tree, classes, type_names)]
    assert not found, "look the model type up in bert_tf.serving.registry instead: " + \
        "; ".join(found)


def test_the_dispatch_check_sees_what_it_refuses():
    code = ("if isinstance(model, (BertClassifier, BertTokenClassifier)): pass\n"
            "TABLE = {BertEncoder: 'BertModel'}\n"
            "if model_type == 'classifier' or model_cls is BertPretrainer: pass\n"
            "if model_type in ('classifier', 'ner'): pass\n")
    found = list(_dispatches(ast.parse(code), {"BertClassifier", "BertTokenClassifier",
                                               "BertEncoder", "BertPretrainer"},
                             {"classifier"}))
    assert sorted(line for line, _ in found) == [1, 2, 3, 3, 4]
