"""TF Hub exports (bert-export-model --export_format=tfhub): the preprocessor and encoder
loaded by `tensorflow_hub` as TF Hub's BERT models are (the `tfhub-test` extra:
tensorflow-hub and tf_keras, the Keras 2 that hub.KerasLayer needs under Keras 3),
against layouts made by hand from FullTokenizer and against the bert_tf encoder; one
fine-tuning step through hub.KerasLayer(trainable=True); bad input."""

import importlib.util
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.models import BertClassifier, BertEncoder
from bert_tf.serving import tfhub
from bert_tf.runs import export_checkpoint
from bert_tf.text.tokenization import FullTokenizer
from bert_tf.text.preprocessor import Preprocessor
from harness import tiny_config, tiny_model, write_released_checkpoint
from test_export_formats import (LABELS, TEXTS, export_options, randomized,  # noqa: F401
                                 vocab, write_run)

HAVE_HUB = all(importlib.util.find_spec(name) is not None
               for name in ("tensorflow_hub", "tf_keras"))
LENGTH = 16
SENTENCES = TEXTS + ["the red house is blue", ""]


def hub_or_skip():
    """(tensorflow_hub, tf_keras), or a skip naming the extra."""
    if not HAVE_HUB:
        pytest.skip("tensorflow-hub and tf_keras are not installed: pip install -e "
                    ".[tfhub-test]")
    import tensorflow_hub  # pylint: disable=import-outside-toplevel
    import tf_keras  # pylint: disable=import-outside-toplevel
    return tensorflow_hub, tf_keras


@pytest.fixture(scope="module")
def exported(vocab, tmp_path_factory):
    """(the encoder, export_dir): a tiny encoder (dropout 0.1) exported with seq_length 16."""
    encoder = randomized(BertEncoder, 31)
    folder = tmp_path_factory.mktemp("hub") / "bert"
    tfhub.export_tfhub(encoder, Preprocessor(vocab, True, LENGTH), folder)
    return encoder, str(folder)


def tokenizer_for(vocab):
    return FullTokenizer(vocab, do_lower_case=True)


def layout(tokenizer, text_a, text_b=None, length=LENGTH):
    """[CLS] a [SEP] (b [SEP]) padded to `length`, the pair cut longest-first as the
    original _truncate_seq_pair: written out here, independently of bert_tf's layout."""
    a = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text_a))
    b = None if text_b is None else tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text_b))
    if b is None:
        a = a[:length - 2]
        ids, types = [2] + a + [3], [0] * (len(a) + 2)
    else:
        while len(a) + len(b) > length - 3:
            (a if len(a) > len(b) else b).pop()
        ids = [2] + a + [3] + b + [3]
        types = [0] * (len(a) + 2) + [1] * (len(b) + 1)
    pad = length - len(ids)
    return {"input_word_ids": ids + [0] * pad, "input_mask": [1] * len(ids) + [0] * pad,
            "input_type_ids": types + [0] * pad}


def as_lists(features):
    return {key: np.asarray(value).tolist() for key, value in features.items()}


def batch_layout(tokenizer, texts_a, texts_b=None, length=LENGTH):
    rows = [layout(tokenizer, a, b, length)
            for a, b in zip(texts_a, texts_b or [None] * len(texts_a))]
    return {key: [row[key] for row in rows] for key in rows[0]}


@pytest.mark.slow
@pytest.mark.extras("tensorflow_hub", "tf_keras")
def test_preprocessor_has_tf_hubs_interface(exported, vocab):
    hub, _ = hub_or_skip()
    preprocessor = hub.load(os.path.join(exported[1], "preprocessor"))
    tokenizer = tokenizer_for(vocab)
    features = preprocessor(tf.constant(SENTENCES))
    assert all(value.dtype == tf.int32 for value in features.values())
    assert as_lists(features) == batch_layout(tokenizer, SENTENCES)

    # tokenize: [B, (words), (pieces)], a word being what the basic tokenizer splits.
    tokens = preprocessor.tokenize(tf.constant(SENTENCES))
    assert tokens.dtype == tf.int32 and tokens.ragged_rank == 2
    words = [[tokenizer.convert_tokens_to_ids(tokenizer.wordpiece_tokenizer.tokenize(word))
              for word in tokenizer.basic_tokenizer.tokenize(text)] for text in SENTENCES]
    assert tokens.to_list() == words
    assert words[1][0] == [12, 13, 14]  # unaffable: un ##aff ##able, one word
    special = {key: int(value) for key, value in
               preprocessor.tokenize.get_special_tokens_dict().items()}
    assert special == {"vocab_size": 99, "start_of_sequence_id": 2, "end_of_segment_id": 3,
                       "padding_id": 0, "mask_id": 4}

    # bert_pack_inputs: one or two segments of ragged rank 1 or 2, any seq_length.
    firsts, seconds = SENTENCES[:3], ["blue houses", "the cafe is red and blue", ""]
    pair = preprocessor.bert_pack_inputs([preprocessor.tokenize(tf.constant(firsts)),
                                          preprocessor.tokenize(tf.constant(seconds))],
                                         seq_length=9)
    assert as_lists(pair) == batch_layout(tokenizer, firsts, seconds, length=9)
    flat = preprocessor.tokenize(tf.constant(SENTENCES)).merge_dims(1, 2)
    assert as_lists(preprocessor.bert_pack_inputs([flat])) == as_lists(features)


