"""LiteRT (TensorFlow Lite) models for phones: token ids in, the model's outputs out.

    path = litert.export_litert(model, preprocessor, export_dir, label_names=None,
                                quantize=None, problem_type=None,
                                max_query_length=None, overwrite=False)

The tokenizer's tensorflow-text ops are not LiteRT ops, so the app tokenizes and the
model takes int32 `input_ids`, `input_mask`, `segment_ids` [1, max_seq_length] (one
row, laid out as the fine-tuning features: `[CLS] a [SEP] (b [SEP])`, padded with 0).
The folder holds:

- `model.tflite`: one signature, `serving_default`, converted with
  `tf.lite.TFLiteConverter` from the concrete function of that ids signature (builtin
  LiteRT ops only); its float32 outputs are those of the SavedModel's `serve_ids`:
  `logits` [1, C] (classifier; one column for regression), `logits` [1, S, C] (token
  classifier), `start_logits` / `end_logits` [1, S] (span labeler), `pooled_output` /
  `sequence_output` (encoder). `quantize="int8"`: dynamic-range quantization (int8
  weights, float32 inputs and outputs; `tf.lite.Optimize.DEFAULT` without a
  representative dataset), about a quarter of the size;
- `vocab.txt` and `litert_config.json` (`CONFIG_FILE`): what an app needs to tokenize
  and read the outputs: `do_lower_case`, `max_seq_length`, the input and output
  names, the special tokens' ids, the layout, the label names and problem type.

Each model type says whether it has a LiteRT export, with the layout of its row, or why
not (`bert_tf.serving.registry`: a multiple-choice model's rows are [B, C, S], laid out
from the choices in its raw-text signature). A classifier that cuts long texts into
windows (`doc_stride`: the windows are cut from raw text in the graph) is refused too.
"""

import json
import os
import shutil

import tensorflow as tf
from absl import logging

from bert_tf.models.encoder import INPUT_NAMES
from bert_tf.serving import catalog, export, formats
from bert_tf.serving import huggingface, output_folder, registry
from bert_tf.text.vocab import SPECIAL_TOKENS

MODEL_FILE, CONFIG_FILE, VOCAB_FILE = "model.tflite", "litert_config.json", "vocab.txt"
QUANTIZATIONS = catalog.QUANTIZATIONS  # ("none", "int8")
def check_ids_model_class(model_cls, export_format, runtime, doc_stride=None):
    """Raises ValueError, with the reason, for a model that a file of token ids in
    (`export_format`: litert, onnx; `runtime`: "LiteRT", "ONNX") cannot hold: a refused
    model type, or a classifier of long documents (`doc_stride`)."""
    title = f"{'an' if runtime[0] in 'AEIOU' else 'a'} {runtime} model"
    reason = registry.refusal(model_cls, export_format)
    if reason is not None:
        takes = ", ".join(cls.__name__ for cls in registry.classes_for(export_format))
        raise ValueError(f"a {model_cls.__name__} cannot be exported as {title}: "
                         f"{reason or runtime + ' exports hold a ' + takes}")
    if doc_stride is not None:
        raise ValueError(f"a classifier of long documents (doc_stride) cannot be exported "
                         f"as {title}: its windows are cut from the raw text inside "
                         f"the graph (tensorflow-text ops), and {title} takes token ids. "
                         "Export it without doc_stride (one window of "
                         "max_seq_length ids; the app cuts the windows and pools their "
                         "logits) or with export_format=saved_model")


def check_model_class(model_cls, doc_stride=None):
    """`check_ids_model_class` for a .tflite."""
    check_ids_model_class(model_cls, "litert", "LiteRT", doc_stride)


def check_quantize(quantize):
    """Raises ValueError for a quantization other than QUANTIZATIONS (None: "none")."""
    if (quantize or "none") not in QUANTIZATIONS:
        raise ValueError(f"quantize must be one of {', '.join(QUANTIZATIONS)}, got "
                         f"{quantize!r}")


def ids_function(module, max_seq_length):
    """The concrete function the .tflite is converted from: int32 inputs [1, S] -> the
    float32 outputs of `module.logits` (an `export.ServingModule`)."""
    spec = {name: tf.TensorSpec([1, max_seq_length], tf.int32, name) for name in INPUT_NAMES}

    @tf.function(autograph=False, input_signature=[spec])
    def serve_ids(features):  # one fixed row: no trimming, no in-graph checks
        return module.logits(features, trim=False, check_ids=False)

    return serve_ids.get_concrete_function()


def convert(model, preprocessor, quantize=None):
    """The .tflite flatbuffer (bytes) of `model` (see the module docstring)."""
    check_quantize(quantize)
    module = export.ServingModule(model, preprocessor)
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [ids_function(module, preprocessor.max_seq_length)], module)
    if quantize == "int8":  # dynamic range: int8 weights, float activations
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    return converter.convert()


