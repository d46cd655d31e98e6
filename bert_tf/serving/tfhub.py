"""TF Hub's BERT interface: a preprocessor SavedModel and an encoder SavedModel, as
TF Hub's `bert_en_uncased_preprocess` and `bert_en_uncased_L-12_H-768_A-12` are.

    path = tfhub.export_tfhub(encoder, preprocessor, export_dir, overwrite=False)
    # writes export_dir/preprocessor and export_dir/encoder

Code written for TF Hub's BERT models runs on them unchanged (tensorflow_hub's
`KerasLayer` is a Keras 2 layer: under Keras 3 it runs in `tf_keras` models, as TF Hub's
own documentation says)::

    preprocessor = hub.KerasLayer(f"{export_dir}/preprocessor")
    encoder = hub.KerasLayer(f"{export_dir}/encoder", trainable=True)
    outputs = encoder(preprocessor(sentences))  # pooled_output [B, H], ...

The preprocessor's root object maps a string tensor [B] to int32 `input_word_ids`,
`input_mask`, `input_type_ids` [B, seq_length]: `[CLS] text [SEP]` padded with 0, as
bert_tf's raw-text signatures (`bert_tf.serving.signatures.encode_texts`) and
fine-tuning features lay it out (also its `serving_default` signature, input
`sentences`). Its sub-objects:

- `tokenize(sentences)`: int32 ragged [B, (words), (pieces)], the WordPiece ids of each
  word (a word starts at every piece without the `##` prefix);
  `tokenize.get_special_tokens_dict()`: `vocab_size`, `start_of_sequence_id`,
  `end_of_segment_id`, `padding_id`, `mask_id` (when the vocab has `[MASK]`);
- `bert_pack_inputs(segments, seq_length=seq_length)`: a list of 1 or 2 int32 ragged
  tensors of ragged rank 1 or 2 (what `tokenize` returns) -> the three inputs
  [B, seq_length], `[CLS] a [SEP] (b [SEP])`; a pair that is too long is cut longest
  first (the original `_truncate_seq_pair`; TF Hub's round-robin trimmer keeps the same
  tokens for two segments).

The encoder's root object is called with that dict and `training` (dropout on when
True) and returns float32 `pooled_output` [B, H], `sequence_output` [B, S, H],
`encoder_outputs` (the list of the L blocks' outputs [B, S, H]) and `default` (the
pooled output). It carries `variables`, `trainable_variables` (the model's weights) and
`regularization_losses` (none: weight decay belongs to the optimizer here), so
`hub.KerasLayer(encoder, trainable=True)` fine-tunes it, plus `vocab_file` (an asset)
and `do_lower_case` as TF Hub's BERT encoders have. Its `serving_default` signature
takes the three inputs and returns `pooled_output`, `sequence_output`, `default` and
`encoder_outputs` stacked [B, L, S, H].

A sentence encoder's `pooled_output` and `default` are its sentence vector (its model
type's `hub_outputs`), as TF Hub's BERT-based sentence encoders (LaBSE, CMLM) serve
theirs.
"""

import os

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf.models.encoder import INPUT_NAMES, check_input_shapes
from bert_tf.serving import catalog, export, formats, output_folder, registry
from bert_tf.serving import signatures as sig
from bert_tf.text import input_layout_graph

# TF Hub's names of the encoder inputs, in the order of bert_tf's `INPUT_NAMES`.
HUB_INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")
PREPROCESSOR, ENCODER = "preprocessor", "encoder"
# Why a model with heads has no TF Hub export.
INTERFACE = ("TF Hub's BERT interface is a preprocessor and an encoder (pooled and "
             "sequence output) without task heads")


def check_model_class(model_cls):
    """Raises ValueError, with the reason, for a model TF Hub's BERT interface cannot hold."""
    reason = registry.refusal(model_cls, "tfhub")
    if reason is not None:
        others = registry.other_formats(model_cls, "tfhub")
        raise ValueError(f"a {model_cls.__name__} cannot be exported as a TF Hub encoder: "
                         f"{reason or INTERFACE}. Export an encoder (model_type=encoder), "
                         f"or this model with export_format={others}")


