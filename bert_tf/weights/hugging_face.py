"""Hugging Face BERT and ELECTRA: `config.json` fields and weight names in
google-research terms.

Hugging Face names are translated to the google-research names
(`bert.encoder.layer.3.attention.self.query.weight` →
`bert/encoder/layer_3/attention/self/query/kernel`, transposed) so that one table
(`checkpoints.google_variable_map`) matches every format. Both directions live here:

    hf_config_to_bert_dict(hf_config) -> bert_config.json fields   (loading)
    hf_to_google_name(hf_name, head_names) -> (google_name, transpose, skip)   (loading)
    bert_dict_to_hf_config(bert_dict, electra=False) -> config.json fields   (exporting)
    google_to_hf_name(google_name, base_prefix, head_names, electra=False)
        -> (hf_name, transpose)

transformers' Electra classes (`model_type` "electra") are BERT encoders with an
optional projection of narrower embeddings (`embeddings_project`, this package's
`embedding_size`) and no pooler, under `electra.` instead of `bert.`; their heads:
`discriminator_predictions.dense` / `.dense_prediction` (google-research/electra's
`discriminator_predictions/dense` / `dense_1`), and ElectraForMaskedLM's
`generator_predictions.dense` / `.LayerNorm` and `generator_lm_head.bias`, which are a
masked-LM head: they translate to BERT's `cls/predictions/transform/*` and
`cls/predictions/output_bias`, so that an ElectraForMaskedLM folder loads into a
`BertPretrainer` (ELECTRA's generator is one).

A head that is a BERT model of its own (ELECTRA's generator) is a folder of its own,
a subfolder named after the head (`hf_parts`): the export writes it there and the
loader reads it from there.

The heads of transformers' BERT classes are named as transformers names them:
`classifier.*` (BertForSequenceClassification / BertForTokenClassification;
google-research `output_weights`, `output_bias`), `qa_outputs.*`
(BertForQuestionAnswering; `cls/squad/*`) and `cls.*` (BertForPreTraining). A head of
another model type gives its own names: `head_names`, its class's `hf_head_names`
(google-research name -> Hugging Face name, the same [out, in] layout).
"""

import re

import tensorflow as tf
from safetensors import safe_open

from bert_tf.configs import BertConfig
from bert_tf.layers.embeddings import LAYER_NORM_EPSILON
from bert_tf.models import EncoderHeadModel

# Hugging Face `hidden_act` values and their bert_config.json names.
_HF_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
                   "gelu_fast": "gelu_tanh", "relu": "relu", "silu": "swish",
                   "swish": "swish"}
# bert_config.json `hidden_act` -> the Hugging Face name of the same function.
_BERT_TO_HF_ACTIVATIONS = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu",
                           "swish": "silu"}
# The heads of transformers' BERT classes: google-research name -> Hugging Face name
# (the same [out, in] layout). A model type with another head names it on its class.
_HEAD_NAMES = {"cls/predictions/output_bias": "cls.predictions.bias",
               "cls/seq_relationship/output_weights": "cls.seq_relationship.weight",
               "cls/seq_relationship/output_bias": "cls.seq_relationship.bias",
               "output_weights": "classifier.weight", "output_bias": "classifier.bias",
               "cls/squad/output_weights": "qa_outputs.weight",
               "cls/squad/output_bias": "qa_outputs.bias"}
# ELECTRA's: the masked-LM output bias of ElectraForMaskedLM (its decoder is tied).
_ELECTRA_HEAD_NAMES = {"cls/predictions/output_bias": "generator_lm_head.bias"}
_HF_HEAD_NAMES = {hf: google for names in (_HEAD_NAMES, _ELECTRA_HEAD_NAMES)
                  for google, hf in names.items()}
# google-research scopes of the heads -> the Hugging Face module prefixes.
_BERT_SCOPES = {"cls/predictions/transform/": "cls.predictions.transform."}
_ELECTRA_SCOPES = {"cls/predictions/transform/": "generator_predictions.",
                   "discriminator_predictions/": "discriminator_predictions."}
_HF_SCOPES = {hf: google for scopes in (_BERT_SCOPES, _ELECTRA_SCOPES)
              for google, hf in scopes.items()}
# google-research/electra's module names that transformers spells otherwise.
_ELECTRA_MODULES = {"dense_1": "dense_prediction"}
_HF_MODULES = {hf: google for google, hf in _ELECTRA_MODULES.items()}
# The `model_type`s of config.json this encoder computes, and the prefix of their
# encoders' weights in the classes with a head.
ELECTRA_MODEL_TYPE = "electra"  # transformers' model_type, not a --model_type
BERT_MODEL_TYPES = {"bert": "bert.", ELECTRA_MODEL_TYPE: "electra."}
# ElectraConfig's defaults: transformers leaves a default value out of config.json.
_ELECTRA_DEFAULTS = {"vocab_size": 30522, "embedding_size": 128, "hidden_size": 256,
                     "num_hidden_layers": 12, "num_attention_heads": 4,
                     "intermediate_size": 1024, "hidden_act": "gelu",
                     "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
                     "max_position_embeddings": 512, "type_vocab_size": 2,
                     "initializer_range": 0.02}
