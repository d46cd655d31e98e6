"""Speed: `bert_tf.TextClassifier.fit` against keras-hub's `BertTextClassifier.fit`, the same
weights (keras-hub loads our keras_hub export of the shared checkpoint), the same sentence
pairs, batch size and max_seq_length, each library as its docs tell a user to call it.

    .venv/bin/python bench/text_classifier_fit_bench.py --examples=300 --rounds=5

Each round fits one epoch with each library, the order alternating from round to round;
the figure is the median of the per-round ratios (keras-hub seconds / ours) with their
range, and each side's median seconds. Model loading is outside the timing (both load
the same weights once a round); the first batch's graph building is inside it, as a user
waits for it. Needs the keras-hub extra (`make install-extras`) and ../shared/data.
Not part of the test suite.
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time

import keras
import keras_hub
from absl import app, flags, logging

import bert_tf
import machine

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("BERT_TF_SHARED_DATA", os.path.join(REPO, "..", "shared", "data"))
CHECKPOINT = os.path.join(SHARED, "checkpoints", "uncased_L-6_H-384_A-12")

flags.DEFINE_integer("examples", 300, "MRPC training pairs (the first N).")
flags.DEFINE_integer("rounds", 5, "Alternating rounds.")
flags.DEFINE_integer("batch_size", 32, "Batch size of both.")
flags.DEFINE_integer("max_seq_length", 128, "Longest row of both.")
FLAGS = flags.FLAGS


def mrpc_pairs(count):
    """(texts_a, texts_b), labels of the first `count` MRPC training rows."""
    path = os.path.join(SHARED, "glue", "MRPC", "train.tsv")
    with open(path, encoding="utf-8") as file:
        rows = [line.rstrip("\n").split("\t") for line in file][1:count + 1]
    return ([r[3] for r in rows], [r[4] for r in rows]), [int(r[0]) for r in rows]


def export_keras_hub(folder):
    """Our keras_hub export of the shared checkpoint (what keras-hub then loads)."""
    command = [os.path.join(os.path.dirname(sys.executable), "bert-export-model"),
               f"--init_checkpoint={CHECKPOINT}", "--model_type=encoder",
               "--export_format=keras_hub", f"--export_dir={folder}"]
    subprocess.run(command, check=True)
    return folder


def time_ours(x, y, seed):
    model = bert_tf.TextClassifier.from_pretrained(
        CHECKPOINT, num_classes=2, max_seq_length=FLAGS.max_seq_length, seed=seed)
    started = time.perf_counter()
    model.fit(x, y, epochs=1, batch_size=FLAGS.batch_size, verbose=0)
    return time.perf_counter() - started


def time_keras_hub(x, y, preset, seed):
    keras.utils.set_random_seed(seed)
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor.from_preset(
        preset, sequence_length=FLAGS.max_seq_length)
    model = keras_hub.models.BertTextClassifier.from_preset(
        preset, num_classes=2, preprocessor=preprocessor)
    started = time.perf_counter()
    model.fit(x=x, y=y, batch_size=FLAGS.batch_size, epochs=1, verbose=0)
    return time.perf_counter() - started


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    print(machine.describe(), flush=True)
    x, y = mrpc_pairs(FLAGS.examples)
    preset = export_keras_hub(os.path.join(tempfile.mkdtemp(prefix="hub_"), "preset"))
    ours, hub, ratios = [], [], []
    for index in range(FLAGS.rounds):
        sides = [("ours", lambda: time_ours(x, y, index)),
                 ("keras_hub", lambda: time_keras_hub(x, y, preset, index))]
        if index % 2:
            sides.reverse()
        seconds = dict((name, run()) for name, run in sides)
        ours.append(seconds["ours"])
        hub.append(seconds["keras_hub"])
        ratios.append(seconds["keras_hub"] / seconds["ours"])
        print(f"round {index + 1}: ours {seconds['ours']:.1f} s, keras-hub "
              f"{seconds['keras_hub']:.1f} s, ratio {ratios[-1]:.2f}", flush=True)
    print(f"{machine.cpu_name()}, {machine.cores()} cores: fit of {len(y)} MRPC pairs, batch "
          f"{FLAGS.batch_size}, max_seq_length {FLAGS.max_seq_length}, 1 epoch: ours "
          f"{statistics.median(ours):.1f} s, keras-hub {statistics.median(hub):.1f} s "
          f"(medians); keras-hub / ours {statistics.median(ratios):.2f}x "
          f"(range {min(ratios):.2f}-{max(ratios):.2f}, {len(ratios)} rounds)")


if __name__ == "__main__":
    app.run(main)
