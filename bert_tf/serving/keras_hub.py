"""keras-hub presets: a folder that `keras_hub.models.BertBackbone.from_preset` and
`keras_hub.models.BertTextClassifier.from_preset` load.

    path = keras_hub.export_keras_hub(model, preprocessor, export_dir, overwrite=False)

Needs the `keras-hub` extra (`pip install bert_tf[keras-hub]`). keras-hub writes the
preset itself (`save_to_preset`): `config.json` + `model.weights.h5` (the backbone),
`metadata.json`, `tokenizer.json` + `assets/tokenizer/vocabulary.txt`,
`preprocessor.json` (a BertTextClassifierPreprocessor of `max_seq_length`), and for a
classifier `task.json` + `task.weights.h5` (its head).

| bert_tf model | keras-hub preset |
| --- | --- |
| BertEncoder | BertBackbone (any BERT task of keras-hub starts from it) |
| BertClassifier | BertTextClassifier (also regression, one logit, and multi-label) |
| BertEncoder with `embedding_size` (ELECTRA-Small) | ElectraBackbone + ElectraTokenizer |

keras-hub has no BERT task for token classification or question answering, and its
BertMaskedLM differs from the pre-training heads (no next-sentence head, LayerNorm
epsilon 1e-5): those models are refused, each model type saying why
(`bert_tf.serving.registry`). keras-hub's BertBackbone computes the tanh
approximation of GELU in every layer: a `gelu_tanh` model exports exactly; a `gelu`
model (exact GELU, as the released BERTs) exports with a warning that gives the largest
difference the approximation makes on a probe batch; `relu` and `swish` are refused.
"""

import re

import numpy as np
from absl import logging

from bert_tf import extras
from bert_tf.models import encoder_of
from bert_tf.serving import catalog, export, formats, output_folder, registry
from bert_tf.weights import checkpoints

# What keras-hub's BERT presets hold: a backbone (a model without heads) or a
# BertTextClassifier (a model with a classification head: `num_classes`, `dropout_rate`).
PRESETS = "keras-hub's BERT presets hold a BertBackbone or a BertTextClassifier"
# Activations keras-hub's BertBackbone computes (it has the tanh GELU in every layer):
# hidden_act -> whether the preset computes exactly what the model does.
_EXACT = {"gelu_tanh": True, "gelu": False}
# Largest output difference for an exact activation: more means a wrong weight.
_EXACT_TOLERANCE = 1e-4
# google-research names -> keras-hub variable paths: embedding tables, then modules.
_TABLE_PATHS = {"bert/embeddings/word_embeddings": "token_embedding/embeddings",
                "bert/embeddings/position_embeddings": "position_embedding/embeddings",
                "bert/embeddings/token_type_embeddings": "segment_embedding/embeddings",
                "output_weights": "logits/kernel", "output_bias": "logits/bias"}
_MODULE_PATHS = {"bert/embeddings/LayerNorm": "embeddings_layer_norm",
                 "bert/embeddings_project": "embeddings_projection",  # ElectraBackbone
                 "bert/pooler/dense": "pooled_dense"}
_LAYER = re.compile(r"^bert/encoder/layer_(\d+)/(.+)$")
_LAYER_PATHS = {"attention/self/query": "self_attention_layer/query",
                "attention/self/key": "self_attention_layer/key",
                "attention/self/value": "self_attention_layer/value",
                "attention/output/dense": "self_attention_layer/attention_output",
                "attention/output/LayerNorm": "self_attention_layer_norm",
                "intermediate/dense": "feedforward_intermediate_dense",
                "output/dense": "feedforward_output_dense",
                "output/LayerNorm": "feedforward_layer_norm"}


def import_keras_hub():
    """The keras_hub module.

    Raises:
        ImportError: naming the extra to install when keras-hub is missing.
    """
    return extras.require("keras_hub", "--export_format=keras_hub")


def check_model_class(model_cls):
    """Raises ValueError, with the reason, for a model class keras-hub cannot hold."""
    reason = registry.refusal(model_cls, "keras_hub")
    if reason is None:
        return
    others = registry.other_formats(model_cls, "keras_hub")
    raise ValueError(f"a {model_cls.__name__} cannot be exported as a keras-hub preset: "
                     f"{reason or PRESETS}. Export it with export_format={others}")