_HF_LAYER = re.compile(r"^encoder\.layer\.(\d+)\.(.*)$")
_GOOGLE_LAYER = re.compile(r"^encoder/layer_(\d+)/")
# Tied copies of other weights, and buffers: not model variables.
_HF_SKIPPED = ("cls.predictions.decoder.weight", "cls.predictions.decoder.bias",
               "generator_lm_head.weight", "embeddings.position_ids",
               "embeddings.token_type_ids")
_HF_EMBEDDINGS = ("word_embeddings", "token_type_embeddings", "position_embeddings")


def hf_config_to_bert_dict(hf_config, source="config.json"):
    """Maps a Hugging Face BERT or ELECTRA `config.json` dict to `bert_config.json`
    fields (an ELECTRA's `embedding_size` too; ElectraConfig's defaults where the file
    leaves a field out, as transformers writes it).

    Raises:
        ValueError: for a config this BERT cannot compute (another `model_type`, relative
            position embeddings, an unknown activation) instead of ignoring the key.
    """
    model_type = hf_config.get("model_type", "bert")
    if model_type not in BERT_MODEL_TYPES:
        raise ValueError(f"{source}: model_type {model_type!r} is not a BERT (expected "
                         f"one of {', '.join(map(repr, BERT_MODEL_TYPES))}); its weights "
                         "would not load into this encoder.")
    electra = model_type == ELECTRA_MODEL_TYPE
    if electra:
        hf_config = {**_ELECTRA_DEFAULTS, **hf_config}
    positions = hf_config.get("position_embedding_type", "absolute")
    if positions != "absolute":
        raise ValueError(f"{source}: position_embedding_type {positions!r} is not "
                         "supported (expected \"absolute\"); this encoder has no relative "
                         "position weights, so the model would compute something else.")
    act = hf_config.get("hidden_act", "gelu")
    if act not in _HF_ACTIVATIONS:
        raise ValueError(f"{source}: unsupported hidden_act {act!r}; expected one of "
                         f"{sorted(_HF_ACTIVATIONS)}.")
    fields = {name: hf_config[name] for name in BertConfig.field_names() if name in hf_config}
    fields["hidden_act"] = _HF_ACTIVATIONS[act]
    if not electra:
        fields.pop("embedding_size", None)  # not a field of transformers' BERT
    return fields


def hf_to_google_name(hf_name, head_names=None):
    """Translates a Hugging Face BERT weight name to the google-research name.

    Args:
        hf_name: A weight name of a transformers BERT or ELECTRA folder.
        head_names: google-research name -> Hugging Face name of a model's own head
            weights (its class's `hf_head_names`), beside transformers' heads.

    Returns:
        (google_name or None, transpose, skip): `transpose` when HF stores a torch
        Linear weight [out, in]; `skip` for tied copies and buffers.
    """
    name = _without_model_prefix(hf_name)
    if name in _HF_SKIPPED or hf_name in _HF_SKIPPED:
        return None, False, True
    own = {hf: google for google, hf in (head_names or {}).items()}
    if hf_name in own or hf_name in _HF_HEAD_NAMES:
        return own.get(hf_name) or _HF_HEAD_NAMES[hf_name], False, False
    scope = next((prefix for prefix in _HF_SCOPES if hf_name.startswith(prefix)), None)
    if scope is not None:
        scope, rest = _HF_SCOPES[scope].rstrip("/"), hf_name[len(scope):]
    elif name.startswith(("embeddings.", "embeddings_project.", "encoder.", "pooler.")):
        scope, rest = "bert", name
    else:
        return None, False, False
    layer = _HF_LAYER.match(rest)
    if layer:
        rest = f"encoder/layer_{layer.group(1)}.{layer.group(2)}"
    parts = rest.split(".")
    parts[:-1] = [_HF_MODULES.get(part, part) for part in parts[:-1]]
    module, leaf = "/".join(parts[:-1]), parts[-1]
    if parts[-2] in _HF_EMBEDDINGS and leaf == "weight":
        return f"{scope}/{module}", False, False
    if parts[-2] == "LayerNorm":
        leaf = {"weight": "gamma", "bias": "beta"}.get(leaf, leaf)
        return f"{scope}/{module}/{leaf}", False, False
    if leaf == "weight":
        return f"{scope}/{module}/kernel", True, False
    if leaf == "bias":
        return f"{scope}/{module}/bias", False, False
    return None, False, False


