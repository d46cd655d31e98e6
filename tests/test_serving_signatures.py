"""The SavedModel's ids signatures compute only up to the batch's longest row (as
`serving_default` does) and refuse ids outside the vocab naming the input; a scalar
string to `serving_default` is refused naming the input (issue 38 findings)."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  registers the tokenizer's ops for the loaded model

from bert_tf.models import BertClassifier, BertTokenClassifier
from bert_tf.serving import export
from bert_tf.serving import signature_inputs
from bert_tf.text.preprocessor import Preprocessor
from test_export_formats import LABELS, TAGS, randomized, vocab  # noqa: F401

LENGTH = 16


def rows(lengths, length=LENGTH, seed=0):
    """int32 inputs [len(lengths), length], row i real up to lengths[i]."""
    rng = np.random.default_rng(seed)
    mask = (np.arange(length)[None] < np.asarray(lengths)[:, None]).astype(np.int32)
    ids = rng.integers(5, 99, mask.shape).astype(np.int32) * mask
    return {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)}


@pytest.fixture(scope="module")
def classifier_export(vocab, tmp_path_factory):
    model = randomized(BertClassifier, 41, num_classes=3)
    folder = tmp_path_factory.mktemp("classifier") / "saved"
    export.export_classifier(
        model, Preprocessor(vocab, True, LENGTH, text_pair=True), str(folder),
        label_names=LABELS)
    return model, tf.saved_model.load(str(folder))


def call(signature, features):
    return signature(**{name: tf.constant(value) for name, value in features.items()})


def test_serve_ids_equals_the_model_on_the_full_rows(classifier_export):
    model, loaded = classifier_export
    for lengths in ((3, 7), (16,), (1, 2, 5)):
        features = rows(lengths)
        got = call(loaded.signatures["serve_ids"], features)["logits"].numpy()
        want = model(features, training=False)["logits"].numpy()
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)


def test_per_position_outputs_past_the_longest_row_are_zero(vocab, tmp_path):
    model = randomized(BertTokenClassifier, 42, num_classes=4)
    folder = export.export_token_classifier(
        model, Preprocessor(vocab, True, LENGTH), str(tmp_path / "s"), label_names=TAGS)
    serve_ids = tf.saved_model.load(folder).signatures["serve_ids"]
    assert serve_ids.structured_outputs["logits"].shape.as_list() == [None, LENGTH, 4]
    features = rows((4, 9))
    got = call(serve_ids, features)["logits"].numpy()
    assert got.shape == (2, LENGTH, 4)
    np.testing.assert_array_equal(got[:, 9:], 0)
    want = model(features, training=False)["logits"].numpy()
    np.testing.assert_allclose(got[:, :9], want[:, :9], atol=1e-5, rtol=0)


def test_a_mask_with_holes_keeps_its_last_real_token():
    mask = tf.constant([[1, 0, 0, 1, 0, 0], [1, 1, 0, 0, 0, 0]])
    assert int(signature_inputs.longest_row(mask)) == 4
    assert int(signature_inputs.longest_row(tf.zeros([2, 5], tf.int32))) == 1


@pytest.mark.parametrize("name, value, message", [
    ("input_ids", -7, r"input_ids holds ids outside \[0, 99\) \(the vocab size of the "
                      r"model\): smallest\] \[-7\]"),
    ("input_ids", 99999, r"input_ids holds ids outside \[0, 99\).*largest\] \[99999\]"),
    ("segment_ids", 2, r"segment_ids holds ids outside \[0, 2\) \(type_vocab_size"),
])
def test_ids_outside_the_vocab_are_refused_naming_the_input(name, value, message,
                                                            classifier_export):
    _, loaded = classifier_export
    features = rows((5, 8))
    features[name][1, 2] = value
    for signature in ("serve_ids",):
        with pytest.raises(tf.errors.InvalidArgumentError, match=message):
            call(loaded.signatures[signature], features)


def test_a_scalar_string_is_refused_naming_the_input(classifier_export):
    _, loaded = classifier_export
    serve = loaded.signatures["serving_default"]
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"text_a must be a vector of strings \[batch\] \(a single text "
                             r"is a batch of one\); got shape\] \[\]"):
        serve(text_a=tf.constant("hello world"), text_b=tf.constant(["the red house"]))
    outputs = serve(text_a=tf.constant(["hello world"]), text_b=tf.constant(["the house"]))
    assert outputs["labels"].shape == (1,)
