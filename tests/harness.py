"""The tests' shared harness: one tiny BERT and the tiny files the tests build around it.

Plain functions and constants (tests/conftest.py wraps some of them in fixtures):
    tiny_config(**overrides), tiny_config_dict(**overrides), RUNNER_OVERRIDES
    SPECIAL_TOKENS, write_vocab(path, tokens, size=None)
    tiny_model(model_cls, config, seed, **head)
    write_released_checkpoint(folder, model, vocab=None)
    write_tiny_model_files(folder, words, **overrides)   (what the run_* tests pass)
    write_records(...), write_unmasked_records(...), write_bad_record_file(...),
    random_sequences(rng, count, seq_length, min_length)   (rows to pack)
    is_gzip(path)   (pre-training data)
    write_tsv(path, rows), squad_json(paragraphs, version), write_squad_json(...)
    TinyRegressor, regression_loss, make_arrays, dataset_fn_factory, optimizer_fn,
    train_tiny   (a tiny regression problem for bert_tf.train.loop; no BERT needed)
    kill_once_checkpointed(command, checkpoint_dir, step, timeout, env)   (kill tests)

Also runnable as a script (the kill-and-resume test of test_training.py):
    python harness.py OUTPUT_DIR NUM_STEPS SAVE_STEPS [SLEEP_SECONDS]
"""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import tensorflow as tf

from bert_tf.configs import BertConfig
from bert_tf.models import BertEncoder
from bert_tf.train import loop, optimization, warm_start
from bert_tf.weights import checkpoints

# ------------------------------------------------------------------------ tiny config
# Every size distinct (99 ids, 32 wide, 4 heads, 37 intermediate, 2 layers, 64
# positions), so that a swapped dimension shows as a shape error.
_TINY_CONFIG = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=37, hidden_act="gelu", hidden_dropout_prob=0.1,
                    attention_probs_dropout_prob=0.1, max_position_embeddings=64,
                    type_vocab_size=2, initializer_range=0.02)
# What the end-to-end training runs use: short sequences, no dropout (learns in few steps).
RUNNER_OVERRIDES = dict(max_position_embeddings=16, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)


def tiny_config_dict(**overrides):
    """All bert_config.json fields of the tiny BERT, as a new dict."""
    unknown = set(overrides) - set(_TINY_CONFIG)
    if unknown:
        raise TypeError(f"tiny_config: unknown fields {sorted(unknown)}")
    return {**_TINY_CONFIG, **overrides}


def tiny_config(**overrides):
    """The tiny BertConfig; a test that needs another value passes it here."""
    return BertConfig(**tiny_config_dict(**overrides))


# ------------------------------------------------------------------- vocab, checkpoints
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def write_vocab(path, tokens, size=None):
    """vocab.txt: one token a line (UTF-8), padded with unused{i} to `size` lines if given.

    Returns the path as a string."""
    tokens = list(tokens)
    if size is not None:
        tokens += [f"unused{i}" for i in range(size - len(tokens))]
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(token + "\n" for token in tokens), encoding="utf-8")
    return str(path)


def tiny_model(model_cls, config, seed, **head):
    """A built `model_cls` (BertEncoder, or a head model around one) with seeded weights."""
    keras.utils.set_random_seed(seed)
    encoder = BertEncoder(config)
    model = encoder if model_cls is BertEncoder else model_cls(encoder, **head)
    model.build()
    return model


def write_released_checkpoint(folder, model, vocab=None):
    """A folder as google-research releases one: the TF1 bert_model.ckpt.* of `model` and
    its bert_config.json, plus vocab.txt when `vocab` (a token list) is given.

    Returns `model`."""
    os.makedirs(folder, exist_ok=True)
    checkpoints.save_google_checkpoint(model, os.path.join(folder, "bert_model.ckpt"),
                                       write_config=True)
    if vocab is not None:
        write_vocab(os.path.join(folder, "vocab.txt"), vocab)
    return model


def write_tiny_model_files(folder, words, **overrides):
    """The --vocab_file and --bert_config_file of the run_* tests' tiny BERT.

    vocab.txt is SPECIAL_TOKENS + `words`, padded to the vocab size; bert_config.json is
    tiny_config_dict with RUNNER_OVERRIDES (and `overrides`). Returns both paths."""
    folder = pathlib.Path(folder)
    values = tiny_config_dict(**{**RUNNER_OVERRIDES, **overrides})
    vocab_file = write_vocab(folder / "vocab.txt", SPECIAL_TOKENS + list(words),
                             size=values["vocab_size"])
    (folder / "bert_config.json").write_text(json.dumps(values))
    return vocab_file, str(folder / "bert_config.json")


# ------------------------------------------------------------------ pre-training records
# Pre-training TFRecords in google-research/bert's feature layout. The token stream is
# learnable: every sequence counts upwards modulo a small range (`token[i + 1] =
# token[i] + 1`), so a masked token is predictable from its neighbours while the most
# frequent token covers only a small share of the masked positions.
FIRST_TOKEN = 5  # ids below are [PAD], [UNK], [CLS], [SEP], [MASK] by convention
CLS_ID, SEP_ID, MASK_ID = 2, 3, 4


