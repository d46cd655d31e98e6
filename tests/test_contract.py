"""Every Keras layer, model and head of bert_tf.layers / bert_tf.models goes through the
shared contract of tests/contract.py (config, registration, .keras and SavedModel round
trips, variable sequence length, mixed precision, explicit names).

A class is found by walking the two packages' modules, so a new public Layer or Model
class fails `test_every_class_has_a_case` until it gets a `Case` here.
"""

import importlib
import inspect
import pkgutil

import keras
import numpy as np
import pytest

import bert_tf.layers
import bert_tf.models
import bert_tf.tasks
import contract
from bert_tf import layers
from bert_tf.models import (BertClassifier, BertEncoder, BertPretrainer,
                            BertSpanLabeler, BertTokenClassifier)
from bert_tf.models.encoder import EncoderHeadModel
from bert_tf.tasks.distillation.student import (TracedClassifier, TracedSpanLabeler,
                                                TracedTokenClassifier)
from bert_tf.tasks.electra.model import DiscriminatorHead, ElectraPretrainer, generator_config
from bert_tf.tasks.multiple_choice.model import BertMultipleChoice
from bert_tf.tasks.sentence_embeddings.model import SentenceEncoder
from contract import Case, encoder_features, hidden_states, input_mask, matrix, token_ids
from harness import tiny_config

H, A, I, V = 32, 4, 37, 99  # the tiny config's sizes (tests/harness.py)

# Public classes that are not built on their own, with the reason.
ABSTRACT = {
    EncoderHeadModel: "base class of the head models (heads() is abstract); every "
                      "subclass has its own case",
}


def _hidden(seq, real):
    return (hidden_states(seq, H),)


def _hidden_and_mask(seq, real):
    return hidden_states(seq, H), input_mask(seq, real)


def _encoder(hidden_act="gelu"):
    return BertEncoder(tiny_config(hidden_act=hidden_act))


def _choices_inputs(seq, real):
    """Three choices an example: the encoder features with other ids per choice."""
    features = encoder_features(seq, real)
    ids = np.stack([(features["input_ids"] - 5 + 17 * c) % 94 + 5 for c in range(3)], 1)
    return (dict({name: np.stack([value] * 3, 1) for name, value in features.items()},
                 input_ids=ids.astype("int32")),)


def _electra_inputs(seq, real):
    """The pre-training features and given replacements (the draw is random)."""
    positions = token_ids(3, seed=2) % 3  # [B, 3], real in every row
    features = dict(encoder_features(seq, real), masked_lm_positions=positions,
                    masked_lm_ids=token_ids(3, seed=4),
                    masked_lm_weights=np.ones(positions.shape, "float32"))
    return features, token_ids(3, seed=5)


def _pretrainer_inputs(seq, real):
    positions = token_ids(3, seed=2) % 3  # [B, 3], real in every row (lengths >= 3)
    return (dict(encoder_features(seq, real), masked_lm_positions=positions),)