def check_embeddings(model):
    """Raises ValueError for narrow embeddings (`embedding_size`) under a head: keras-hub
    projects them in its ElectraBackbone only, and has no ELECTRA text classifier."""
    if model.config.embedding_size is not None and encoder_of(model) is not model:
        raise ValueError(f"a {type(model).__name__} with embedding_size="
                         f"{model.config.embedding_size} (narrower than hidden_size="
                         f"{model.config.hidden_size}) cannot be a keras-hub preset: keras-hub "
                         "projects narrow embeddings in its ElectraBackbone only, and has no "
                         "ELECTRA text classifier; export the encoder (--model_type=encoder), "
                         "or this model with export_format=saved_model or litert")


def check_activation(config):
    """Raises ValueError for a `hidden_act` keras-hub's BertBackbone does not compute."""
    if config.hidden_act not in _EXACT:
        raise ValueError(f"hidden_act {config.hidden_act!r} cannot be exported as a "
                         "keras-hub preset: keras-hub's BertBackbone computes GELU (tanh "
                         "approximation) in every layer, so the preset would compute "
                         "another model; export with export_format=huggingface or "
                         "saved_model")


def keras_hub_path(google_name):
    """The keras-hub variable path (BertBackbone / BertTextClassifier) of a
    google-research weight name."""
    if google_name in _TABLE_PATHS:
        return _TABLE_PATHS[google_name]
    module, leaf = google_name.rsplit("/", 1)  # leaf: kernel, bias, gamma or beta
    if module in _MODULE_PATHS:
        return f"{_MODULE_PATHS[module]}/{leaf}"
    layer = _LAYER.match(module)
    if not layer or layer.group(2) not in _LAYER_PATHS:
        raise ValueError(f"weight {google_name!r} has no keras-hub BertBackbone variable")
    return f"transformer_layer_{layer.group(1)}/{_LAYER_PATHS[layer.group(2)]}/{leaf}"


def _keras_hub_model(keras_hub, model, preprocessor):
    """(the keras-hub backbone or classifier of `model`'s shape, its preprocessor or, for
    an ElectraBackbone, its tokenizer)."""
    config = model.config
    vocab_file, do_lower_case = preprocessor.vocab_file, preprocessor.do_lower_case
    sizes = dict(num_layers=config.num_hidden_layers, num_heads=config.num_attention_heads,
                 hidden_dim=config.hidden_size, intermediate_dim=config.intermediate_size,
                 dropout=config.hidden_dropout_prob,
                 max_sequence_length=config.max_position_embeddings,
                 num_segments=config.type_vocab_size, dtype="float32")
    if config.embedding_size is not None:  # an encoder (check_embeddings)
        tokenizer = keras_hub.models.ElectraTokenizer(
            vocabulary=vocab_file, lowercase=do_lower_case, strip_accents=do_lower_case)
        return keras_hub.models.ElectraBackbone(
            vocab_size=config.vocab_size, embedding_dim=config.embedding_size,
            **sizes), tokenizer
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocab_file, lowercase=do_lower_case,
                                               strip_accents=do_lower_case)
    hub_preprocessor = keras_hub.models.BertTextClassifierPreprocessor(
        tokenizer, sequence_length=preprocessor.max_seq_length)
    backbone = keras_hub.models.BertBackbone(vocabulary_size=config.vocab_size, **sizes)
    if encoder_of(model) is not model:  # a classifier
        return keras_hub.models.BertTextClassifier(
            backbone, model.num_classes, preprocessor=hub_preprocessor,
            dropout=model.dropout_rate, dtype="float32"), hub_preprocessor
    return backbone, hub_preprocessor


def copy_weights(model, target):
    """Assigns every weight of `model` to the keras-hub model `target` (same shape).

    Raises:
        ValueError: naming the weights that found no place, or no value (a bug).
    """
    targets = {variable.path: variable for variable in target.weights}
    assigned = set()
    for name, (variable, _) in checkpoints.google_variable_map(model).items():
        path = keras_hub_path(name)
        if path not in targets:
            raise ValueError(f"weight {name}: the keras-hub model has no variable {path}")
        value = np.asarray(variable.numpy(), np.float32)  # the Keras layout
        targets[path].assign(np.reshape(value, targets[path].shape))  # [H, N, D] heads
        assigned.add(path)
    missing = sorted(set(targets) - assigned)
    if missing:
        raise ValueError(f"keras-hub variables without a value: {missing}")


