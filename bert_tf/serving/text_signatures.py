"""The raw-text `serving_default` signature of each built-in model type: what its
SavedModel exporter (`bert_tf.serving.export`) puts beside `serve_ids` and
`serve_examples` (the inputs and outputs are listed in that module's docstring).

Each builder takes the `export.ServingModule` (`tokenizer`, `max_seq_length`,
`logits(features)`, which computes up to the batch's longest row) and returns a concrete
function (ids from the tokenizer are in the vocab: `check_ids=False`); a new model type writes its own
the same way and passes it to `export.export_signatures(make_default=...)`.
"""

import tensorflow as tf

from bert_tf.serving import signatures as sig


def _text_spec(*names):
    """String [B] TensorSpecs named `names`."""
    return [tf.TensorSpec([None], tf.string, name) for name in names]


def classifier_text_signature(module, label_names, is_regression, text_pair,
                              doc_stride=None, window_pooling="mean",
                              multi_label_threshold=None):
    """A classifier's: `text_a` (and `text_b`) -> probabilities and labels, or a score
    (regression), or per-label sigmoid outputs (`multi_label_threshold`); with
    `doc_stride`, pooled over the windows of each text."""
    labels = tf.constant(label_names)
    tokenizer, length = module.tokenizer, module.max_seq_length

    def outputs(text_a, text_b=None):
        if doc_stride is None:  # one input a text, cut to max_seq_length
            features = sig.encode_texts(tokenizer, length, text_a, text_b)  # [B, S]
            logits = module.logits(features, check_ids=False)["logits"]  # [B, C]
        else:  # every window of a text, their logits pooled per text
            features, document = sig.encode_windowed_texts(tokenizer, length, doc_stride,
                                                           text_a, text_b)
            logits = module.logits(features, check_ids=False)["logits"]  # [N, C]
            logits = sig.pool_windows(logits, document,
                                      tf.shape(text_a)[0], window_pooling)  # [B, C]
        if is_regression:
            return {"score": logits[:, 0], "logits": logits}
        if multi_label_threshold is not None:  # sigmoid per label
            return sig.multi_label_outputs(logits, labels, multi_label_threshold)
        label_ids = tf.argmax(logits, axis=-1, output_type=tf.int32)
        return {"probabilities": tf.nn.softmax(logits), "label_ids": label_ids,
                "labels": tf.gather(labels, label_ids), "logits": logits}

    if text_pair:
        @tf.function(autograph=False, input_signature=_text_spec("text_a", "text_b"))
        def serve_text(text_a, text_b):
            return outputs(text_a, text_b)
    else:
        @tf.function(autograph=False, input_signature=_text_spec("text_a"))
        def serve_text(text_a):
            return outputs(text_a)
    return serve_text.get_concrete_function()


def span_text_signature(module, max_query_length, max_answer_length):
    """A span labeler's: `question`, `context` -> the best answer span and its text."""
    @tf.function(autograph=False, input_signature=_text_spec("question", "context"))
    def serve_text(question, context):
        features, context_start, context_length, char_starts, char_ends = (
            sig.encode_question_context(module.tokenizer, module.max_seq_length,
                                        max_query_length, question, context))
        logits = module.logits(features, check_ids=False)
        start, end, score = sig.best_span(logits["start_logits"], logits["end_logits"],
                                          context_start, context_length, max_answer_length)
        answer = sig.decode_answer(context, char_starts, char_ends, start, end,
                                   context_length)
        null_score = logits["start_logits"][:, 0] + logits["end_logits"][:, 0]
        return dict(answer, score=score, null_score=null_score, **logits)
    return serve_text.get_concrete_function()


def tagger_text_signature(module, label_names):
    """A token classifier's: `text` -> a tag per whitespace word (from its first piece)."""
    tags = tf.constant(label_names)

    @tf.function(autograph=False, input_signature=_text_spec("text"))
    def serve_text(text):
        features, words, starts, ends, first, tagged = sig.encode_words(
            module.tokenizer, module.max_seq_length, text)
        logits = module.logits(features, check_ids=False)["logits"]  # [B, S, C]
        word_logits = tf.gather(logits, first, batch_dims=1)  # [B, W, C]
        tag_ids = tf.where(tagged, tf.argmax(word_logits, -1, output_type=tf.int32), -1)
        return {"words": tf.where(tagged, words, ""),
                "tags": tf.where(tagged, tf.gather(tags, tf.maximum(tag_ids, 0)), ""),
                "tag_ids": tag_ids,
                "word_start": tf.where(tagged, starts, -1),
                "word_end": tf.where(tagged, ends, -1),
                "num_words": tf.reduce_sum(tf.cast(tagged, tf.int32), axis=1),
                "logits": logits}
    return serve_text.get_concrete_function()


def encoder_text_signature(module):
    """An encoder's: `text` -> pooled and sequence output, and the input mask."""
    @tf.function(autograph=False, input_signature=_text_spec("text"))
    def serve_text(text):
        features = sig.encode_texts(module.tokenizer, module.max_seq_length, text)
        return dict(module.logits(features, check_ids=False),
                    input_mask=features["input_mask"])
    return serve_text.get_concrete_function()