@pytest.mark.extras("tensorflow_hub", "tf_keras")
def test_encoder_through_hub_keras_layer_equals_bert_tf(exported):
    hub, _ = hub_or_skip()
    encoder, folder = exported
    preprocessor = hub.KerasLayer(os.path.join(folder, "preprocessor"))
    layer = hub.KerasLayer(os.path.join(folder, "encoder"), trainable=True)
    inputs = preprocessor(tf.constant(SENTENCES))
    theirs = layer(inputs)
    ours = encoder({"input_ids": inputs["input_word_ids"], "input_mask": inputs["input_mask"],
                    "segment_ids": inputs["input_type_ids"]}, training=False)
    assert sorted(theirs) == ["default", "encoder_outputs", "pooled_output",
                              "sequence_output"]
    close = lambda got, want: np.testing.assert_allclose(  # noqa: E731
        np.asarray(got), np.asarray(want), atol=1e-5, rtol=0)
    close(theirs["pooled_output"], ours["pooled_output"])
    close(theirs["default"], ours["pooled_output"])
    close(theirs["sequence_output"], ours["sequence_output"])
    assert len(theirs["encoder_outputs"]) == 2
    for got, want in zip(theirs["encoder_outputs"], ours["encoder_outputs"]):
        close(got, want)
    # The model's weights, trainable; dropout's seed states not; no regularization loss.
    assert len(layer.trainable_weights) == len(encoder.trainable_weights)
    assert len(layer.non_trainable_weights) == len(encoder.non_trainable_variables)
    assert layer.losses == []
    # training=True turns dropout on (0.1 in this config), training=False is repeatable.
    dropped = layer(inputs, training=True)["pooled_output"]
    assert np.abs(np.asarray(dropped) - np.asarray(ours["pooled_output"])).max() > 1e-3
    close(layer(inputs, training=False)["pooled_output"], ours["pooled_output"])
    # TF Hub's legacy attributes, and Keras 3's own SavedModel layer (inference).
    loaded = layer.resolved_object
    assert open(loaded.vocab_file.asset_path.numpy(), encoding="utf-8").read().split()[:3] == [
        "[PAD]", "[UNK]", "[CLS]"]
    assert bool(loaded.do_lower_case.numpy()) is True
    served = keras.layers.TFSMLayer(os.path.join(folder, "encoder"),
                                    call_endpoint="serving_default")(inputs)
    close(served["pooled_output"], ours["pooled_output"])
    close(served["encoder_outputs"][:, 1], ours["encoder_outputs"][1])


@pytest.mark.extras("tensorflow_hub", "tf_keras")
def test_tf_hub_keras_code_fine_tunes_the_encoder(exported):
    """TF Hub's "classify text with BERT" model, unchanged but for tf_keras (Keras 2)."""
    hub, tf_keras = hub_or_skip()
    tf_keras.utils.set_random_seed(3)
    folder = exported[1]
    text_input = tf_keras.layers.Input(shape=(), dtype=tf.string, name="text")
    preprocessing_layer = hub.KerasLayer(os.path.join(folder, "preprocessor"))
    encoder = hub.KerasLayer(os.path.join(folder, "encoder"), trainable=True)
    outputs = encoder(preprocessing_layer(text_input))
    net = tf_keras.layers.Dropout(0.1)(outputs["pooled_output"])
    net = tf_keras.layers.Dense(1, activation=None, name="classifier")(net)
    model = tf_keras.Model(text_input, net)
    model.compile(optimizer=tf_keras.optimizers.Adam(1e-3),
                  loss=tf_keras.losses.BinaryCrossentropy(from_logits=True))
    texts = tf.constant(SENTENCES)
    labels = np.array([1.0, 0.0, 1.0, 0.0])
    before_weights = [w.numpy().copy() for w in encoder.trainable_weights]
    loss_before = model.evaluate(texts, labels, verbose=0)
    model.fit(texts, labels, batch_size=4, epochs=1, verbose=0)  # one step
    loss_after = model.evaluate(texts, labels, verbose=0)
    assert loss_after < loss_before, (loss_before, loss_after)
    moved = [not np.array_equal(w.numpy(), b)
             for w, b in zip(encoder.trainable_weights, before_weights)]
    assert all(moved)  # the step went through the encoder's weights, not only the head


