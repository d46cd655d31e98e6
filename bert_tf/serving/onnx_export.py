"""ONNX export (`bert-export-model --export_format=onnx`): the SavedModel's `serve_ids`
as an ONNX graph, for ONNX Runtime and the other ONNX runtimes.

    path = onnx_export.export_onnx(model, preprocessor, export_dir, label_names=None,
                                   quantize=None, problem_type=None,
                                   max_query_length=None, overwrite=False)

`export_dir` gets:

- `model.onnx`: int32 `input_ids`, `input_mask`, `segment_ids` [batch, sequence] (a
  multiple-choice model: [batch, choices, sequence]), every dimension free (sequence at
  most `max_position_embeddings`) -> the float32 outputs of `serve_ids`
  (`ModelType.outputs`: `logits`; `start_logits`, `end_logits`; `pooled_output`,
  `sequence_output`; `embedding`), computed as `serve_ids` computes them: up to the
  batch's longest row, per-position outputs padded back with 0. Converted with tf2onnx
  (opset `OPSET`) from the same function the SavedModel serves; the exact GELU is traced
  in its erf form (ONNX has `Erf`, not TensorFlow's `Erfc`), equal to float32 rounding.
  Ids are not range-checked in the graph (the app's tokenizer makes them).
- `vocab.txt` and `onnx_config.json`: the tokenizer settings, special token ids, the row
  layout, input and output names, labels and problem type, as a LiteRT export's
  `litert_config.json` (`bert_tf.serving.litert.litert_config`).

`quantize="int8"`: ONNX Runtime's dynamic quantization
(`onnxruntime.quantization.quantize_dynamic`): int8 weights of the MatMuls and the word
embeddings (per output channel, 7 bits), activations quantized per call; inputs and
outputs stay as above.

The graph is tidied for the runtimes (`bert_tf.serving.onnx_graph`): each LayerNorm one
`LayerNormalization`, each GELU in the order ONNX Runtime fuses.

Needs the `onnx` extra (tf2onnx, onnx, onnxruntime): `pip install -e .[onnx]`.
"""

import json
import logging as std_logging
import os
import shutil

import tensorflow as tf
from absl import logging

from bert_tf import extras
from bert_tf.layers import activations
from bert_tf.models.encoder import INPUT_NAMES
from bert_tf.serving import catalog, export, formats
from bert_tf.serving import litert, onnx_graph, output_folder, registry

MODEL_FILE, CONFIG_FILE, VOCAB_FILE = "model.onnx", "onnx_config.json", "vocab.txt"
QUANTIZATIONS = litert.QUANTIZATIONS  # ("none", "int8"), one --quantize for both
OPSET = 17  # LayerNormalization's opset; ONNX Runtime 1.14+ and tf2onnx 1.14+ take it
FEATURE = "--export_format=onnx"
# Names of the free input dimensions, by the rank of the ids.
DIMENSIONS = {2: ("batch", "sequence"), 3: ("batch", "choices", "sequence")}


def import_converters():
    """(tf2onnx, onnx), or `extras.MissingExtra` naming the extra to install."""
    return tuple(extras.require(name, FEATURE) for name in ("tf2onnx", "onnx"))


def check_model_class(model_cls, doc_stride=None):
    """Raises ValueError, with the reason, for a model type without an ids signature,
    and for a classifier of long documents (`litert.check_ids_model_class`)."""
    litert.check_ids_model_class(model_cls, "onnx", "ONNX", doc_stride)


def ids_function(module, rank):
    """(the tf.function to convert, its input signature): int32 ids of `rank` dimensions,
    all free -> `module.logits` (an `export.ServingModule`), GELU in its erf form."""
    spec = {name: tf.TensorSpec([None] * rank, tf.int32, name) for name in INPUT_NAMES}

    @tf.function(autograph=False, input_signature=[spec])
    def serve_ids(features):
        with activations.erf_gelu():
            return module.logits(features, check_ids=False)

    return serve_ids, [spec]


def name_dimensions(proto, rank, sequence_outputs, output_shapes):
    """Gives the free dimensions of the graph's inputs and outputs the names of
    `DIMENSIONS` (tf2onnx calls them unk__N), and the outputs the sizes that TensorFlow
    knows (`output_shapes`: name -> TensorShape) and tf2onnx lost."""
    names = DIMENSIONS[rank]
    for value in proto.graph.input:
        for dim, name in zip(value.type.tensor_type.shape.dim, names):
            dim.dim_param = name
    for value in proto.graph.output:
        known = output_shapes[value.name].as_list()
        for index, dim in enumerate(value.type.tensor_type.shape.dim):
            if dim.dim_value:
                continue
            if known[index] is not None:
                dim.dim_value = known[index]
            elif index < rank - 1:
                dim.dim_param = names[index]
            elif index == rank - 1 and value.name in sequence_outputs:
                dim.dim_param = names[-1]


def drop_eager_table_initializers():
    """Removes the None entries that lookup tables made eagerly (the in-graph
    tokenizer's vocab tables) leave in TF1's global `table_initializer` collection.

    tf2onnx exports that collection with its graph (`export_meta_graph`), which failed on
    them: TensorFlow's "Issue encountered when serializing table_initializer" and
    "'NoneType' object has no attribute 'name'" on every export. An eager table has no
    initializer op to run, so nothing is lost.
    """
    collection = tf.compat.v1.get_collection_ref(tf.compat.v1.GraphKeys.TABLE_INITIALIZERS)
    collection[:] = [initializer for initializer in collection if initializer is not None]