def _probe_inputs(config, length):
    """A fixed batch of 2: ids spread over the vocab, the second row half padding."""
    ids = (np.arange(2 * length).reshape(2, length) * 7 + 1) % config.vocab_size  # [2, L]
    mask = np.ones_like(ids)
    mask[1, length // 2:] = 0
    segments = np.zeros_like(ids)
    segments[:, length // 2:] = 1 if config.type_vocab_size > 1 else 0
    return ids.astype(np.int32), mask.astype(np.int32), segments.astype(np.int32)


def output_difference(model, target, max_seq_length):
    """The largest absolute difference of the outputs of `model` and the keras-hub
    `target` on a probe batch (pooled and unpadded sequence output, or logits)."""
    ids, mask, segments = _probe_inputs(model.config, min(max_seq_length, 16))
    ours = model({"input_ids": ids, "input_mask": mask, "segment_ids": segments},
                 training=False)
    theirs = target({"token_ids": ids, "padding_mask": mask, "segment_ids": segments},
                    training=False)
    if encoder_of(model) is not model:  # a classifier's logits
        return float(np.max(np.abs(np.asarray(ours["logits"]) - np.asarray(theirs))))
    pooled = np.abs(np.asarray(ours["pooled_output"]) - np.asarray(theirs["pooled_output"]))
    sequence = np.abs(np.asarray(ours["sequence_output"]) -
                      np.asarray(theirs["sequence_output"]))[mask.astype(bool)]  # [N, H]
    return float(max(pooled.max(), sequence.max()))


def export_keras_hub(model, preprocessor, export_dir, overwrite=False):
    """Writes `model` as a keras-hub preset folder (see the module docstring).

    Args:
        model: A built BertEncoder or BertClassifier.
        preprocessor: The `Preprocessor` the model was trained with (vocab, case, and
            the keras-hub preprocessor's sequence length).
        export_dir: The folder to write: missing or empty, or replaced with `overwrite`.
        overwrite: Replace what `export_dir` holds.

    Returns:
        The folder written.
    Raises:
        ValueError / FileNotFoundError / FileExistsError: naming the model type,
            activation, vocab or folder at fault, before anything is written.
        ImportError: keras-hub is not installed (naming the extra).
    """
    check_model_class(type(model))
    check_embeddings(model)
    check_activation(model.config)
    keras_hub = import_keras_hub()
    export.check_model_and_vocab(model, type(model), preprocessor)
    target = output_folder.check_output_folder(export_dir, overwrite)
    preset_model, hub_preprocessor = _keras_hub_model(keras_hub, model, preprocessor)
    copy_weights(model, preset_model)
    difference = output_difference(model, preset_model, preprocessor.max_seq_length)
    if _EXACT[model.config.hidden_act] and difference > _EXACT_TOLERANCE:
        raise ValueError(f"the keras-hub model's outputs differ from the model's by "
                         f"{difference:.2e} (expected below {_EXACT_TOLERANCE}); please "
                         "report this")
    if not _EXACT[model.config.hidden_act]:
        logging.warning("keras-hub's BertBackbone computes the tanh approximation of GELU; "
                        "this model (hidden_act=gelu) was trained with the exact GELU: the "
                        "preset's outputs differ by up to %.2e on a probe batch",
                        difference)

    def write(folder):
        preset_model.save_to_preset(folder)  # a classifier's holds its preprocessor
        if encoder_of(model) is model:  # a backbone's preset has none of its own (an
            # ElectraBackbone's gets its tokenizer)
            hub_preprocessor.save_to_preset(folder)

    output_folder.write_folder(target, write)
    logging.info("Exported %s as a keras-hub %s preset to %s", type(model).__name__,
                 type(preset_model).__name__, target)
    return target


def _check(model_cls, request):
    del request
    check_model_class(model_cls)
    import_keras_hub()


formats.register(formats.ExportFormat(
    "keras_hub", catalog.EXPORT_FORMATS["keras_hub"], check=_check,
    write=lambda model, preprocessor, export_dir, request: export_keras_hub(
        model, preprocessor, export_dir, overwrite=request.overwrite)))
