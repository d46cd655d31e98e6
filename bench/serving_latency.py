"""Serving latency and throughput on this CPU, every side timed in the same alternating
rounds (ABBA) of one run: the SavedModel of an MRPC-style classifier (`bert-export-model`,
TF Serving's format) through its raw-text and ids signatures, ONNX Runtime on the
transformers export (the runtime people compare us with), ONNX Runtime on our own
`--export_format=onnx` (float32 and int8), and optionally transformers' pipeline and
the LiteRT models (issues 29 and 41).

    .venv/bin/python bench/serving_latency.py --rounds=20 --calls_per_round=5 \
        --batch_sizes=1,32 --reference_python=.venv/bin/python

Smoke test (the figures mean little):

    .venv/bin/python bench/serving_latency.py --rounds=2 --calls_per_round=2 \
        --batch_sizes=1,4 --reference_python=.venv/bin/python

The model: `BertClassifier` (2 classes) on ../shared/data/checkpoints/uncased_L-6_H-384_A-12,
its head drawn at random from `--seed` (timing does not need a trained head). It is
written once as a Hugging Face folder (what `--export_format=huggingface` writes), and
that folder is the `--init_checkpoint` of the other exports, through the function behind
`bert-export-model` (`export_checkpoint.export_from_checkpoint`): `saved_model
--text_pair`, `onnx`, `onnx --quantize=int8` (and `litert`), all `--max_seq_length=128`.
So every side runs the very weights transformers loads.

Texts: the MRPC dev pairs (../shared/data/glue/MRPC/dev.tsv); call i at batch size B
sends the pairs i*B .. i*B+B-1, cycling. `--warmup` untimed calls a side first. Then
`--rounds` rounds at each batch size: in each, every side makes `--calls_per_round`
calls, each timed by wall clock (`time.perf_counter`), the sides in one order in even
rounds and in the reverse order in odd ones (ABBA), so that the load of a shared machine
falls on all of them alike. Sides (`--sides`):

- `saved_model_text`: `serving_default(text_a, text_b)` of `tf.saved_model.load`
  (tensorflow_text imported, as TF Serving links it): WordPiece in the graph, each batch
  computed up to its longest row (at most 128); the call ends with the labels as numpy.
- `saved_model_ids`: `serve_ids` on rows tokenized beforehand, padded to 128 (not timed).
- `ort_hf`, `ort_onnx`, `ort_onnx_int8`, `pipeline`: bench/reference_serving_latency.py,
  a worker in `--reference_python` driven round by round (its docstring says what each
  times: the folder's Rust tokenizer inside the call, a batch padded to its longest row).
- `litert_float32`, `litert_int8` (batch 1 only, `ai-edge-litert`): one `invoke` of a
  row tokenized and packed in the call by `FullTokenizer`.
- `baseline_text`, `baseline_ids`: the two SavedModel sides on `--baseline_saved_model`,
  the same weights exported by another commit (before / after in one run):

      .venv/bin/python bench/serving_latency.py --output_dir=/tmp/sl --rounds=1 \
          --sides=saved_model_text                      # writes /tmp/sl/huggingface
      (in the other checkout) bert-export-model --export_format=saved_model \
          --init_checkpoint=/tmp/sl/huggingface --model_type=classifier \
          --label_names=0,1 --text_pair --export_dir=/tmp/sl/saved_model_before
      .venv/bin/python bench/serving_latency.py --output_dir=/tmp/sl \
          --baseline_saved_model=/tmp/sl/saved_model_before \
          --sides=saved_model_text,saved_model_ids,baseline_text,baseline_ids

Printed: the machine first (bench/machine.py: CPU model, AVX2 / AVX-512, cores, whether
TensorFlow uses oneDNN; the verdicts flip between CPUs, docs/serving.md "Which export on
which CPU"); a markdown table (p50 / p99 ms of all calls and sequences/s at each batch
size, size on disk); for each comparison the median of its round ratios (the other side's
median call over ours, in the same round) with their range; the issue's targets with
those figures (printed, not asserted); and the outputs' check on the first
`--check_texts` pairs against `saved_model_text` (else the first float side of
`--sides`): argmax equal, logits within 1e-3; int8 argmax only. All figures also go to
`<output_dir>/results.json`.
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

import machine
from bert_tf.models import BertClassifier
from bert_tf.serving import huggingface
from bert_tf.runs import export_checkpoint
from bert_tf.tasks.classification import data as classification_data
from bert_tf.text import input_layout
from bert_tf.text.preprocessor import Preprocessor
from bert_tf.text.tokenization import FullTokenizer
from bert_tf.weights import checkpoints

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("BERT_TF_SHARED_DATA", os.path.join(REPO, "..", "shared", "data"))
CHECKPOINT = os.path.join(SHARED, "checkpoints", "uncased_L-6_H-384_A-12")
MRPC = os.path.join(SHARED, "glue", "MRPC")
LABELS = ["0", "1"]
LOGIT_TOLERANCE = 1e-3
LOCAL_SIDES = ("saved_model_text", "saved_model_ids", "litert_float32", "litert_int8",
               "baseline_text", "baseline_ids")
REMOTE_SIDES = ("ort_hf", "ort_onnx", "ort_onnx_int8", "pipeline")
# The export folder each side runs (the others: the folder of the side's own name).
FOLDER_OF = {"saved_model_text": "saved_model", "saved_model_ids": "saved_model",
             "ort_hf": "huggingface", "pipeline": "huggingface", "ort_onnx": "onnx",
             "ort_onnx_int8": "onnx_int8", "baseline_text": "baseline",
             "baseline_ids": "baseline"}
# (name, faster side, slower side, least ratio slower / faster, batch sizes: all or 1)
TARGETS = (
    ("SavedModel (text) at least as fast as ONNX Runtime (HF export)", "saved_model_text",
     "ort_hf", 1.0, "first"),
    ("SavedModel (text) at least 1.1x ONNX Runtime (HF export)", "saved_model_text",
     "ort_hf", 1.1, "last"),
    ("--export_format=onnx no slower than the HF export, both on ONNX Runtime", "ort_onnx",
     "ort_hf", 1.0, "all"),
    ("int8 at least 1.8x float32 (--export_format=onnx on ONNX Runtime)", "ort_onnx_int8",
     "ort_onnx", 1.8, "all"),
    ("SavedModel (ids) against ONNX Runtime (HF export; tokenization outside ours)",
     "saved_model_ids", "ort_hf", None, "all"),
    ("SavedModel (text) against transformers' pipeline", "saved_model_text", "pipeline",
     None, "all"),
    ("LiteRT int8 at least 2x float32", "litert_int8", "litert_float32", 2.0, "first"),
    ("serving_default against --baseline_saved_model's", "saved_model_text",
     "baseline_text", None, "all"),
    ("serve_ids against --baseline_saved_model's", "saved_model_ids", "baseline_ids", None,
     "all"),
)

flags.DEFINE_integer("rounds", 20, "Alternating rounds at each batch size.")
flags.DEFINE_integer("calls_per_round", 5, "Timed calls of each side in a round.")
flags.DEFINE_integer("warmup", 5, "Untimed calls of each side before the rounds.")
flags.DEFINE_list("batch_sizes", ["1", "32"], "Batch sizes (pairs a call).")
flags.DEFINE_list("sides", ["saved_model_text", "saved_model_ids", "ort_hf", "ort_onnx",
                            "ort_onnx_int8"],
                  f"Of {', '.join(LOCAL_SIDES + REMOTE_SIDES)}.")
flags.DEFINE_string("output_dir", None, "Work folder for the exports and results.json "
                    "(default: a temporary one).")
flags.DEFINE_string("baseline_saved_model", None, "A SavedModel of the same weights "
                    "exported by another commit (from <output_dir>/huggingface, which "
                    "every run writes alike): the sides baseline_text and baseline_ids.")
flags.DEFINE_string("reference_python", None, "A Python with torch, transformers and "
                    "onnxruntime for the ort_* and pipeline sides.")
flags.DEFINE_integer("reference_threads", os.cpu_count(), "torch threads of `pipeline`.")
flags.DEFINE_integer("ort_threads", 0, "ONNX Runtime intra-op threads (0: its default).")
flags.DEFINE_integer("max_seq_length", 128, "Row length of every export.")
flags.DEFINE_integer("check_texts", 8, "Pairs whose outputs are compared across sides.")
flags.DEFINE_integer("seed", 1, "Seed of the random classifier head.")
flags.DEFINE_integer("litert_threads", os.cpu_count(), "LiteRT interpreter threads.")
FLAGS = flags.FLAGS


def export_all(work_dir, sides):
    """Exports one random-headed MRPC classifier to the formats `sides` need."""
    keras.utils.set_random_seed(FLAGS.seed)
    model = checkpoints.from_pretrained(BertClassifier, CHECKPOINT, num_classes=len(LABELS))
    folders = {"huggingface": huggingface.export_huggingface(
        model, Preprocessor(os.path.join(CHECKPOINT, "vocab.txt"), True),
        os.path.join(work_dir, "huggingface"), label_names=LABELS, overwrite=True)}
    wanted = [("saved_model", "saved_model", "none")]
    wanted += [(name, fmt, quantize) for name, fmt, quantize in (
        ("onnx", "onnx", "none"), ("onnx_int8", "onnx", "int8"),
        ("litert_float32", "litert", "none"), ("litert_int8", "litert", "int8"))
        if any(side.endswith(name) for side in sides)]
    for name, export_format, quantize in wanted:
        folders[name] = export_checkpoint.export_from_checkpoint(
            export_checkpoint.ExportOptions(
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


def saved_model_calls(folder, rows):
    """(raw-text call, ids call) of the SavedModel in `folder`: batch of pairs -> logits;
    `rows`: pair -> its ids, tokenized beforehand."""
    loaded = tf.saved_model.load(folder)
    text_fn, ids_fn = loaded.signatures["serving_default"], loaded.signatures["serve_ids"]

    def text_call(batch):
        outputs = text_fn(text_a=tf.constant([a for a, _ in batch]),
                          text_b=tf.constant([b for _, b in batch]))
        outputs["labels"].numpy()
        return outputs["logits"].numpy()

    def ids_call(batch):
        inputs = {name: tf.constant(np.concatenate([rows[pair][name] for pair in batch]))
                  for name in ("input_ids", "input_mask", "segment_ids")}
        return ids_fn(**inputs)["logits"].numpy()

    return text_call, ids_call


def local_sides(folders, pairs, names):
    """{side: call(pairs) -> logits [B, C]} of the sides that run in this process."""
    pair_rows = PairRows(os.path.join(folders["saved_model"], "assets", "vocab.txt"),
                         FLAGS.max_seq_length)
    rows = {pair: pair_rows(*pair) for pair in pairs}  # tokenized beforehand
    sides = dict(zip(("saved_model_text", "saved_model_ids"),
                     saved_model_calls(folders["saved_model"], rows)))
    if FLAGS.baseline_saved_model:
        sides.update(zip(("baseline_text", "baseline_ids"),
                         saved_model_calls(FLAGS.baseline_saved_model, rows)))
    for name in ("litert_float32", "litert_int8"):
        if name in names:
            # pylint: disable-next=import-outside-toplevel
            from ai_edge_litert.interpreter import Interpreter
            runner = Interpreter(model_path=os.path.join(folders[name], "model.tflite"),
                                 num_threads=FLAGS.litert_threads).get_signature_runner()
            sides[name] = lambda batch, runner=runner: runner(**pair_rows(*batch[0]))["logits"]
    return {name: side for name, side in sides.items() if name in names}


class Worker:
    """bench/reference_serving_latency.py in --reference_python, one request a line."""

    def __init__(self, folders, texts_file, work_dir, names):
        command = [FLAGS.reference_python,
                   os.path.join(REPO, "bench", "reference_serving_latency.py"),
                   f"--model_dir={folders['huggingface']}", f"--texts_file={texts_file}",
                   f"--work_dir={work_dir}", f"--sides={','.join(names)}",
                   f"--max_seq_length={FLAGS.max_seq_length}",
                   f"--threads={FLAGS.reference_threads}", f"--ort_threads={FLAGS.ort_threads}"]
        command += [f"--{key}_dir={folders[key]}" for key in ("onnx", "onnx_int8")
                    if key in folders]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        self.ask(None)  # waits for {"ready": ...}

    def ask(self, request):
        if request is not None:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("bench/reference_serving_latency.py ended without an answer "
                               "(see its messages above)")
        return json.loads(line)

    def close(self):
        self.process.stdin.close()
        self.process.wait()


def time_side(side, worker, local, pairs, size, calls):
    """Latencies (ms) of `side` making `calls` at batch `size`."""
    if side not in local:
        return worker.ask({"side": side, "batch_size": size, "calls": calls})["latencies_ms"]
    latencies = []
    for call in calls:
        batch = [pairs[(call * size + row) % len(pairs)] for row in range(size)]
        started = time.perf_counter()
        local[side](batch)
        latencies.append(1000 * (time.perf_counter() - started))
    return latencies


def run_rounds(names, worker, local, pairs, size):
    """{side: [per-round lists of latencies]} at batch `size` (module docstring)."""
    names = [name for name in names if size == 1 or not name.startswith("litert")]
    for side in names:
        time_side(side, worker, local, pairs, size, list(range(FLAGS.warmup)))
    rounds = {side: [] for side in names}
    per = FLAGS.calls_per_round
    for number in range(FLAGS.rounds):
        order = names if number % 2 == 0 else names[::-1]
        calls = [FLAGS.warmup + number * per + call for call in range(per)]
        for side in order:
            rounds[side].append(time_side(side, worker, local, pairs, size, calls))
    return rounds


def summary(rounds, batch_size):
    """(p50 ms, p99 ms, sequences/s) of all the calls of one side at one batch size."""
    latencies = np.concatenate(rounds)
    return (np.percentile(latencies, 50), np.percentile(latencies, 99),
            batch_size * len(latencies) / (latencies.sum() / 1000))


def round_ratios(times, fast, slow, size):
    """Per round: slow side's median call over the fast side's; None without both."""
    by_size = {side: by.get(size) for side, by in times.items()}
    if by_size.get(fast) is None or by_size.get(slow) is None:
        return None
    return np.array([np.median(s) / np.median(f)
                     for f, s in zip(by_size[fast], by_size[slow])])


def print_table(times, sizes, batch_sizes):
    """The markdown table: per side, p50 / p99 ms and seq/s at each batch size."""
    head = " | ".join(f"b{size} p50 ms | b{size} p99 ms | b{size} seq/s"
                      for size in batch_sizes)
    print(f"| side | size on disk | {head} |")
    print("| --- | --- |" + " --- |" * (3 * len(batch_sizes)))
    for side, by_size in times.items():
        cells = []
        for size in batch_sizes:
            cells += ([f"{value:.1f}" for value in summary(by_size[size], size)]
                      if size in by_size else ["-"] * 3)
        print(f"| {side} | {sizes.get(side, '')} | {' | '.join(cells)} |")


def print_targets(times, batch_sizes):
    """Each comparison's median round ratio and range, and the targets (not asserted)."""
    results = []
    for name, fast, slow, least, which in TARGETS:
        chosen = {"first": batch_sizes[:1], "last": batch_sizes[-1:]}.get(which, batch_sizes)
        for size in chosen:
            ratios = round_ratios(times, fast, slow, size)
            if ratios is None:
                continue
            median = float(np.median(ratios))
            verdict = "" if least is None else (
                f": target {least}x {'met' if median >= least else 'NOT met'}")
            print(f"{name}, batch {size}: {slow} / {fast} = {median:.2f}x (rounds "
                  f"{ratios.min():.2f}x to {ratios.max():.2f}x){verdict}")
            results.append({"comparison": name, "batch_size": size, "median": median,
                            "low": float(ratios.min()), "high": float(ratios.max()),
                            "target": least})
    return results


