"""The multiple-choice model type (`BertMultipleChoice`, SWAG): its SavedModel signatures,
its exporter and its registration, all here (`export_finetuned_model(...,
"multiple_choice")` finds it in the registry). Batch B, choices C (free),
S = max_seq_length:

- `serving_default`: raw UTF-8 text, WordPiece inside the graph. `context` string [B],
  `question` string [B] ("" when there is none) and `choices` string [B, C] ->
  `probabilities` float32 [B, C] (softmax over the choices), `prediction` int32 [B]
  (the index of the most probable choice), `logits` float32 [B, C].
- `serve_ids`: int32 `input_ids`, `input_mask`, `segment_ids` [B, C, S] -> `logits`.
- `serve_examples`: serialized tf.Example [B] with int64 features `input_ids`,
  `input_mask`, `segment_ids` of C * S values each (the choices' rows one after the
  other: the layout of the multiple-choice task's TFRecords) -> `logits`.

Each choice is laid out as the task trains it (`encode_choices`, the graph twin of
`bert_tf.tasks.multiple_choice.data.choice_segments`): `[CLS] context question [SEP]
choice [SEP]`, cut longest-first to S; what the first segment loses comes off the end of
the context, the question is kept whole while any context is left.
"""

import tensorflow as tf

from bert_tf.models.encoder import assert_inputs_agree
from bert_tf.serving import export, registry
from bert_tf.serving import signatures as sig
from bert_tf.tasks.multiple_choice.model import BertMultipleChoice
from bert_tf.text import input_layout_graph


def encode_choices(tokenizer, max_seq_length, context, question, choices):
    """Raw text -> model inputs int32 [B, C, S], as the multiple-choice task lays them out.

    Args:
        tokenizer: A `signatures.ServingTokenizer`.
        max_seq_length: S, special tokens included.
        context: string [B]; question: string [B] (may be ""); choices: string [B, C].

    Returns:
        dict `input_ids`, `input_mask`, `segment_ids`, int32 [B, C, S]. Inputs of
        different batch sizes fail (when run) naming both.
    """
    texts = assert_inputs_agree({"choices": choices, "context": context,
                                 "question": question}, 1, "batch sizes")
    choices = texts["choices"]
    num_choices = tf.shape(choices)[1]
    # Every example's context and question, once per choice: [B * C].
    repeat = lambda text: tf.repeat(text, num_choices)  # noqa: E731
    context_ids = tokenizer.tokenize(repeat(texts["context"]))  # [B*C, (T)]
    question_ids = tokenizer.tokenize(repeat(texts["question"]))  # [B*C, (T)]
    choice_ids = tokenizer.tokenize(tf.reshape(choices, [-1]))  # [B*C, (T)]
    question_length = question_ids.row_lengths()
    keep_a, keep_b = input_layout_graph.pair_lengths(
        context_ids.row_lengths() + question_length, choice_ids.row_lengths(),
        max_seq_length - 3)
    keep_question = tf.minimum(question_length, keep_a)
    first = tf.concat([input_layout_graph.truncate_rows(context_ids, keep_a - keep_question),
                       input_layout_graph.truncate_rows(question_ids, keep_question)], axis=1)
    rows = input_layout_graph.pack_inputs(
        [first, input_layout_graph.truncate_rows(choice_ids, keep_b)], tokenizer.cls_id,
        tokenizer.sep_id, max_seq_length)  # [B*C, S] each
    shape = [-1, num_choices, max_seq_length]
    return {name: tf.reshape(value, shape) for name, value in rows.items()}


def parse_choice_examples(serialized, max_seq_length):
    """Serialized tf.Examples [B] (C * S values a feature) -> int32 inputs [B, C, S].

    Examples with different numbers of values fail (when run), naming the feature.
    """
    spec = {name: tf.io.RaggedFeature(tf.int64) for name in sig.FEATURE_NAMES}
    parsed = tf.io.parse_example(serialized, spec)
    features = {}
    for name, ragged in parsed.items():
        lengths = ragged.row_lengths()  # [B]
        check = tf.debugging.assert_equal(
            lengths, lengths[:1], message=f"examples disagree: feature {name} holds another "
            "number of values in some example; every example of a batch needs the same "
            f"number of choices, each of {max_seq_length} values")
        with tf.control_dependencies([check]):
            dense = tf.cast(ragged.to_tensor(0), tf.int32)  # [B, C * S]
        features[name] = tf.reshape(dense, [tf.shape(dense)[0], -1, max_seq_length])
    return features


def signatures(module):
    """The concrete functions `serving_default`, `serve_ids`, `serve_examples` of
    `module` (an `export.ServingModule` around a `BertMultipleChoice`)."""
    length = module.max_seq_length

    @tf.function(autograph=False, input_signature=[
        tf.TensorSpec([None], tf.string, "context"), tf.TensorSpec([None], tf.string,
                                                                   "question"),
        tf.TensorSpec([None, None], tf.string, "choices")])
    def serve_text(context, question, choices):
        features = encode_choices(module.tokenizer, length, context, question, choices)
        logits = module.logits(features)["logits"]  # [B, C]
        return {"probabilities": tf.nn.softmax(logits),
                "prediction": tf.argmax(logits, axis=-1, output_type=tf.int32),
                "logits": logits}

    ids_spec = {name: tf.TensorSpec([None, None, length], tf.int32, name)
                for name in sig.FEATURE_NAMES}

    @tf.function(autograph=False, input_signature=[ids_spec])
    def serve_ids(features):
        return module.logits(assert_inputs_agree(features, 3, "batch sizes, choices and "
                                                 "lengths"))

    @tf.function(autograph=False,
                 input_signature=[tf.TensorSpec([None], tf.string, "examples")])
    def serve_examples(examples):
        return module.logits(parse_choice_examples(examples, length))

    return {"serving_default": serve_text.get_concrete_function(),
            "serve_ids": serve_ids.get_concrete_function(),
            "serve_examples": serve_examples.get_concrete_function()}


def export_multiple_choice(model, preprocessor, export_dir, overwrite=False,
                           versioned=False):
    """Exports a `BertMultipleChoice`: `context`, `question` and `choices` [B, C] in,
    per-choice `probabilities` out. Args as `export.export_classifier`; the
    preprocessor's `max_seq_length` is the length of each choice's row."""
    export.check_model_and_vocab(model, BertMultipleChoice, preprocessor)
    target = export.resolve_export_dir(export_dir, overwrite=overwrite, versioned=versioned)
    module = export.ServingModule(model, preprocessor)
    return export.write_saved_model(module, signatures(module), target)


registry.register(registry.ModelType(
    name="multiple_choice", model_class=BertMultipleChoice,
    refused={"litert": "a multiple-choice model scores [B, C, S] rows, one per choice, "
                       "laid out from context, question and choices in its raw-text "
                       "signature; export it with export_format=saved_model"},
    saved_model=export_multiple_choice, ids_rank=3))
