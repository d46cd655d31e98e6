"""In-graph handling of the signatures' inputs, in core TensorFlow ops (a SavedModel
built with them serves without `bert_tf`): the longest row of a batch and the trimming
to it (`ServingModule.logits`), ids outside the vocab and scalar strings refused with
messages that name the input.
"""

import tensorflow as tf

from bert_tf.models.encoder import INPUT_NAMES as FEATURE_NAMES


def longest_row(input_mask):
    """Positions up to the last real token of the longest row: max over rows of (last
    nonzero `input_mask` position + 1), at least 1. `input_mask` [..., S]; a mask with
    holes keeps every real token (unlike a count of its ones)."""
    positions = tf.range(1, tf.shape(input_mask)[-1] + 1)
    last = tf.where(tf.not_equal(input_mask, 0), positions, tf.zeros_like(positions))
    return tf.maximum(tf.reduce_max(last), 1)


def trim_inputs(features, length):
    """The model inputs (`FEATURE_NAMES`) cut to their first `length` positions."""
    return {name: value[..., :length] if name in FEATURE_NAMES else value
            for name, value in features.items()}


def pad_positions(output, length, axis):
    """`output` padded with 0 along `axis` (its position axis) to `length` positions (an
    int, which the result's static shape keeps, or a scalar tensor)."""
    padding = [[0, 0]] * output.shape.rank
    padding[axis] = [0, length - tf.shape(output)[axis]]
    padded = tf.pad(output, padding)
    shape = output.shape.as_list()
    shape[axis] = length if isinstance(length, int) else None
    padded.set_shape(shape)
    return padded


def check_ids(features, vocab_size, type_vocab_size):
    """`features` after in-graph checks that `input_ids` lie in [0, vocab_size) and
    `segment_ids` in [0, type_vocab_size): an id outside would wrap round (negative)
    or fail deep in the embedding lookup.

    Raises:
        tf.errors.InvalidArgumentError: (when run) naming the input, its range and the
            smallest and largest id given.
    """
    checks = []
    for name, size, what in (("input_ids", vocab_size, "the vocab size"),
                             ("segment_ids", type_vocab_size, "type_vocab_size")):
        if features.get(name) is None:
            continue
        ids = tf.cast(features[name], tf.int64)
        inside = tf.reduce_all((ids >= 0) & (ids < size))
        checks.append(tf.debugging.Assert(inside, [
            f"{name} holds ids outside [0, {size}) ({what} of the model): smallest",
            tf.reduce_min(ids), "largest", tf.reduce_max(ids)], name=f"check_{name}_range"))
    with tf.control_dependencies(checks):
        return {name: tf.identity(value) for name, value in features.items()}


def check_text_rank(texts):
    """`texts` (dict name -> string tensor [B]) after an in-graph check that each is a
    vector: a scalar string (which TF Serving and `saved_model_cli` pass through the
    signature's [B] spec) fails naming the input, not deep in the tokenizer.

    The check reads the shape at run time: the graph optimizer folds `tf.rank` and
    `tf.size(tf.shape(...))` of a [B] input to 1 before any data arrives.

    Raises:
        tf.errors.InvalidArgumentError: (when run) naming the input and its shape.
    """
    checks = []
    for name, value in texts.items():
        shape = tf.shape(value)
        dims = tf.concat([shape, [-1, -1]], axis=0)  # rank 0: [-1, -1]; rank 1: [B, -1]
        checks.append(tf.debugging.Assert(
            (dims[0] >= 0) & tf.equal(dims[1], -1),
            [f"{name} must be a vector of strings [batch] (a single text is a batch of "
             "one); got shape", shape], name=f"check_{name}_rank"))
    with tf.control_dependencies(checks):
        return {name: tf.identity(value) for name, value in texts.items()}