def convert(model, preprocessor):
    """The float32 ONNX ModelProto of `model` (see the module docstring)."""
    tf2onnx, onnx = import_converters()
    entry = registry.for_model(model)
    module = export.ServingModule(model, preprocessor)
    function, signature = ids_function(module, entry.ids_rank)
    drop_eager_table_initializers()  # after the module's tables, before tf2onnx
    proto, _ = tf2onnx.convert.from_function(function, input_signature=signature,
                                             opset=OPSET)
    outputs = function.get_concrete_function().structured_outputs
    name_dimensions(proto, entry.ids_rank, entry.sequence_outputs,
                    {name: output.shape for name, output in outputs.items()})
    logging.info("ONNX graph rewrites: %s", onnx_graph.optimize(proto))
    onnx.checker.check_model(proto)
    return proto


def quantize_int8(float_path, int8_path):
    """Writes the dynamic-range int8 model of the ONNX file `float_path` to `int8_path`."""
    quantization = extras.require("onnxruntime.quantization", f"{FEATURE} --quantize=int8")
    # Per-channel scales and 7-bit weights: on the MRPC run of docs/benchmarks.md, dev
    # accuracy 76.72 against float32's 77.45 (per-tensor 8-bit weights: 75.49); 7 bits
    # keep CPUs without VNNI from saturating their u8 x s8 products.
    root = std_logging.getLogger()
    level = root.level
    root.setLevel(std_logging.ERROR)  # a line per tensor, and advice to pre-process first
    try:
        quantization.quantize_dynamic(float_path, int8_path, per_channel=True,
                                      reduce_range=True,
                                      weight_type=quantization.QuantType.QInt8)
    finally:
        root.setLevel(level)


def onnx_config(model, preprocessor, **settings):
    """The `onnx_config.json` of `model` as a dict: LiteRT's settings for the app
    (`litert.litert_config`, `settings` its keyword arguments), with this format's
    file, shape and opset."""
    config = litert.litert_config(model, preprocessor, **settings)
    entry = registry.for_model(model)
    config.update(model_file=MODEL_FILE, input_shape=list(DIMENSIONS[entry.ids_rank]),
                  opset=OPSET, layout=entry.litert_layout or "the rows of the SavedModel's "
                  "serve_ids")
    return config


def export_onnx(model, preprocessor, export_dir, label_names=None, quantize=None,
                problem_type=None, max_query_length=None, overwrite=False):
    """Writes `model.onnx`, `vocab.txt` and `onnx_config.json` (module docstring).

    Args:
        model: A built model of a type with a SavedModel exporter (classifier, token
            classifier, span labeler, multiple choice, encoder, sentence encoder).
        preprocessor: The `Preprocessor` the model was trained with: vocab, case, its
            `text_pair` and the row length the app pads / cuts to (recorded; the graph
            takes any length up to `max_position_embeddings`).
        export_dir: The folder to write: missing or empty, or replaced with `overwrite`.
        label_names, problem_type, max_query_length: Recorded for the app, as
            `litert.export_litert` records them.
        quantize: "int8" (dynamic quantization) or None / "none" (float32).
        overwrite: Replace what `export_dir` holds.

    Returns:
        The folder written.
    Raises:
        extras.MissingExtra: without the `onnx` extra, naming it.
        ValueError / FileNotFoundError / FileExistsError: naming the model type,
            quantization, vocab, labels or folder at fault, before anything is written.
    """
    check_model_class(type(model))
    litert.check_quantize(quantize)
    import_converters()
    export.check_model_and_vocab(model, type(model), preprocessor)
    config = onnx_config(model, preprocessor, label_names=label_names, quantize=quantize,
                         problem_type=problem_type, max_query_length=max_query_length)
    target = output_folder.check_output_folder(export_dir, overwrite)
    proto = convert(model, preprocessor)

    def write(folder):
        os.makedirs(folder)
        model_path = os.path.join(folder, MODEL_FILE)
        if quantize == "int8":
            float_path = os.path.join(folder, "float32.onnx")
            with open(float_path, "wb") as file:
                file.write(proto.SerializeToString())
            quantize_int8(float_path, model_path)
            os.remove(float_path)
        else:
            with open(model_path, "wb") as file:
                file.write(proto.SerializeToString())
        shutil.copyfile(preprocessor.vocab_file, os.path.join(folder, VOCAB_FILE))
        with open(os.path.join(folder, CONFIG_FILE), "w", encoding="utf-8") as file:
            file.write(json.dumps(config, indent=2) + "\n")

    output_folder.write_folder(target, write)
    logging.info("Exported %s as an ONNX model (%s, %.1f MB) to %s", type(model).__name__,
                 config["quantize"], os.path.getsize(os.path.join(target, MODEL_FILE)) / 1e6,
                 target)
    return target


def _check(model_cls, request):
    check_model_class(model_cls, request.signature.get("doc_stride"))
    import_converters()


formats.register(formats.ExportFormat(
    "onnx", catalog.EXPORT_FORMATS["onnx"],
    check=_check, write=litert.write_ids_model(export_onnx), quantizes=True,
    derived_from="saved_model"))