def litert_config(model, preprocessor, label_names=None, quantize=None, problem_type=None,
                  max_query_length=None):
    """The `litert_config.json` of `model` as a dict (see `export_litert` for the args)."""
    vocab, do_lower_case = preprocessor.vocab.tokens, preprocessor.do_lower_case
    max_seq_length = preprocessor.max_seq_length
    entry = registry.for_model(model)
    config = {"model_file": MODEL_FILE, "vocab_file": VOCAB_FILE,
              "model_type": type(model).__name__, "quantize": quantize or "none",
              "do_lower_case": bool(do_lower_case), "strip_accents": bool(do_lower_case),
              "max_seq_length": max_seq_length, "input_names": list(INPUT_NAMES),
              "input_shape": [1, max_seq_length], "input_dtype": "int32",
              "output_names": list(entry.outputs), "layout": entry.litert_layout,
              "special_tokens": {token: vocab[token] for token in SPECIAL_TOKENS
                                 if token in vocab}}
    # transformers' config of the same model checks the labels and problem type once.
    checked = huggingface.label_config(model, label_names, problem_type)
    if entry.hf_problem_type:
        config.update(problem_type=checked["problem_type"],
                      text_pair=bool(preprocessor.text_pair))
    if entry.labelled:
        config["label_names"] = (None if config.get("problem_type") == "regression" else
                                 [checked["id2label"][i] for i in range(model.num_classes)])
    if "max_query_length" in entry.signature_options:  # the app cuts the question
        config["max_query_length"] = max_query_length or min(64, (max_seq_length - 3) // 2)
    return config


def export_litert(model, preprocessor, export_dir, label_names=None, quantize=None,
                  problem_type=None, max_query_length=None, overwrite=False):
    """Writes `model.tflite`, `vocab.txt` and `litert_config.json` (module docstring).

    Args:
        model: A built BertClassifier, BertTokenClassifier, BertSpanLabeler or
            BertEncoder.
        preprocessor: The `Preprocessor` the model was trained with: its vocab and case
            (for the app's tokenizer), its `max_seq_length` the length S of the model's
            one row of ids, its `text_pair` (a classifier of sentence pairs) recorded
            for the app.
        export_dir: The folder to write: missing or empty, or replaced with `overwrite`.
        label_names: Class / tag names in label-id order (default "0", "1", ...).
        quantize: "int8" (dynamic range) or None / "none" (float32).
        problem_type: A classifier's "regression", "single_label_classification" or
            "multi_label_classification" (sigmoid per label), for the app.
        max_query_length: A span labeler's question length (default: 64, at most half
            the row), recorded for the app.
        overwrite: Replace what `export_dir` holds.

    Returns:
        The folder written.
    Raises:
        ValueError / FileNotFoundError / FileExistsError: naming the model type,
            quantization, vocab, labels or folder at fault, before anything is written.
    """
    check_model_class(type(model))
    check_quantize(quantize)
    export.check_model_and_vocab(model, type(model), preprocessor)
    config = litert_config(model, preprocessor, label_names, quantize, problem_type,
                           max_query_length)
    target = output_folder.check_output_folder(export_dir, overwrite)
    flatbuffer = convert(model, preprocessor, quantize)

    def write(folder):
        os.makedirs(folder)
        with open(os.path.join(folder, MODEL_FILE), "wb") as file:
            file.write(flatbuffer)
        shutil.copyfile(preprocessor.vocab_file, os.path.join(folder, VOCAB_FILE))
        with open(os.path.join(folder, CONFIG_FILE), "w", encoding="utf-8") as file:
            file.write(json.dumps(config, indent=2) + "\n")

    output_folder.write_folder(target, write)
    weights = ("float32 weights" if config["quantize"] == "none"
               else f"{config['quantize']} weights")
    logging.info("Exported %s as a LiteRT model (%s, %.1f MB) to %s", type(model).__name__,
                 weights, len(flatbuffer) / 1e6, target)
    return target


def write_ids_model(exporter):
    """The `bert_tf.serving.formats` writer of an ids-model exporter (LiteRT, ONNX)."""
    def write(model, preprocessor, export_dir, request):
        return exporter(model, preprocessor, export_dir, label_names=request.label_names,
                        quantize=request.quantize, problem_type=request.problem_type,
                        max_query_length=request.signature.get("max_query_length"),
                        overwrite=request.overwrite)
    return write


formats.register(formats.ExportFormat(
    "litert", catalog.EXPORT_FORMATS["litert"],
    check=lambda model_cls, request: check_model_class(
        model_cls, request.signature.get("doc_stride")),
    write=write_ids_model(export_litert), quantizes=True))