def _without_model_prefix(hf_name):
    """`hf_name` without its encoder's prefix (`bert.`, `electra.`)."""
    for prefix in BERT_MODEL_TYPES.values():
        if hf_name.startswith(prefix):
            return hf_name[len(prefix):]
    return hf_name


def bert_dict_to_hf_config(bert_dict, electra=False):
    """Maps `bert_config.json` fields to a Hugging Face BERT `config.json` dict (the
    inverse of `hf_config_to_bert_dict`; architectures and labels are the caller's).

    Args:
        bert_dict: `BertConfig.to_dict()`.
        electra: An ELECTRA config (`model_type` "electra"): `embedding_size` is always
            written (ElectraConfig's default, 128, is no plain BERT's).
    """
    config = dict(bert_dict)
    config["hidden_act"] = _BERT_TO_HF_ACTIVATIONS[bert_dict["hidden_act"]]
    config.update(model_type=ELECTRA_MODEL_TYPE if electra else "bert",
                  layer_norm_eps=LAYER_NORM_EPSILON, position_embedding_type="absolute")
    if electra:
        config["embedding_size"] = (bert_dict.get("embedding_size")
                                    or bert_dict["hidden_size"])
    elif "embedding_size" in config:
        raise ValueError(f"embedding_size={config['embedding_size']} (hidden_size "
                         f"{config['hidden_size']}): transformers' BERT has no embedding "
                         "projection; this config is an ELECTRA's (electra=True)")
    return config


def google_to_hf_name(google_name, base_prefix="bert.", head_names=None, electra=False):
    """Translates a google-research weight name to the Hugging Face name (the inverse of
    `hf_to_google_name`).

    Args:
        google_name: A name of `checkpoints.google_variable_map`.
        base_prefix: What precedes the encoder's names: "bert." ("electra.") in the
            models with a head (BertForPreTraining, BertForSequenceClassification, ...),
            "" in a bare BertModel (ElectraModel).
        head_names: A model's own head names (see `hf_to_google_name`).
        electra: Name the heads as transformers' Electra classes do (the masked-LM head
            `generator_predictions.*`, `generator_lm_head.bias`; the discriminator's
            `discriminator_predictions.dense` and `.dense_prediction`).

    Returns:
        (hf_name, transpose): `transpose` when Hugging Face stores the value as a torch
        Linear weight [out, in] and the google-research layout is [in, out].
    Raises:
        ValueError: for a name Hugging Face BERT has no place for.
    """
    heads = {**_HEAD_NAMES, **(_ELECTRA_HEAD_NAMES if electra else {}),
             **(head_names or {})}
    if google_name in heads:
        return heads[google_name], False
    scopes = {"bert/": base_prefix, **(_ELECTRA_SCOPES if electra else _BERT_SCOPES)}
    scope = next((prefix for prefix in scopes if google_name.startswith(prefix)), None)
    if scope is None:
        raise ValueError(f"weight {google_name!r} has no Hugging Face "
                         f"{'ELECTRA' if electra else 'BERT'} name (expected an encoder, "
                         "pre-training, classifier or question-answering weight)")
    scope, rest = scopes[scope], google_name[len(scope):]
    rest = _GOOGLE_LAYER.sub(r"encoder/layer/\1/", rest)
    parts = rest.split("/")
    if electra:
        parts[:-1] = [_ELECTRA_MODULES.get(part, part) for part in parts[:-1]]
    if parts[-1] in _HF_EMBEDDINGS:
        return f"{scope}{'.'.join(parts)}.weight", False
    leaf = {"gamma": "weight", "beta": "bias", "kernel": "weight"}.get(parts[-1], parts[-1])
    return f"{scope}{'.'.join(parts[:-1] + [leaf])}", parts[-1] == "kernel"


def hf_parts(model):
    """{subfolder: head} of the heads of `model` that are BERT models of their own
    (ELECTRA's generator, a `BertPretrainer` named "generator"): each is a transformers
    folder of its own, in that subfolder of the model's."""
    if not isinstance(model, EncoderHeadModel):
        return {}
    return {head.name: head for head in model.heads() if isinstance(head, EncoderHeadModel)}


def read_safetensors(path):
    """Returns dict name -> numpy array (bfloat16 weights are widened to float32)."""
    tensors = {}
    with safe_open(path, framework="tf") as handle:
        for name in handle.keys():
            value = handle.get_tensor(name)
            if value.dtype in (tf.bfloat16, tf.float16):
                value = tf.cast(value, tf.float32)
            tensors[name] = value.numpy()
    return tensors