CASES = [
    Case(layers.Projection, lambda: dict(
        units=7, activation="gelu_tanh", use_bias=False, initializer_range=0.1,
        kernel_distribution="normal", lora_rank=0, lora_alpha=None, lora_dropout=0.0,
        name="projection_case"),
        _hidden, build=lambda obj: obj.build((None, None, H))),
    Case(layers.Projection, lambda: dict(  # with LoRA adapters (--lora_rank)
        units=7, activation=None, use_bias=True, initializer_range=0.02,
        kernel_distribution="truncated_normal", lora_rank=3, lora_alpha=6.0,
        lora_dropout=0.1, name="lora_projection_case"),
        _hidden, build=lambda obj: obj.build((None, None, H)), id="Projection-lora"),
    Case(layers.Dropout, lambda: dict(rate=0.3, noise_shape=(None, 1, H), seed=3,
                                      name="dropout_case"), _hidden),
    Case(layers.PositionEmbedding, lambda: dict(
        max_length=16, width=H, initializer_range=0.05, name="position_case"),
        lambda seq, real: (token_ids(seq),), sequence_axis=0),
    Case(layers.BertEmbeddings, lambda: dict(
        vocab_size=V, hidden_size=H, max_position_embeddings=16, type_vocab_size=3,
        dropout_rate=0.2, initializer_range=0.03, name="embeddings_case"),
        lambda seq, real: (token_ids(seq), encoder_features(seq, real)["segment_ids"])),
    Case(layers.MultiHeadSelfAttention, lambda: dict(
        hidden_size=H, num_heads=A, dropout_rate=0.3, initializer_range=0.04,
        name="attention_case"), _hidden_and_mask),
    Case(layers.TransformerBlock, lambda: dict(
        hidden_size=H, num_heads=A, intermediate_size=I, hidden_act="swish",
        hidden_dropout_prob=0.15, attention_probs_dropout_prob=0.2, initializer_range=0.05,
        name="block_case"), _hidden_and_mask),
    Case(layers.Pooler, lambda: dict(hidden_size=H, initializer_range=0.06,
                                     name="pooler_case"), _hidden, sequence_axis=None),
    Case(layers.MaskedLMHead, lambda: dict(
        vocab_size=V, hidden_size=H, hidden_act="relu", initializer_range=0.07,
        embedding_size=None, name="predictions_case"),
        lambda seq, real: (hidden_states(seq, H), token_ids(3, seed=2) % 3,
                           matrix(V, H)),
        sequence_axis=None, float32_outputs=True),
    Case(layers.MaskedLMHead, lambda: dict(  # ELECTRA's generator: H -> E, tied to E
        vocab_size=V, hidden_size=H, hidden_act="gelu", initializer_range=0.02,
        embedding_size=24, name="narrow_predictions_case"),
        lambda seq, real: (hidden_states(seq, H), token_ids(3, seed=2) % 3,
                           0.1 * matrix(V, 24)),  # logits ~1: float32 rounding < 1e-6
        sequence_axis=None, float32_outputs=True, id="MaskedLMHead-embedding_size"),
    Case(DiscriminatorHead, lambda: dict(hidden_size=H, hidden_act="relu",
                                         initializer_range=0.05, name="discriminator_case"),
         _hidden, float32_outputs=True),
    Case(layers.ClassificationHead, lambda: dict(
        num_classes=3, hidden_size=H, dropout_rate=0.4, initializer_range=0.08,
        kernel_distribution="normal", name="classification_case"),
        _hidden, float32_outputs=True),  # on every token, as the tagger uses it
    Case(layers.SpanHead, lambda: dict(hidden_size=H, initializer_range=0.09,
                                       kernel_distribution="normal", name="span_case"),
         _hidden, float32_outputs=True),
    Case(BertEncoder, lambda: dict(config=tiny_config()),
         lambda seq, real: (encoder_features(seq, real),),
         sequence_axis={"sequence_output": 1, "encoder_outputs": 1, "pooled_output": None}),
    Case(BertPretrainer, lambda: dict(encoder=_encoder("gelu_tanh"), next_sentence=False),
         _pretrainer_inputs, sequence_axis=None, float32_outputs=True,
         id="BertPretrainer-masked_lm_only"),
    Case(BertPretrainer, lambda: dict(encoder=_encoder(), next_sentence=True),
         _pretrainer_inputs, sequence_axis=None, float32_outputs=True),
    Case(BertClassifier, lambda: dict(encoder=_encoder(), num_classes=3, dropout_rate=0.2,
                                      head_initializer="normal"),
         lambda seq, real: (encoder_features(seq, real),), sequence_axis=None,
         float32_outputs=True),
    Case(BertSpanLabeler, lambda: dict(encoder=_encoder("relu"), head_initializer="normal"),
         lambda seq, real: (encoder_features(seq, real),), float32_outputs=True),
    Case(BertTokenClassifier, lambda: dict(encoder=_encoder(), num_classes=5,
                                           dropout_rate=0.3, head_initializer="normal"),
         lambda seq, real: (encoder_features(seq, real),), float32_outputs=True),
    Case(BertMultipleChoice, lambda: dict(encoder=_encoder(), dropout_rate=0.25,
                                          head_initializer="normal"),
         _choices_inputs, sequence_axis=None, float32_outputs=True),
    Case(ElectraPretrainer, lambda: dict(
        encoder=_encoder(), generator_config=generator_config(tiny_config(), 0.5),
        temperature=0.5), _electra_inputs,
         sequence_axis={"masked_lm_logits": None, "sampled_ids": None,
                        "discriminator_logits": 1, "replaced": 1},
         float32_outputs={"masked_lm_logits", "discriminator_logits"}),
    Case(SentenceEncoder, lambda: dict(encoder=_encoder(), pooling="max", normalize=True),
         lambda seq, real: (encoder_features(seq, real),),
         sequence_axis={"embedding": None, "sequence_output": 1},
         float32_outputs={"embedding"}),
    # Distillation students: their inference outputs are their head model's.
    Case(TracedClassifier, lambda: dict(encoder=_encoder(), traced_attention=[0, 1],
                                        projection_width=16, num_classes=3,
                                        dropout_rate=0.2, head_initializer="normal"),
         lambda seq, real: (encoder_features(seq, real),), sequence_axis=None,
         float32_outputs=True),
    Case(TracedTokenClassifier, lambda: dict(encoder=_encoder(), traced_attention=[1],
                                             projection_width=24, num_classes=5,
                                             dropout_rate=0.3, head_initializer="normal"),
         lambda seq, real: (encoder_features(seq, real),), float32_outputs=True),
    Case(TracedSpanLabeler, lambda: dict(encoder=_encoder(), traced_attention=[0],
                                         projection_width=8, head_initializer="normal"),
         lambda seq, real: (encoder_features(seq, real),), float32_outputs=True),
]
IDS = [case.id for case in CASES]