def word_pieces(ids, continues_word):
    """Ids ragged [B, (T)] -> [B, (words), (pieces)]: a word starts at the first piece
    of a text and at every piece whose token does not continue a word (`##`).

    Args:
        ids: int ragged [B, (T)] WordPiece ids.
        continues_word: bool [vocab_size], True for the `##` tokens.
    """
    first_in_row = tf.ragged.range(ids.row_lengths()).values == 0  # [N]
    starts = first_in_row | ~tf.gather(continues_word, ids.values)  # [N]
    word_index = tf.cumsum(tf.cast(starts, tf.int64)) - 1  # [N]
    words = tf.RaggedTensor.from_value_rowids(ids.values, word_index,
                                              nrows=tf.reduce_sum(tf.cast(starts, tf.int64)))
    words_per_row = tf.reduce_sum(tf.cast(ids.with_values(starts), tf.int64), axis=1)  # [B]
    return tf.RaggedTensor.from_row_lengths(words, words_per_row)


def pack_segments(tokenizer, segments, seq_length):
    """TF Hub's `bert_pack_inputs`: 1 or 2 ragged [B, (T)] or [B, (words), (pieces)]
    -> int32 `input_word_ids`, `input_mask`, `input_type_ids` [B, seq_length]."""
    flat = [segment.merge_dims(1, -1) if segment.ragged_rank > 1 else segment
            for segment in segments]
    flat = [tf.cast(segment, tf.int64) for segment in flat]  # [B, (T)]
    length = tf.cast(seq_length, tf.int64)
    cut = input_layout_graph.truncate_ragged_segments(flat[0], flat[1] if len(flat) > 1
                                                      else None, length)
    packed = input_layout_graph.pack_inputs(cut, tokenizer.cls_id, tokenizer.sep_id, None)
    padding = length - tf.shape(packed["input_ids"], out_type=tf.int64)[1]
    return {hub_name: tf.pad(packed[name], [[0, 0], [0, padding]])  # [B, seq_length]
            for hub_name, name in zip(HUB_INPUT_NAMES, INPUT_NAMES)}


class _Tokenize(tf.train.Checkpoint):
    """`preprocessor.tokenize` and its `get_special_tokens_dict` (see module docstring)."""

    def __init__(self, tokenizer, vocab):
        super().__init__()
        self.tokenizer = tokenizer
        continues_word = np.array([token.startswith("##") for token in vocab])

        @tf.function(autograph=False, input_signature=[
            tf.TensorSpec([None], tf.string, name="sentences")])
        def tokenize(sentences):
            ids = word_pieces(tokenizer.tokenize(sentences), tf.constant(continues_word))
            return tf.cast(ids, tf.int32)  # [B, (words), (pieces)]

        special = {"vocab_size": len(vocab), "start_of_sequence_id": vocab["[CLS]"],
                   "end_of_segment_id": vocab["[SEP]"], "padding_id": 0}
        if "[MASK]" in vocab:
            special["mask_id"] = vocab["[MASK]"]
        self.get_special_tokens_dict = tf.train.Checkpoint()
        self.get_special_tokens_dict.__call__ = tf.function(
            lambda: {key: tf.constant(value, tf.int32) for key, value in special.items()},
            input_signature=[])
        self.__call__ = tokenize


class _PackInputs(tf.train.Checkpoint):
    """`preprocessor.bert_pack_inputs`: traced for 1 or 2 int32 segments of ragged rank
    1 or 2, `seq_length` a scalar int32 (default: the export's)."""

    def __init__(self, tokenizer, seq_length):
        super().__init__()

        @tf.function(autograph=False)
        def bert_pack_inputs(inputs, seq_length=seq_length):
            return pack_segments(tokenizer, list(inputs), seq_length)

        for ragged_rank in (1, 2):
            for num_segments in (1, 2):
                bert_pack_inputs.get_concrete_function(
                    [tf.RaggedTensorSpec([None] * (ragged_rank + 1), tf.int32)
                     for _ in range(num_segments)], seq_length=tf.TensorSpec([], tf.int32))
        self.__call__ = bert_pack_inputs


