"""Serving latency and throughput on this CPU, in one run: the raw-text SavedModel of an
MRPC-style classifier (`bert-export-model`, TF Serving's format), Hugging Face
transformers' `pipeline("text-classification")` on the same weights, and the LiteRT
float32 and int8 models (issue 29, deliverable 5).

Full command (the transformers side needs a Python with torch and transformers):

    .venv/bin/python bench/serving_latency.py --requests=200 --warmup=10 \
        --batch_sizes=1,32 --reference_python=/work/venv-ref/bin/python

Smoke test (the figures mean little):

    .venv/bin/python bench/serving_latency.py --requests=5 --warmup=1 --batch_sizes=1,4 \
        --reference_python=/work/venv-ref/bin/python

The model: `BertClassifier` (2 classes) on ../shared/data/checkpoints/uncased_L-6_H-384_A-12,
its head drawn at random from `--seed` (timing does not need a trained head). It is
written once as a Hugging Face folder (`bert_tf.serving.huggingface`, what
`--export_format=huggingface` writes), and that folder is the `--init_checkpoint` of the
other exports, through the function behind `bert-export-model`
(`export_checkpoint.export_from_checkpoint`): `--export_format=saved_model --text_pair`,
`--export_format=litert` and `--export_format=litert --quantize=int8`, all
`--max_seq_length=128`. So every side runs the very weights the pipeline loads.

Texts: the MRPC dev pairs (../shared/data/glue/MRPC/dev.tsv). Request i at batch size B
sends the pairs i*B .. i*B+B-1, cycling; `--warmup` untimed calls first, then
`--requests` calls each timed by wall clock (`time.perf_counter`), one after another.
Sides:

- SavedModel (raw text): `serving_default(text_a, text_b)` of `tf.saved_model.load`
  (tensorflow_text imported, as TF Serving links it): tokenization inside the graph,
  each batch padded to its longest row (at most 128); the call ends with the `labels`
  as numpy.
- SavedModel (ids): `serve_ids` on rows tokenized beforehand (tokenization not timed).
- transformers pipeline: `bench/reference_serving_latency.py` in `--reference_python`,
  timed the same way; its tokenizer (Rust) and post-processing into labels are inside
  the call; a batch is padded to its longest row (`--reference_padding`); torch threads =
  `os.cpu_count()` (`--reference_threads`). On a machine where other work runs, torch's
  OpenMP threads wait on each other: at 2 threads on a busy 2 cores a batch-1 call took
  2 to 25 times as long as at 1 thread (smoke, 2026-11-25).
- LiteRT float32 / int8: `ai_edge_litert`'s interpreter (`--litert_threads`), batch 1
  only (the model's row is [1, 128]). Timed twice: "ids" is one `invoke` of a row made
  beforehand; "text" includes the app-side tokenization with `FullTokenizer` (pure
  Python, as docs/export_litert.md's example) and packing into the row.

Printed: a markdown table (p50 / p99 ms per call and sequences/s at each batch size, the
folder's size on disk), the targets (SavedModel at least as fast as the pipeline at the
smallest and largest batch size; int8 LiteRT at least 2x float32 at batch 1: printed,
not asserted), and the outputs' check on the first `--check_texts` pairs (argmax equal
and logits within 1e-3 between the SavedModel and transformers; LiteRT float32 against
the SavedModel; int8's argmax). Also written to `<output_dir>/results.json`.
Needs the `litert-test` extra (ai-edge-litert). Not part of the tests.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

import keras
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  registers the WordPiece ops, as TF Serving links them
from absl import app, flags, logging

from bert_tf.models import BertClassifier
from bert_tf.serving import huggingface
from bert_tf.tasks import export_checkpoint
from bert_tf.tasks.classification import data as classification_data
from bert_tf.text import input_layout
from bert_tf.text.tokenization import FullTokenizer
from bert_tf.weights import checkpoints

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("BERT_TF_SHARED_DATA", os.path.join(REPO, "..", "shared", "data"))
CHECKPOINT = os.path.join(SHARED, "checkpoints", "uncased_L-6_H-384_A-12")
MRPC = os.path.join(SHARED, "glue", "MRPC")
LABELS = ["0", "1"]
LOGIT_TOLERANCE = 1e-3

flags.DEFINE_integer("requests", 200, "Timed calls at each batch size, for every side.")
flags.DEFINE_integer("warmup", 10, "Untimed calls before timing, at each batch size.")
flags.DEFINE_list("batch_sizes", ["1", "32"], "Batch sizes (pairs a call) of the "
                  "SavedModel and the pipeline; LiteRT runs batch 1.")
flags.DEFINE_string("output_dir", None, "Work folder for the exports and results.json "
                    "(default: a temporary one).")
flags.DEFINE_string("reference_python", None, "A Python with torch and transformers for "
                    "the pipeline side (default: that side is left out).")
flags.DEFINE_enum("reference_padding", "longest", ["longest", "max_length"],
                  "The pipeline's padding: longest (its own) or max_length (128, as the "
                  "SavedModel's rows).")
flags.DEFINE_integer("reference_threads", os.cpu_count(), "torch threads of the pipeline "
                     "side (default: os.cpu_count()).")
flags.DEFINE_integer("max_seq_length", 128, "Row length of every export.")
flags.DEFINE_integer("check_texts", 8, "Pairs whose outputs are compared across sides.")
flags.DEFINE_integer("seed", 1, "Seed of the random classifier head.")
flags.DEFINE_integer("litert_threads", os.cpu_count(), "LiteRT interpreter threads.")
FLAGS = flags.FLAGS


def import_interpreter():
    """ai_edge_litert's Interpreter, or exit naming the extra."""
    try:
        # pylint: disable-next=import-outside-toplevel
        from ai_edge_litert.interpreter import Interpreter
    except ModuleNotFoundError:
        sys.exit("serving_latency: ai-edge-litert is not installed: pip install -e "
                 ".[litert-test]")
    return Interpreter