def check_reference(sides):
    """The side the others are checked against: `saved_model_text`, else the first
    float side; None with fewer than two sides."""
    floats = [side for side in sides if "int8" not in side]
    if len(sides) < 2 or not floats:
        return None
    return "saved_model_text" if "saved_model_text" in sides else floats[0]


def check_outputs(logits):
    """Prints each side's agreement with the reference side's logits; returns it."""
    reference = check_reference(list(logits))
    if reference is None:
        print(f"check: skipped, nothing to check {', '.join(logits)} against (it needs two "
              "sides, one of them float)")
        return {}
    ours = np.asarray(logits[reference])
    checks = {}
    for side, other in logits.items():
        if side == reference:
            continue
        other = np.asarray(other)
        agree = int(np.sum(np.argmax(ours, 1) == np.argmax(other, 1)))
        largest = float(np.abs(ours - other).max())
        checks[side] = {"against": reference, "argmax_equal": agree, "pairs": len(ours),
                        "largest_logit_difference": largest}
        verdict = ("int8 is approximate: argmax only" if "int8" in side else
                   "OK" if agree == len(ours) and largest <= LOGIT_TOLERANCE else
                   f"FAILED (expected every argmax equal, logits within {LOGIT_TOLERANCE})")
        print(f"check, {side} against {reference}: argmax equal on {agree} of "
              f"{len(ours)} pairs, largest logit difference {largest:.2e}: {verdict}")
    return checks


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    names = list(FLAGS.sides)
    unknown = sorted(set(names) - set(LOCAL_SIDES + REMOTE_SIDES))
    remote = [name for name in names if name in REMOTE_SIDES]
    baseline = [name for name in names if name.startswith("baseline")]
    if unknown or (remote and not FLAGS.reference_python):
        sys.exit(f"serving_latency: unknown sides {unknown}" if unknown else
                 f"serving_latency: sides {remote} need --reference_python")
    if baseline and not FLAGS.baseline_saved_model:
        sys.exit(f"serving_latency: sides {baseline} need --baseline_saved_model")
    print(machine.describe(), flush=True)
    batch_sizes = [int(size) for size in FLAGS.batch_sizes]
    work_dir = FLAGS.output_dir or tempfile.mkdtemp(prefix="serving_latency_")
    os.makedirs(work_dir, exist_ok=True)
    folders = export_all(work_dir, names)
    pairs = [tuple(pair) for pair in dev_pairs()]
    local = local_sides(folders, pairs, names)
    texts_file = os.path.join(work_dir, "texts.json")
    with open(texts_file, "w", encoding="utf-8") as file:
        json.dump(pairs, file)
    worker = Worker(folders, texts_file, work_dir, remote) if remote else None
    times = {name: {} for name in names}
    for size in batch_sizes:
        for side, rounds in run_rounds(names, worker, local, pairs, size).items():
            times[side][size] = rounds
    check = {name: np.concatenate([side([pair]) for pair in pairs[:FLAGS.check_texts]])
             for name, side in local.items()}
    if worker:
        check.update(worker.ask({"check": FLAGS.check_texts})["logits"])
        versions = worker.ask({"versions": True})
        worker.close()
    else:
        versions = {}
    folders["baseline"] = FLAGS.baseline_saved_model
    sizes = {side: f"{folder_size(folders[FOLDER_OF.get(side, side)]) / 1e6:.1f} MB"
             for side in names}
    print(f"\nServing latency: MRPC dev pairs, max_seq_length {FLAGS.max_seq_length}, "
          f"{FLAGS.rounds} alternating rounds of {FLAGS.calls_per_round} calls a side, "
          f"TensorFlow {tf.__version__}, {versions}; exports in {work_dir}\n"
          f"{machine.describe()}")
    print_table(times, sizes, batch_sizes)
    targets = print_targets(times, batch_sizes)
    checks = check_outputs(check)
    with open(os.path.join(work_dir, "results.json"), "w", encoding="utf-8") as file:
        json.dump({"latencies_ms": {side: {str(size): rounds for size, rounds in by.items()}
                                    for side, by in times.items()},
                   "targets": targets, "sizes": sizes, "checks": checks,
                   "versions": versions, "machine": machine.describe(),
                   "flags": FLAGS.flag_values_dict()}, file, indent=1)


if __name__ == "__main__":
    app.run(main)
