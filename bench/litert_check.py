"""Real check of the LiteRT exports: an MRPC classifier as float32 and as dynamic-range
int8 .tflite (bert-export-model --export_format=litert [--quantize=int8]), run by the
LiteRT interpreter (ai-edge-litert) on the MRPC dev pairs: dev accuracy of both (target:
int8 within 1 point of float32), file size, and latency at batch 1 (p50 / p99 of one
`invoke` of a [1, max_seq_length] row) on this CPU. No fine-tuning of its own is needed
when `--model_dir` names an MRPC run; otherwise the script fine-tunes the shared 6-layer
uncased BERT with the library first (the reference recipe of glue_finetune_check.py).

    .venv/bin/python bench/litert_check.py                        # fine-tune, export, check
    .venv/bin/python bench/litert_check.py --model_dir=/tmp/mrpc  # a bert-run-classifier run

Smoke test (a few steps, a few dev pairs; the figures mean nothing):

    .venv/bin/python bench/litert_check.py --train_examples=64 --epochs=0.5 \
      --dev_examples=16 --latency_runs=20

Reads ../shared/data (checkpoints/uncased_L-6_H-384_A-12, glue/MRPC). The dev rows are
the library's MRPC features (`convert_examples_to_features`, as the run evaluates them).
Needs the `litert-test` extra (`pip install -e .[litert-test]`). Not part of the tests.
"""

import os
import sys
import tempfile
import time

import numpy as np
from absl import app, flags, logging

import machine
from bert_tf.runs import export_checkpoint
from bert_tf.tasks.classification import data as classification_data
from bert_tf.tasks.classification import task as classification_task
from bert_tf.tasks.classification.options import ClassifierOptions
from bert_tf.text.tokenization import FullTokenizer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("BERT_TF_SHARED_DATA", os.path.join(REPO, "..", "shared", "data"))
CHECKPOINT = os.path.join(SHARED, "checkpoints", "uncased_L-6_H-384_A-12")
MRPC = os.path.join(SHARED, "glue", "MRPC")
QUANTIZATIONS = ("none", "int8")

flags.DEFINE_string("model_dir", None, "An MRPC fine-tuning output_dir (bert-run-classifier "
                                       "--task_name=MRPC); default: fine-tune one here.")
flags.DEFINE_string("output_dir", None, "Work folder (default: a temporary one).")
flags.DEFINE_integer("train_examples", 0, "Fine-tune on the first N training pairs (0: all).")
flags.DEFINE_float("epochs", 3.0, "Fine-tuning epochs.")
flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate.")
flags.DEFINE_integer("batch_size", 32, "Training batch size.")
flags.DEFINE_integer("max_seq_length", 128, "Row length of the .tflite models.")
flags.DEFINE_integer("seed", 1, "Fine-tuning seed.")
flags.DEFINE_integer("dev_examples", 0, "Score the first N dev pairs (0: all 408).")
flags.DEFINE_integer("latency_runs", 200, "Timed batch-1 invocations per model (after "
                                          "--warmup_runs), cycling over the dev rows.")
flags.DEFINE_integer("warmup_runs", 10, "Untimed invocations before timing.")
flags.DEFINE_integer("num_threads", None, "LiteRT interpreter threads (default: its own).")
FLAGS = flags.FLAGS


def import_interpreter():
    """ai_edge_litert's Interpreter, or exit naming the extra."""
    try:
        # pylint: disable-next=import-outside-toplevel
        from ai_edge_litert.interpreter import Interpreter
    except ModuleNotFoundError:
        sys.exit("litert_check: ai-edge-litert is not installed: pip install -e "
                 ".[litert-test]")
    return Interpreter


def subset_data_dir(count, work_dir):
    """MRPC with only the first `count` training pairs (the dev file whole)."""
    data_dir = os.path.join(work_dir, "data")
    os.makedirs(data_dir, exist_ok=True)
    with open(os.path.join(MRPC, "dev.tsv"), encoding="utf-8") as source, \
            open(os.path.join(data_dir, "dev.tsv"), "w", encoding="utf-8") as target:
        target.write(source.read())
    with open(os.path.join(MRPC, "train.tsv"), encoding="utf-8") as source, \
            open(os.path.join(data_dir, "train.tsv"), "w", encoding="utf-8") as target:
        for index, line in enumerate(source):
            if index > count:  # the header and `count` pairs
                break
            target.write(line)
    return data_dir


def fine_tune(work_dir):
    """Fine-tunes MRPC with the library; returns (output_dir, the run's dev accuracy)."""
    data_dir = subset_data_dir(FLAGS.train_examples, work_dir) if FLAGS.train_examples else MRPC
    options = ClassifierOptions(
        task_name="MRPC", data_dir=data_dir, init_checkpoint=CHECKPOINT,
        output_dir=os.path.join(work_dir, "mrpc"), do_lower_case=True, do_train=True,
        do_eval=True, max_seq_length=FLAGS.max_seq_length, train_batch_size=FLAGS.batch_size,
        eval_batch_size=64, learning_rate=FLAGS.learning_rate, num_train_epochs=FLAGS.epochs,
        warmup_proportion=0.1, save_checkpoints_steps=100000, steps_per_loop=10,
        seed=FLAGS.seed)
    started = time.time()
    results = classification_task.run(options)
    print(f"fine-tuned MRPC in {time.time() - started:.0f} s: {results['global_step']} "
          f"steps, dev accuracy (Keras) {results['eval_accuracy']:.4f}", flush=True)
    return options.output_dir, results["eval_accuracy"]


