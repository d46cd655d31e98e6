"""Real check of the ONNX exports: an MRPC run exported as float32 and as dynamic int8
ONNX (bert-export-model --export_format=onnx [--quantize=int8]), run by ONNX Runtime on
the MRPC dev pairs: dev accuracy of both (int8 beside float32), how often their
predictions agree, the largest logit difference, the file sizes, and their batch-1
latency (one `session.run` of a row cut to its tokens) in alternating rounds (ABBA) of
one process.

    .venv/bin/python bench/onnx_check.py --model_dir=/tmp/mrpc   # a bert-run-classifier run

The run: an MRPC fine-tuning output_dir (`bert-run-classifier --task_name=MRPC`, or
bench/litert_check.py's, which fine-tunes one). The dev rows are the library's MRPC
features (`bench/litert_check.py`'s `dev_rows`, as the run evaluates them). Needs the
`onnx` extra (`pip install -e .[onnx]`). Not part of the tests.
"""

import os
import tempfile
import time

import numpy as np
from absl import app, flags, logging

import litert_check  # noqa: E402  its dev rows and flags (--model_dir, --max_seq_length, ...)
import machine

flags.DEFINE_integer("rounds", 10, "Alternating latency rounds (float32, int8).")
flags.DEFINE_integer("calls_per_round", 20, "Timed batch-1 calls of each model a round.")
flags.DEFINE_integer("ort_threads", 0, "ONNX Runtime intra-op threads (0: its default).")
FLAGS = flags.FLAGS
QUANTIZATIONS = ("none", "int8")


def session(folder):
    import onnxruntime as ort  # pylint: disable=import-outside-toplevel
    options = ort.SessionOptions()
    if FLAGS.ort_threads:
        options.intra_op_num_threads = FLAGS.ort_threads
    return ort.InferenceSession(os.path.join(folder, "model.onnx"), options,
                                providers=["CPUExecutionProvider"])


def trimmed(row):
    """A [1, S] row cut to its tokens, as an app sends one pair."""
    length = int(row["input_mask"].sum())
    return {name: value[:, :length] for name, value in row.items()}


def latency_rounds(sessions, rows):
    """{quantize: [median ms of each round]}: batch-1 calls, ABBA order."""
    names = list(sessions)
    for name in names:
        for row in rows[:5]:
            sessions[name].run(["logits"], trimmed(row))
    medians = {name: [] for name in names}
    per = FLAGS.calls_per_round
    for number in range(FLAGS.rounds):
        for name in names if number % 2 == 0 else names[::-1]:
            latencies = []
            for call in range(per):
                feed = trimmed(rows[(number * per + call) % len(rows)])
                started = time.perf_counter()
                sessions[name].run(["logits"], feed)
                latencies.append(1000 * (time.perf_counter() - started))
            medians[name].append(float(np.median(latencies)))
    return medians


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    print(machine.describe(), flush=True)
    if not FLAGS.model_dir:
        raise app.UsageError("--model_dir: an MRPC run (bench/litert_check.py fine-tunes "
                             "one)")
    work_dir = FLAGS.output_dir or tempfile.mkdtemp(prefix="onnx_check_")
    folders = {quantize: litert_check.export(FLAGS.model_dir, work_dir, quantize, "onnx")
               for quantize in QUANTIZATIONS}
    rows, labels = litert_check.dev_rows(FLAGS.model_dir)
    sessions = {quantize: session(folder) for quantize, folder in folders.items()}
    logits = {quantize: np.concatenate([sess.run(["logits"], trimmed(row))[0]
                                        for row in rows])
              for quantize, sess in sessions.items()}
    medians = latency_rounds(sessions, rows)
    ratios = np.array(medians["none"]) / np.array(medians["int8"])
    print(f"\nMRPC dev: {len(rows)} pairs; model {FLAGS.model_dir}; ONNX Runtime, "
          f"{os.cpu_count()} cores; batch-1 latency in {FLAGS.rounds} alternating rounds of "
          f"{FLAGS.calls_per_round} calls")
    print("| model | file size | dev accuracy | batch 1 median ms |")
    print("| --- | --- | --- | --- |")
    for quantize, name in (("none", "float32"), ("int8", "int8 (dynamic)")):
        accuracy = 100 * float(np.mean(np.argmax(logits[quantize], 1) == labels))
        size = os.path.getsize(os.path.join(folders[quantize], "model.onnx")) / 1e6
        print(f"| ONNX {name} | {size:.1f} MB | {accuracy:.2f} | "
              f"{np.median(medians[quantize]):.1f} |")
    same = float(np.mean(np.argmax(logits["none"], 1) == np.argmax(logits["int8"], 1)))
    print(f"int8 against float32: the same prediction on {100 * same:.1f}% of the pairs, "
          f"largest logit difference {np.abs(logits['none'] - logits['int8']).max():.3f}; "
          f"speed {np.median(ratios):.2f}x (rounds {ratios.min():.2f}x to "
          f"{ratios.max():.2f}x; target 1.8x: {'met' if np.median(ratios) >= 1.8 else 'NOT met'})")


if __name__ == "__main__":
    app.run(main)
