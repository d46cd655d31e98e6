"""Hugging Face BERT: `config.json` fields and weight names in google-research terms.

Hugging Face names are translated to the google-research names
(`bert.encoder.layer.3.attention.self.query.weight` →
`bert/encoder/layer_3/attention/self/query/kernel`, transposed) so that one table
(`checkpoints.google_variable_map`) matches every format. Both directions live here:

    hf_config_to_bert_dict(hf_config) -> bert_config.json fields   (loading)
    hf_to_google_name(hf_name, head_names) -> (google_name, transpose, skip)   (loading)
    bert_dict_to_hf_config(bert_dict) -> config.json fields        (exporting)
    google_to_hf_name(google_name, base_prefix, head_names) -> (hf_name, transpose)

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
_HF_HEAD_NAMES = {hf: google for google, hf in _HEAD_NAMES.items()}
_HF_LAYER = re.compile(r"^encoder\.layer\.(\d+)\.(.*)$")
_GOOGLE_LAYER = re.compile(r"^encoder/layer_(\d+)/")
# Tied copies of other weights, and buffers: not model variables.
_HF_SKIPPED = ("cls.predictions.decoder.weight", "cls.predictions.decoder.bias",
               "embeddings.position_ids")
_HF_EMBEDDINGS = ("word_embeddings", "token_type_embeddings", "position_embeddings")


def hf_config_to_bert_dict(hf_config, source="config.json"):
    """Maps a Hugging Face BERT `config.json` dict to `bert_config.json` fields.

    Raises:
        ValueError: for a config this BERT cannot compute (another `model_type`, relative
            position embeddings, an unknown activation) instead of ignoring the key.
    """
    model_type = hf_config.get("model_type", "bert")
    if model_type != "bert":
        raise ValueError(f"{source}: model_type {model_type!r} is not a BERT (expected "
                         "\"bert\"); its weights would not load into this encoder.")
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
    return fields


def hf_to_google_name(hf_name, head_names=None):
    """Translates a Hugging Face BERT weight name to the google-research name.

    Args:
        hf_name: A weight name of a transformers BERT folder.
        head_names: google-research name -> Hugging Face name of a model's own head
            weights (its class's `hf_head_names`), beside transformers' heads.

    Returns:
        (google_name or None, transpose, skip): `transpose` when HF stores a torch
        Linear weight [out, in]; `skip` for tied copies and buffers.
    """
    name = hf_name[len("bert."):] if hf_name.startswith("bert.") else hf_name
    if name in _HF_SKIPPED or hf_name in _HF_SKIPPED:
        return None, False, True
    own = {hf: google for google, hf in (head_names or {}).items()}
    if hf_name in own or hf_name in _HF_HEAD_NAMES:
        return own.get(hf_name) or _HF_HEAD_NAMES[hf_name], False, False
    if hf_name.startswith("cls.predictions.transform."):
        scope, rest = "cls/predictions/transform", hf_name[len("cls.predictions.transform."):]
    elif name.startswith(("embeddings.", "encoder.", "pooler.")):
        scope, rest = "bert", name
    else:
        return None, False, False
    layer = _HF_LAYER.match(rest)
    if layer:
        rest = f"encoder/layer_{layer.group(1)}.{layer.group(2)}"
    parts = rest.split(".")
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


def bert_dict_to_hf_config(bert_dict):
    """Maps `bert_config.json` fields to a Hugging Face BERT `config.json` dict (the
    inverse of `hf_config_to_bert_dict`; architectures and labels are the caller's)."""
    config = dict(bert_dict)
    config["hidden_act"] = _BERT_TO_HF_ACTIVATIONS[bert_dict["hidden_act"]]
    config.update(model_type="bert", layer_norm_eps=LAYER_NORM_EPSILON,
                  position_embedding_type="absolute")
    return config


def google_to_hf_name(google_name, base_prefix="bert.", head_names=None):
    """Translates a google-research weight name to the Hugging Face name (the inverse of
    `hf_to_google_name`).

    Args:
        google_name: A name of `checkpoints.google_variable_map`.
        base_prefix: What precedes the encoder's names: "bert." in the models with a
            head (BertForPreTraining, BertForSequenceClassification, ...), "" in a bare
            BertModel.
        head_names: A model's own head names (see `hf_to_google_name`).

    Returns:
        (hf_name, transpose): `transpose` when Hugging Face stores the value as a torch
        Linear weight [out, in] and the google-research layout is [in, out].
    Raises:
        ValueError: for a name Hugging Face BERT has no place for.
    """
    heads = {**_HEAD_NAMES, **(head_names or {})}
    if google_name in heads:
        return heads[google_name], False
    if google_name.startswith("bert/"):
        scope, rest = base_prefix, google_name[len("bert/"):]
    elif google_name.startswith("cls/predictions/transform/"):
        scope, rest = "cls.predictions.transform.", google_name[len("cls/predictions/"
                                                                    "transform/"):]
    else:
        raise ValueError(f"weight {google_name!r} has no Hugging Face BERT name (expected "
                         "an encoder, pre-training, classifier or question-answering "
                         "weight)")
    rest = _GOOGLE_LAYER.sub(r"encoder/layer/\1/", rest)
    parts = rest.split("/")
    if parts[-1] in _HF_EMBEDDINGS:
        return f"{scope}{'.'.join(parts)}.weight", False
    leaf = {"gamma": "weight", "beta": "bias", "kernel": "weight"}.get(parts[-1], parts[-1])
    return f"{scope}{'.'.join(parts[:-1] + [leaf])}", parts[-1] == "kernel"


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