def export(model_dir, work_dir, quantize, export_format="litert"):
    """The folder of the `export_format` model of `model_dir` (float32, or int8 with
    quantize="int8"); bench/onnx_check.py exports its ONNX files through it."""
    return export_checkpoint.export_from_checkpoint(export_checkpoint.ExportOptions(
        export_format=export_format, quantize=quantize, model_type="classifier",
        init_checkpoint=model_dir, max_seq_length=FLAGS.max_seq_length, text_pair=True,
        export_dir=os.path.join(work_dir, f"{export_format}_{quantize}"), overwrite=True))


def dev_rows(model_dir):
    """(features [N] of dicts int32 [1, S], label ids [N]) of the MRPC dev pairs."""
    processor = classification_data.get_processor("MRPC")
    examples = processor.get_examples(MRPC, "dev")
    if FLAGS.dev_examples:
        examples = examples[:FLAGS.dev_examples]
    tokenizer = FullTokenizer(os.path.join(model_dir, "vocab.txt"), do_lower_case=True)
    features = classification_data.convert_examples_to_features(
        examples, processor.get_labels(), FLAGS.max_seq_length, tokenizer)
    rows = [{name: np.asarray([getattr(feature, name)], np.int32)
             for name in ("input_ids", "input_mask", "segment_ids")} for feature in features]
    return rows, np.array([feature.label_id for feature in features])


def measure(folder, rows, labels):
    """Dev accuracy, logits and batch-1 latencies (ms) of the .tflite in `folder`."""
    interpreter = import_interpreter()(model_path=os.path.join(folder, "model.tflite"),
                                       num_threads=FLAGS.num_threads)
    runner = interpreter.get_signature_runner("serving_default")
    logits = np.concatenate([runner(**row)["logits"] for row in rows])  # [N, 2]
    for index in range(FLAGS.warmup_runs):
        runner(**rows[index % len(rows)])
    latencies = []
    for index in range(FLAGS.latency_runs):
        started = time.perf_counter()
        runner(**rows[index % len(rows)])
        latencies.append(1000 * (time.perf_counter() - started))
    accuracy = float(np.mean(np.argmax(logits, axis=1) == labels))
    return accuracy, logits, np.asarray(latencies)


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    print(machine.describe(), flush=True)
    import_interpreter()  # fail before any work
    work_dir = FLAGS.output_dir or tempfile.mkdtemp(prefix="litert_check_")
    keras_accuracy = None
    model_dir = FLAGS.model_dir
    if not model_dir:
        model_dir, keras_accuracy = fine_tune(work_dir)
    rows, labels = dev_rows(model_dir)
    results = {}
    for quantize in QUANTIZATIONS:
        folder = export(model_dir, work_dir, quantize)
        size = os.path.getsize(os.path.join(folder, "model.tflite"))
        results[quantize] = (size,) + measure(folder, rows, labels)
    print(f"\nMRPC dev: {len(rows)} pairs, max_seq_length {FLAGS.max_seq_length}; model "
          f"{model_dir}; latency of one [1, {FLAGS.max_seq_length}] row on this CPU "
          f"({os.cpu_count()} cores, num_threads={FLAGS.num_threads or 'default'}), "
          f"{FLAGS.latency_runs} runs after {FLAGS.warmup_runs} warm-up")
    if keras_accuracy is not None:
        print(f"Keras model (the run's eval, all dev pairs): accuracy {keras_accuracy:.4f}")
    print("| model | file size | dev accuracy | latency p50 | latency p99 |")
    print("| --- | --- | --- | --- | --- |")
    for quantize, (size, accuracy, _, latencies) in results.items():
        name = "float32" if quantize == "none" else "int8 (dynamic range)"
        print(f"| {name} | {size / 1e6:.1f} MB | {100 * accuracy:.2f} | "
              f"{np.percentile(latencies, 50):.1f} ms | {np.percentile(latencies, 99):.1f} ms |")
    float_logits, int8_logits = results["none"][2], results["int8"][2]
    gap = 100 * (results["int8"][1] - results["none"][1])
    agree = np.mean(np.argmax(float_logits, 1) == np.argmax(int8_logits, 1))
    speedup = np.median(results["none"][3]) / np.median(results["int8"][3])
    print(f"int8 - float32: {gap:+.2f} accuracy points "
          f"({'within 1 point' if abs(gap) <= 1.0 else 'MORE than 1 point'}); same prediction "
          f"on {100 * agree:.1f}% of the pairs; largest logit difference "
          f"{np.abs(float_logits - int8_logits).max():.4f}; p50 speed-up {speedup:.2f}x; "
          f"outputs in {work_dir}")


if __name__ == "__main__":
    app.run(main)