def public_layer_classes():
    """Every public keras Layer (Model included) class defined in a module of
    bert_tf.layers, bert_tf.models or a task folder (a task's own head model)."""
    found = set()
    for package in (bert_tf.layers, bert_tf.models, bert_tf.tasks):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            module = importlib.import_module(info.name)
            for name, value in vars(module).items():
                if (inspect.isclass(value) and issubclass(value, keras.layers.Layer)
                        and value.__module__ == module.__name__
                        and not name.startswith("_")):
                    found.add(value)
    return found


def test_every_class_has_a_case():
    classes = public_layer_classes()
    covered = {case.cls for case in CASES}
    missing = classes - covered - set(ABSTRACT)
    assert not missing, (f"classes without a contract Case in tests/test_contract.py: "
                         f"{sorted(c.__name__ for c in missing)}")
    assert covered | set(ABSTRACT) <= classes, "a case or exemption names a stale class"
    for base in ABSTRACT:
        assert any(issubclass(cls, base) for cls in covered), base


def test_cases_pass_every_argument_off_its_default():
    # So that a get_config / from_config that drops an argument (and falls back to its
    # default) shows in check_config: some case of each class passes another value.
    for cls in {case.cls for case in CASES}:
        params = contract.constructor_parameters(cls)
        for name, param in params.items():
            if name in contract.BASE_CONFIG_KEYS or param.default is param.empty:
                continue
            assert any(case.kwargs()[name] != param.default
                       for case in CASES if case.cls is cls), (
                f"no case of {cls.__name__} passes `{name}` other than its default")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_config(case):
    contract.check_config(case)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_registration(case):
    contract.check_registration(case)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_keras_file_round_trip(case, tmp_path):
    contract.check_keras_file(case, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_saved_model_round_trip(case, tmp_path):
    contract.check_saved_model(case, tmp_path)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_variable_length(case):
    contract.check_variable_length(case)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_mixed_bfloat16(case):
    contract.check_mixed_precision(case, "mixed_bfloat16")


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_mixed_float16(case):
    contract.check_mixed_precision(case, "mixed_float16")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_names(case):
    contract.check_names(case)