class HubPreprocessor(tf.train.Checkpoint):
    """The preprocessor SavedModel's root object (see the module docstring)."""

    def __init__(self, preprocessor):
        super().__init__()
        vocab, seq_length = preprocessor.vocab.tokens, preprocessor.max_seq_length
        self.tokenizer = sig.ServingTokenizer(preprocessor.vocab_file,
                                              preprocessor.do_lower_case)
        self.tokenize = _Tokenize(self.tokenizer, vocab)
        self.bert_pack_inputs = _PackInputs(self.tokenizer, seq_length)
        tokenizer = self.tokenizer

        @tf.function(autograph=False, input_signature=[
            tf.TensorSpec([None], tf.string, name="sentences")])
        def preprocess(sentences):
            features = sig.encode_texts(tokenizer, seq_length, sentences)
            return {hub_name: features[name]
                    for hub_name, name in zip(HUB_INPUT_NAMES, INPUT_NAMES)}

        self.__call__ = preprocess


class HubEncoder(tf.train.Checkpoint):
    """The encoder SavedModel's root object (see the module docstring)."""

    def __init__(self, model, preprocessor):
        super().__init__()
        # The Keras model stays out of the object graph (see export.ServingModule); its
        # variables are tracked here, the seed states of dropout among them.
        self.variables = [export.tf_variable(v)
                          for v in model.variables]
        self.trainable_variables = [v for v in self.variables if v.trainable]
        self.regularization_losses = []
        self.vocab_file = tf.saved_model.Asset(preprocessor.vocab_file)
        self.do_lower_case = tf.Variable(preprocessor.do_lower_case, trainable=False)
        hub_outputs = registry.for_model(model).hub_outputs  # None: the model's own

        def outputs(inputs, training):
            features = check_input_shapes({name: inputs[hub_name] for hub_name, name
                                           in zip(HUB_INPUT_NAMES, INPUT_NAMES)})
            result = (hub_outputs(model, features, training) if hub_outputs
                      else model(features, training=training))
            pooled = tf.cast(result["pooled_output"], tf.float32)  # [B, H]
            return {"pooled_output": pooled, "default": pooled,
                    "sequence_output": tf.cast(result["sequence_output"], tf.float32),
                    "encoder_outputs": [tf.cast(layer, tf.float32)  # L x [B, S, H]
                                        for layer in result["encoder_outputs"]]}

        @tf.function(autograph=False)
        def call(inputs, training=False):
            return outputs(inputs, training)

        spec = {name: tf.TensorSpec([None, None], tf.int32, name) for name in HUB_INPUT_NAMES}
        for training in (False, True):
            call.get_concrete_function(spec, training=training)
        self.__call__ = call

        @tf.function(autograph=False, input_signature=[spec])
        def serve(inputs):
            result = outputs(inputs, False)
            return dict(result, encoder_outputs=tf.stack(result["encoder_outputs"], axis=1))

        self.serving_default = serve


def export_tfhub(model, preprocessor, export_dir, overwrite=False):
    """Writes `export_dir/preprocessor` and `export_dir/encoder` (see the module docstring).

    Args:
        model: A BertEncoder.
        preprocessor: The `Preprocessor` the model was trained with: its vocab and case,
            and as `max_seq_length` the hub preprocessor's default sequence length (its
            root call, and `bert_pack_inputs` without `seq_length`).
        export_dir: The folder to write: missing or empty, or replaced with `overwrite`.
        overwrite: Replace what `export_dir` holds.

    Returns:
        The folder written.
    Raises:
        ValueError / FileNotFoundError / FileExistsError: naming the model type, vocab,
            length or folder at fault, before anything is written.
    """
    check_model_class(type(model))
    export.check_model_and_vocab(model, type(model), preprocessor)
    target = output_folder.check_output_folder(export_dir, overwrite)
    hub_preprocessor = HubPreprocessor(preprocessor)
    encoder = HubEncoder(model, preprocessor)

    def write(folder):
        os.makedirs(folder)
        tf.saved_model.save(hub_preprocessor, os.path.join(folder, PREPROCESSOR),
                            signatures={"serving_default": hub_preprocessor.__call__})
        tf.saved_model.save(encoder, os.path.join(folder, ENCODER),
                            signatures={"serving_default": encoder.serving_default})

    output_folder.write_folder(target, write)
    logging.info("Exported a TF Hub preprocessor (seq_length %d) and encoder to %s",
                 preprocessor.max_seq_length, target)
    return target


formats.register(formats.ExportFormat(
    "tfhub", catalog.EXPORT_FORMATS["tfhub"],
    check=lambda model_cls, request: check_model_class(model_cls),
    write=lambda model, preprocessor, export_dir, request: export_tfhub(
        model, preprocessor, export_dir, overwrite=request.overwrite)))