@pytest.mark.slow
def test_export_model_writes_both_folders(vocab, tmp_path):
    encoder = randomized(BertEncoder, 32)
    write_released_checkpoint(tmp_path / "released", encoder)
    options = export_options(tmp_path / "released", tmp_path / "hub", export_format="tfhub",
                             model_type="encoder", vocab_file=vocab)
    export_checkpoint.export_from_checkpoint(options)
    assert sorted(os.listdir(tmp_path / "hub")) == ["encoder", "preprocessor"]
    for name in ("encoder", "preprocessor"):
        assert os.path.isfile(tmp_path / "hub" / name / "saved_model.pb")
    loaded = tf.saved_model.load(str(tmp_path / "hub" / "encoder"))
    inputs = {"input_word_ids": tf.constant([[2, 5, 6, 3]]), "input_mask": tf.ones([1, 4],
                                                                                   tf.int32),
              "input_type_ids": tf.zeros([1, 4], tf.int32)}
    ours = encoder({"input_ids": inputs["input_word_ids"], "input_mask": inputs["input_mask"],
                    "segment_ids": inputs["input_type_ids"]}, training=False)
    np.testing.assert_allclose(loaded(inputs)["pooled_output"], ours["pooled_output"],
                               atol=1e-5, rtol=0)
    # The preprocessor's default length is --max_seq_length (16 in export_options).
    preprocessor = tf.saved_model.load(str(tmp_path / "hub" / "preprocessor"))
    assert preprocessor(tf.constant(["hello"]))["input_word_ids"].shape == (1, LENGTH)
    with pytest.raises(FileExistsError, match=r"hub is not empty \(holds encoder, "
                                              r"preprocessor\); pass --overwrite"):
        export_checkpoint.export_from_checkpoint(options)
    options.overwrite = True
    export_checkpoint.export_from_checkpoint(options)
    assert sorted(os.listdir(tmp_path / "hub")) == ["encoder", "preprocessor"]


@pytest.mark.parametrize("changes, message", [
    ({"model_type": "classifier"}, r"a BertClassifier cannot be exported as a TF Hub "
                                   r"encoder: TF Hub's BERT interface is a preprocessor and "
                                   r"an encoder \(pooled and sequence output\) without task "
                                   r"heads"),
    ({"model_type": "pretrainer"}, r"a BertPretrainer cannot be exported as a TF Hub"),
    ({"quantize": "int8"}, r"--quantize=int8 quantizes a LiteRT or ONNX model \(--export_"
                           r"format=litert or onnx\); --export_format=tfhub writes float32 "
                           r"weights"),
    ({"versioned": True}, r"--export_format=tfhub writes --export_dir itself"),
])
def test_what_tfhub_cannot_hold_is_refused_before_loading(changes, message, vocab,
                                                          tmp_path):
    run = write_run(tmp_path / "run", randomized(BertClassifier, 33, num_classes=3), vocab,
                    {"model_type": "classifier", "labels": LABELS, "task": "mrpc"})
    with pytest.raises(ValueError, match=message):
        export_checkpoint.export_from_checkpoint(export_options(
            run, tmp_path / "out", **{"export_format": "tfhub", "model_type": "encoder",
                                      **changes}))
    assert not (tmp_path / "out").exists()


def test_the_library_refuses_before_writing(vocab, tmp_path):
    model = tiny_model(BertEncoder, tiny_config(), 0)
    with pytest.raises(ValueError, match=r"max_seq_length must be an integer in \[3, "
                                         r"max_position_embeddings=64\], got 65"):
        tfhub.export_tfhub(model, Preprocessor(vocab, True, 65), tmp_path / "a")
    with pytest.raises(ValueError, match=r"a BertClassifier cannot be exported as a TF Hub"):
        tfhub.export_tfhub(
            tiny_model(BertClassifier, tiny_config(), 0, num_classes=2),
            Preprocessor(vocab, True), tmp_path / "b")
    assert not os.listdir(tmp_path)


@pytest.mark.slow
def test_a_classifier_run_exports_its_encoder_to_tf_hub(tmp_path):
    # TF Hub holds encoders: a classifier run's folder is refused naming
    # --model_type=encoder, and that flag then exports the run's encoder.
    import test_run_classifier  # pylint: disable=import-outside-toplevel
    from bert_tf.runs import export_checkpoint, registry  # noqa: E501  pylint: disable=import-outside-toplevel
    test_run_classifier.write_tiny_inputs(tmp_path)
    options = test_run_classifier.tiny_options(tmp_path)
    registry.run("classification", options)
    export = export_checkpoint.ExportOptions
    with pytest.raises(ValueError, match="model_type=encoder"):
        export_checkpoint.export_from_checkpoint(export(
            init_checkpoint=options.output_dir, export_format="tfhub",
            export_dir=str(tmp_path / "hub")))
    export_checkpoint.export_from_checkpoint(export(
        init_checkpoint=options.output_dir, export_format="tfhub", model_type="encoder",
        export_dir=str(tmp_path / "hub")))
    for name in ("encoder", "preprocessor"):
        assert os.path.isfile(tmp_path / "hub" / name / "saved_model.pb")