def export_all(work_dir):
    """Exports one random-headed MRPC classifier to every format; {side: folder}."""
    keras.utils.set_random_seed(FLAGS.seed)
    model = checkpoints.from_pretrained(BertClassifier, CHECKPOINT, num_classes=len(LABELS))
    folders = {"huggingface": huggingface.export_huggingface(
        model, os.path.join(work_dir, "huggingface"), os.path.join(CHECKPOINT, "vocab.txt"),
        do_lower_case=True, label_names=LABELS, overwrite=True)}
    for name, export_format, quantize in (("saved_model", "saved_model", "none"),
                                          ("litert_float32", "litert", "none"),
                                          ("litert_int8", "litert", "int8")):
        folders[name] = export_checkpoint.export_from_checkpoint(export_checkpoint.ExportOptions(
            export_format=export_format, quantize=quantize, model_type="classifier",
            init_checkpoint=folders["huggingface"], label_names=LABELS, text_pair=True,
            max_seq_length=FLAGS.max_seq_length, export_dir=os.path.join(work_dir, name),
            overwrite=True))
    return folders


def folder_size(folder):
    """Bytes of every file under `folder`."""
    return sum(os.path.getsize(os.path.join(root, name))
               for root, _, names in os.walk(folder) for name in names)


def dev_pairs():
    """[(text_a, text_b)] of the MRPC dev set."""
    examples = classification_data.get_processor("MRPC").get_examples(MRPC, "dev")
    return [(example.text_a, example.text_b) for example in examples]


def batch_of(pairs, batch_size, call):
    """The pairs of request `call` at `batch_size`, cycling over `pairs`."""
    return [pairs[(call * batch_size + row) % len(pairs)] for row in range(batch_size)]


def time_calls(run_call, requests, warmup):
    """Latencies (ms) of `run_call(i)` for i < requests, after `warmup` untimed calls."""
    for call in range(warmup):
        run_call(call % requests)
    latencies = []
    for call in range(requests):
        started = time.perf_counter()
        run_call(call)
        latencies.append(1000 * (time.perf_counter() - started))
    return latencies


class PairRows:
    """App-side tokenization: a pair -> int32 input_ids, input_mask, segment_ids [1, S]."""

    def __init__(self, vocab_file, max_seq_length):
        self.tokenizer = FullTokenizer(vocab_file, do_lower_case=True)
        self.max_seq_length = max_seq_length

    def __call__(self, text_a, text_b):
        segments = input_layout.truncate_segments(self.tokenizer.tokenize(text_a),
                                                  self.tokenizer.tokenize(text_b),
                                                  self.max_seq_length)
        _, inputs = input_layout.pack_tokens(segments, self.tokenizer.convert_tokens_to_ids,
                                             self.max_seq_length)
        return {name: np.asarray([values], np.int32)
                for name, values in zip(("input_ids", "input_mask", "segment_ids"), inputs)}


