"""Where a batch-1 call of the exported SavedModel spends its time, and what the serving
candidates of issue 41 would change, each side timed in the same alternating (ABBA)
rounds of one process, one MRPC dev pair a call:

- `tokenize`: the in-graph tokenizer and packing alone (`signatures.encode_texts`);
- `model`: the classifier as a bare tf.function on the pair's exact length (no
  signature, no tokenizer): the arithmetic;
- `model_bucket16` / `model_bucket32`: the same at the length rounded up to a multiple
  of 16 / 32 (shapes repeat from call to call);
- `model_xla_bucket16` / `model_xla_bucket32`: the same jit-compiled with XLA (compiled
  once a bucket, before the rounds);
- `serve_ids`, `serving_default`: the SavedModel's signatures as a server calls them
  (ids padded to 128; raw text).

    .venv/bin/python bench/serving_profile.py --rounds=12 --calls_per_round=20

Thread settings cannot change inside a process, so they are compared across runs, one
setting after the other, repeated:

    for i in 1 2 3; do for threads in 0 1; do
      .venv/bin/python bench/serving_profile.py --profile_sides=serving_default \
          --tf_threads=$threads --rounds=2 --calls_per_round=75; done; done

Prints each side's median ms and its median round ratio to `model` with the range. The
classifier: `bench/serving_latency.py`'s (the shared 6-layer checkpoint, a random
2-class head from --seed), exported to a SavedModel under --output_dir.
"""

import os
import tempfile
import time

import keras
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  the tokenizer's ops, for the loaded SavedModel
from absl import app, flags

import machine
from bert_tf.models import BertClassifier
from bert_tf.serving import export
from bert_tf.serving import signatures as sig
from bert_tf.text.preprocessor import Preprocessor
from bert_tf.weights import checkpoints
from serving_latency import CHECKPOINT, PairRows, dev_pairs

# --rounds, --calls_per_round, --output_dir (the SavedModel's folder) and --seed are
# serving_latency.py's flags.
flags.DEFINE_integer("pairs", 300, "MRPC dev pairs cycled over.")
flags.DEFINE_list("profile_sides", [], "Time only these sides (default: all).")
flags.DEFINE_integer("tf_threads", 0, "TensorFlow's intra- and inter-op threads (0: its "
                     "defaults, every core); set before anything runs, so settings are "
                     "compared across runs, alternately (module docstring).")
FLAGS = flags.FLAGS
SPEC = {name: tf.TensorSpec([None, None], tf.int32, name) for name in sig.FEATURE_NAMES}


def cut(row, multiple=1):
    """The row's ids cut to its tokens, rounded up to `multiple` (at most 128)."""
    length = int(row["input_mask"].sum())
    length = min(row["input_ids"].shape[1], -(-length // multiple) * multiple)
    return {name: tf.constant(value[:, :length]) for name, value in row.items()}


def make_sides(model, vocab_file, pairs, rows, saved_model):
    """{side: call(index)} (see the module docstring)."""
    logits = lambda features: model(features, training=False)["logits"]  # noqa: E731
    graph = tf.function(logits, input_signature=[SPEC], autograph=False)
    xla = tf.function(logits, input_signature=[SPEC], autograph=False, jit_compile=True)
    module = export.ServingModule(model, Preprocessor(vocab_file, True, 128))
    tokenize = tf.function(lambda a, b: sig.encode_texts(module.tokenizer, 128, a, b),
                           autograph=False)
    loaded = tf.saved_model.load(saved_model)
    serve_ids, serve_text = (loaded.signatures[name] for name in ("serve_ids",
                                                                   "serving_default"))
    row = lambda index: rows[index % len(rows)]  # noqa: E731
    pair = lambda index: pairs[index % len(rows)]  # noqa: E731
    return {
        "model": lambda i: graph(cut(row(i))).numpy(),
        "tokenize": lambda i: tokenize(tf.constant([pair(i)[0]]),
                                       tf.constant([pair(i)[1]]))["input_ids"].numpy(),
        "model_bucket16": lambda i: graph(cut(row(i), 16)).numpy(),
        "model_bucket32": lambda i: graph(cut(row(i), 32)).numpy(),
        "model_xla_bucket16": lambda i: xla(cut(row(i), 16)).numpy(),
        "model_xla_bucket32": lambda i: xla(cut(row(i), 32)).numpy(),
        "serve_ids": lambda i: serve_ids(**{name: tf.constant(value) for name, value
                                            in row(i).items()})["logits"].numpy(),
        "serving_default": lambda i: serve_text(text_a=tf.constant([pair(i)[0]]),
                                                text_b=tf.constant([pair(i)[1]]))[
                                                    "labels"].numpy(),
    }


def main(argv):
    del argv
    print(machine.describe(), flush=True)
    if FLAGS.tf_threads:
        tf.config.threading.set_intra_op_parallelism_threads(FLAGS.tf_threads)
        tf.config.threading.set_inter_op_parallelism_threads(FLAGS.tf_threads)
    work_dir = FLAGS.output_dir or tempfile.mkdtemp(prefix="serving_profile_")
    keras.utils.set_random_seed(FLAGS.seed)
    model = checkpoints.from_pretrained(BertClassifier, CHECKPOINT, num_classes=2)
    vocab_file = os.path.join(CHECKPOINT, "vocab.txt")
    saved_model = export.export_classifier(
        model, Preprocessor(vocab_file, True, 128, text_pair=True),
        os.path.join(work_dir, "saved_model"), overwrite=True)
    pairs = dev_pairs()[:FLAGS.pairs]
    pair_rows = PairRows(vocab_file, 128)
    rows = [pair_rows(*pair) for pair in pairs]
    sides = make_sides(model, vocab_file, pairs, rows, saved_model)
    if FLAGS.profile_sides:
        sides = {name: sides[name] for name in ["model"] + FLAGS.profile_sides
                 if name in sides}
    for name, call in sides.items():  # XLA compiles every bucket here, not in the rounds
        for index in range(len(rows) if "xla" in name else 5):
            call(index)
    names, per = list(sides), FLAGS.calls_per_round
    medians = {name: [] for name in names}
    for number in range(FLAGS.rounds):
        for name in names if number % 2 == 0 else names[::-1]:
            latencies = []
            for call in range(per):
                started = time.perf_counter()
                sides[name](number * per + call)
                latencies.append(1000 * (time.perf_counter() - started))
            medians[name].append(np.median(latencies))
    print(f"\nBatch 1, {FLAGS.rounds} alternating rounds of {per} calls, {os.cpu_count()} "
          f"cores, TensorFlow threads {FLAGS.tf_threads or 'default'}; ratio: this side's "
          "round median over the bare model's")
    print("| side | median ms | / model (rounds) |\n| --- | --- | --- |")
    base = np.array(medians["model"])
    for name in names:
        ratios = np.array(medians[name]) / base
        print(f"| {name} | {np.median(medians[name]):.2f} | {np.median(ratios):.2f}x "
              f"({ratios.min():.2f}x to {ratios.max():.2f}x) |")


if __name__ == "__main__":
    app.run(main)