def _int64(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def _float(values):
    return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))


def _counting_instance(rng, seq_length, vocab_size, min_length=None):
    """[CLS] counting tokens [SEP] of a random length, and their segment ids."""
    length = int(rng.integers(min_length or seq_length // 2, seq_length + 1))
    span = vocab_size - FIRST_TOKEN
    start = int(rng.integers(0, span))
    tokens = [CLS_ID] + [FIRST_TOKEN + (start + i) % span for i in range(length - 2)] + [SEP_ID]
    cut = len(tokens) // 2
    return tokens, [0] * cut + [1] * (len(tokens) - cut)


def random_sequences(rng, count, seq_length, min_length, max_length=None):
    """Padded [CLS] random ids [SEP] rows [count, seq_length] of random lengths (for
    packing tests): `input_ids`, `input_mask`, `segment_ids` (B from the middle on) and
    `lengths` [count]."""
    lengths = rng.integers(min_length, (max_length or seq_length) + 1, count)
    columns = np.arange(seq_length)[None, :]
    mask = (columns < lengths[:, None]).astype(np.int32)
    ids = rng.integers(FIRST_TOKEN, 99, (count, seq_length)).astype(np.int32) * mask
    ids[:, 0] = CLS_ID
    ids[np.arange(count), lengths - 1] = SEP_ID
    segments = ((columns >= (lengths // 2)[:, None]) * mask).astype(np.int32)
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments,
            "lengths": lengths}


def make_example(rng, seq_length, max_predictions, vocab_size, num_masked=None):
    """One tf.train.Example; returns (example, masked_lm_ids)."""
    tokens, segment_ids = _counting_instance(rng, seq_length, vocab_size)
    candidates = list(range(1, len(tokens) - 1))
    count = num_masked or int(rng.integers(1, max_predictions + 1))
    count = min(count, len(candidates))
    positions = sorted(rng.choice(candidates, size=count, replace=False).tolist())
    masked_ids = [tokens[p] for p in positions]
    for p in positions:
        tokens[p] = MASK_ID
    pad = seq_length - len(tokens)
    pred_pad = max_predictions - count
    features = {
        "input_ids": _int64(tokens + [0] * pad),
        "input_mask": _int64([1] * len(tokens) + [0] * pad),
        "segment_ids": _int64(segment_ids + [0] * pad),
        "masked_lm_positions": _int64(positions + [0] * pred_pad),
        "masked_lm_ids": _int64(masked_ids + [0] * pred_pad),
        "masked_lm_weights": _float([1.0] * count + [0.0] * pred_pad),
        "next_sentence_labels": _int64([int(rng.integers(0, 2))]),
    }
    return tf.train.Example(features=tf.train.Features(feature=features)), masked_ids


def write_records(directory, num_files, records_per_file, seq_length=16,
                  max_predictions=3, vocab_size=99, seed=0, gzip_files=False,
                  num_masked=None, prefix="records"):
    """Writes `num_files` files; returns (paths, all masked-LM target ids)."""
    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(seed)
    paths, targets = [], []
    for index in range(num_files):
        path = os.path.join(directory, f"{prefix}-{index:05d}.tfrecord")
        payload = []
        for _ in range(records_per_file):
            example, masked = make_example(rng, seq_length, max_predictions, vocab_size,
                                           num_masked)
            payload.append(example.SerializeToString())
            targets.extend(masked)
        options = "GZIP" if gzip_files else None
        if gzip_files:
            path += ".gz"
        with tf.io.TFRecordWriter(path, options=options) as writer:
            for record in payload:
                writer.write(record)
        paths.append(path)
    return paths, targets


def write_unmasked_records(path, num_records, seq_length=16, vocab_size=99, seed=0,
                           next_sentence=True, min_length=None):
    """Records as `create_pretraining_data --masking=none` writes them: the counting
    stream without masks (and without `next_sentence_labels` unless `next_sentence`).

    Returns the path as a string."""
    rng = np.random.default_rng(seed)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for _ in range(num_records):
            tokens, segment_ids = _counting_instance(rng, seq_length, vocab_size, min_length)
            pad = seq_length - len(tokens)
            features = {"input_ids": _int64(tokens + [0] * pad),
                        "input_mask": _int64([1] * len(tokens) + [0] * pad),
                        "segment_ids": _int64(segment_ids + [0] * pad)}
            if next_sentence:
                features["next_sentence_labels"] = _int64([int(rng.integers(0, 2))])
            writer.write(tf.train.Example(features=tf.train.Features(
                feature=features)).SerializeToString())
    return str(path)


def write_bad_record_file(path, bad_index, seq_length=16, max_predictions=3):
    """Five records of all-ones features; record `bad_index` has 4 input_ids too many."""
    with tf.io.TFRecordWriter(str(path)) as writer:
        for index in range(5):
            length = seq_length + 4 if index == bad_index else seq_length
            feature = {name: _int64([1] * n)
                       for name, n in (("input_ids", length), ("input_mask", seq_length),
                                       ("segment_ids", seq_length),
                                       ("masked_lm_positions", max_predictions),
                                       ("masked_lm_ids", max_predictions),
                                       ("next_sentence_labels", 1))}
            feature["masked_lm_weights"] = _float([1.0] * max_predictions)
            example = tf.train.Example(features=tf.train.Features(feature=feature))
            writer.write(example.SerializeToString())


def is_gzip(path):
    with open(path, "rb") as stream:
        return stream.read(2) == b"\x1f\x8b"


# ------------------------------------------------------------------------- task files
def write_tsv(path, rows):
    """Tab-separated rows (lists of strings), UTF-8; creates the parent folder."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join("\t".join(row) + "\n" for row in rows), encoding="utf-8")


def squad_json(paragraphs, version="1.1"):
    """A SQuAD file's content: one article holding `paragraphs`."""
    return {"version": version, "data": [{"title": "t", "paragraphs": paragraphs}]}


def write_squad_json(path, paragraphs, version="1.1"):
    """Writes squad_json(paragraphs, version) to `path`; returns the path as a string."""
    pathlib.Path(path).write_text(json.dumps(squad_json(paragraphs, version)),
                                  encoding="utf-8")
    return str(path)


# ------------------------------------------------------------ tiny regression problem
NUM_EXAMPLES, DIM = 64, 4


@keras.saving.register_keras_serializable(package="bert_tf_tests")
class TinyRegressor(keras.Model):
    """y = dense2(relu(dense1(x))), called with a feature dict."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.hidden = keras.layers.Dense(
            8, activation="relu", name="hidden",
            kernel_initializer=keras.initializers.GlorotUniform(seed=1))
        self.out = keras.layers.Dense(
            1, name="out", kernel_initializer=keras.initializers.GlorotUniform(seed=2))

    def call(self, features, training=None):
        return {"y": self.out(self.hidden(features["x"]))[:, 0]}


def regression_loss(features, outputs):
    error = tf.cast(outputs["y"], tf.float32) - features["target"]  # float32 losses
    return {"total_loss": tf.reduce_mean(error ** 2), "mean_error": tf.reduce_mean(error)}


def make_arrays(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(NUM_EXAMPLES, DIM)).astype("float32")
    target = (x @ np.array([1.0, -2.0, 0.5, 3.0], "float32") + 0.1).astype("float32")
    return x, target


def dataset_fn_factory(global_batch_size, seed=0, shuffle=True):
    x, target = make_arrays()

    def dataset_fn(input_context):
        batch = input_context.get_per_replica_batch_size(global_batch_size)
        dataset = tf.data.Dataset.from_tensor_slices({"x": x, "target": target}).repeat()
        if shuffle:
            dataset = dataset.shuffle(32, seed=seed)
        return dataset.batch(batch, drop_remainder=True)
    return dataset_fn


def optimizer_fn(num_steps=1000):
    return lambda: optimization.create_optimizer(0.05, num_steps, 2)


def train_tiny(output_dir, num_steps, save_steps, sleep_seconds=0.0, **kwargs):
    loss_fn = regression_loss
    if sleep_seconds:
        def loss_fn(features, outputs):  # slows each step down, for the kill test
            tf.py_function(lambda: time.sleep(sleep_seconds), [], [])
            return regression_loss(features, outputs)
    kwargs.setdefault("steps_per_loop", 2)
    # The shuffle order depends on the global seed too: fix it, so that a run in this
    # process and one in a subprocess (the kill test) see the same data whatever seed
    # earlier tests in this process set.
    tf.random.set_seed(1234)
    init_checkpoint = kwargs.pop("init_checkpoint", None)
    return loop.train(
        tf.distribute.get_strategy(), TinyRegressor, loss_fn, dataset_fn_factory(8),
        optimizer_fn=optimizer_fn(), settings=loop.LoopSettings(
            output_dir=output_dir, num_train_steps=num_steps, global_batch_size=8,
            save_checkpoints_steps=save_steps, **kwargs),
        initialize=init_checkpoint and (lambda model, optimizer: warm_start.start_from(
            model, optimizer, init_checkpoint)))


def kill_once_checkpointed(command, checkpoint_dir, step, timeout, env):
    """Starts `command` and SIGKILLs it once `checkpoint_dir` has a checkpoint of `step`
    or later (within `timeout` seconds); fails if the run ended first. Returns the step
    of the latest checkpoint it left."""
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.time() + timeout
    while time.time() < deadline and process.poll() is None:
        latest = tf.train.latest_checkpoint(str(checkpoint_dir))
        if latest and int(latest.rsplit("-", 1)[1]) >= step:
            break
        time.sleep(0.05)
    assert process.poll() is None, "the run ended before it could be killed"
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    return int(tf.train.latest_checkpoint(str(checkpoint_dir)).rsplit("-", 1)[1])


if __name__ == "__main__":
    train_tiny(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]),
               float(sys.argv[4]) if len(sys.argv) > 4 else 0.0)