def time_saved_model(folder, pairs, rows, batch_sizes):
    """{side: {batch size: latencies}} of the raw-text and ids signatures, and the
    raw-text logits of the first --check_texts pairs."""
    loaded = tf.saved_model.load(folder)
    text_fn, ids_fn = loaded.signatures["serving_default"], loaded.signatures["serve_ids"]

    def text_call(batch):
        outputs = text_fn(text_a=tf.constant([a for a, _ in batch]),
                          text_b=tf.constant([b for _, b in batch]))
        return outputs["labels"].numpy(), outputs["logits"].numpy()

    def ids_call(batch_rows):
        inputs = {name: tf.constant(np.concatenate([row[name] for row in batch_rows]))
                  for name in batch_rows[0]}
        return ids_fn(**inputs)["logits"].numpy()

    times = {"SavedModel, raw text": {}, "SavedModel serve_ids, ids": {}}
    for size in batch_sizes:
        times["SavedModel, raw text"][size] = time_calls(
            lambda call, size=size: text_call(batch_of(pairs, size, call)),
            FLAGS.requests, FLAGS.warmup)
        times["SavedModel serve_ids, ids"][size] = time_calls(
            lambda call, size=size: ids_call(batch_of(rows, size, call)),
            FLAGS.requests, FLAGS.warmup)
    return times, text_call(pairs[:FLAGS.check_texts])[1]


def time_litert(folder, name, pairs, rows, pair_rows):
    """{side: {1: latencies}} of one .tflite, ids and text, and its check logits."""
    interpreter = import_interpreter()(model_path=os.path.join(folder, "model.tflite"),
                                       num_threads=FLAGS.litert_threads)
    runner = interpreter.get_signature_runner("serving_default")
    times = {
        f"LiteRT {name}, ids": {1: time_calls(
            lambda call: runner(**rows[call % len(rows)]), FLAGS.requests, FLAGS.warmup)},
        f"LiteRT {name}, text (FullTokenizer)": {1: time_calls(
            lambda call: runner(**pair_rows(*pairs[call % len(pairs)])),
            FLAGS.requests, FLAGS.warmup)}}
    logits = np.concatenate([runner(**row)["logits"] for row in rows[:FLAGS.check_texts]])
    return times, logits


def time_reference(folder, pairs, work_dir, batch_sizes):
    """{side: {batch size: latencies}} and check logits of the transformers pipeline,
    run by bench/reference_serving_latency.py in --reference_python."""
    texts_file, output = (os.path.join(work_dir, name)
                          for name in ("texts.json", "reference.json"))
    with open(texts_file, "w", encoding="utf-8") as file:
        json.dump(pairs, file)
    command = [FLAGS.reference_python, os.path.join(REPO, "bench",
                                                    "reference_serving_latency.py"),
               f"--model_dir={folder}", f"--texts_file={texts_file}", f"--output={output}",
               f"--batch_sizes={','.join(map(str, batch_sizes))}",
               f"--requests={FLAGS.requests}", f"--warmup={FLAGS.warmup}",
               f"--check_texts={FLAGS.check_texts}",
               f"--max_seq_length={FLAGS.max_seq_length}",
               f"--padding={FLAGS.reference_padding}",
               f"--threads={FLAGS.reference_threads}"]
    subprocess.run(command, check=True)
    with open(output, encoding="utf-8") as file:
        result = json.load(file)
    side = f"transformers pipeline ({result['transformers']}, torch {result['torch']}, " \
           f"{result['torch_threads']} threads)"
    times = {side: {int(size): values for size, values in result["latencies_ms"].items()}}
    return times, np.asarray(result["check_logits"]), side


def summary(latencies, batch_size):
    """(p50 ms, p99 ms, sequences/s) of one side at one batch size."""
    latencies = np.asarray(latencies)
    return (np.percentile(latencies, 50), np.percentile(latencies, 99),
            batch_size * len(latencies) / (latencies.sum() / 1000))


def print_table(times, sizes, batch_sizes):
    """The markdown table: per side, p50 / p99 ms and seq/s at each batch size."""
    head = " | ".join(f"b{size} p50 ms | b{size} p99 ms | b{size} seq/s"
                      for size in batch_sizes)
    print(f"| side | size on disk | {head} |")
    print("| --- | --- |" + " --- |" * (3 * len(batch_sizes)))
    for side, by_size in times.items():
        cells = []
        for size in batch_sizes:
            if size in by_size:
                p50, p99, rate = summary(by_size[size], size)
                cells += [f"{p50:.1f}", f"{p99:.1f}", f"{rate:.1f}"]
            else:
                cells += ["-"] * 3
        print(f"| {side} | {sizes.get(side, '')} | {' | '.join(cells)} |")


def print_targets(times, reference_side, batch_sizes):
    """The issue's targets, printed with their figures (not asserted)."""
    ours = times["SavedModel, raw text"]
    if reference_side:
        theirs = times[reference_side]
        small, large = batch_sizes[0], batch_sizes[-1]
        ours_p50, theirs_p50 = summary(ours[small], small)[0], summary(theirs[small], small)[0]
        ours_rate, theirs_rate = summary(ours[large], large)[2], summary(theirs[large], large)[2]
        print(f"target SavedModel >= pipeline at batch {small}: p50 {ours_p50:.1f} ms "
              f"against {theirs_p50:.1f} ms ({theirs_p50 / ours_p50:.2f}x): "
              f"{'met' if ours_p50 <= theirs_p50 else 'NOT met'}")
        print(f"target SavedModel >= pipeline at batch {large}: {ours_rate:.1f} against "
              f"{theirs_rate:.1f} seq/s ({ours_rate / theirs_rate:.2f}x): "
              f"{'met' if ours_rate >= theirs_rate else 'NOT met'}")
    for kind in ("ids", "text (FullTokenizer)"):
        fp32 = summary(times[f"LiteRT float32, {kind}"][1], 1)[0]
        int8 = summary(times[f"LiteRT int8, {kind}"][1], 1)[0]
        print(f"target int8 >= 2x float32 (LiteRT, batch 1, {kind}): p50 {int8:.1f} against "
              f"{fp32:.1f} ms ({fp32 / int8:.2f}x): {'met' if fp32 >= 2 * int8 else 'NOT met'}")


def check_outputs(logits):
    """Prints the outputs' agreement with the SavedModel's raw-text logits; returns it."""
    ours = logits["SavedModel, raw text"]
    margin = float(np.abs(ours[:, 0] - ours[:, 1]).min())  # the random head's smallest
    checks = {}
    for side, other in logits.items():
        if side == "SavedModel, raw text":
            continue
        agree = int(np.sum(np.argmax(ours, 1) == np.argmax(other, 1)))
        largest = float(np.abs(ours - other).max())
        checks[side] = {"argmax_equal": agree, "pairs": len(ours),
                        "largest_logit_difference": largest}
        verdict = ("int8 is approximate: not checked" if "int8" in side else
                   "OK" if agree == len(ours) and largest <= LOGIT_TOLERANCE else
                   f"FAILED (expected every argmax equal, logits within {LOGIT_TOLERANCE})")
        print(f"check, {side} against the SavedModel: argmax equal on {agree} of "
              f"{len(ours)} pairs, largest logit difference {largest:.2e}: {verdict}")
    print(f"(the SavedModel's smallest margin between the two logits there: {margin:.2e})")
    return checks


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    import_interpreter()  # fail before any work
    batch_sizes = [int(size) for size in FLAGS.batch_sizes]
    work_dir = FLAGS.output_dir or tempfile.mkdtemp(prefix="serving_latency_")
    os.makedirs(work_dir, exist_ok=True)
    folders = export_all(work_dir)
    pairs = dev_pairs()
    pair_rows = PairRows(os.path.join(folders["saved_model"], "assets", "vocab.txt"),
                         FLAGS.max_seq_length)
    rows = [pair_rows(*pair) for pair in pairs]
    times, logits = {}, {}
    side_times, logits["SavedModel, raw text"] = time_saved_model(
        folders["saved_model"], pairs, rows, batch_sizes)
    times.update(side_times)
    sizes = {side: f"{folder_size(folders['saved_model']) / 1e6:.1f} MB"
             for side in side_times}
    for name in ("float32", "int8"):
        side_times, logits[f"LiteRT {name}"] = time_litert(
            folders[f"litert_{name}"], name, pairs, rows, pair_rows)
        times.update(side_times)
        sizes.update({side: f"{folder_size(folders[f'litert_{name}']) / 1e6:.1f} MB"
                      for side in side_times})
    reference_side = None
    if FLAGS.reference_python:
        side_times, logits["transformers pipeline"], reference_side = time_reference(
            folders["huggingface"], pairs, work_dir, batch_sizes)
        times.update(side_times)
        sizes[reference_side] = f"{folder_size(folders['huggingface']) / 1e6:.1f} MB"
    print(f"\nServing latency: MRPC dev pairs, max_seq_length {FLAGS.max_seq_length}, "
          f"{FLAGS.requests} timed calls a batch size after {FLAGS.warmup} warm-up, "
          f"{os.cpu_count()} CPU cores, TensorFlow {tf.__version__}, LiteRT threads "
          f"{FLAGS.litert_threads}; exports in {work_dir}")
    print_table(times, sizes, batch_sizes)
    print_targets(times, reference_side, batch_sizes)
    checks = check_outputs(logits)
    with open(os.path.join(work_dir, "results.json"), "w", encoding="utf-8") as file:
        json.dump({"latencies_ms": {side: {str(size): values for size, values in by.items()}
                                    for side, by in times.items()},
                   "sizes": sizes, "checks": checks, "flags": FLAGS.flag_values_dict()},
                  file, indent=1)


if __name__ == "__main__":
    app.run(main)
