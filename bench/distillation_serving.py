"""Serving speed of a distilled student against its teacher, in the same alternating rounds
of one run (issue 48): both run folders exported by `bert-export-model`'s function as
SavedModels (`serving_default` on raw text), the student also as `--export_format=onnx
--quantize=int8` on ONNX Runtime (its Preprocessor tokenizing inside the call).

    .venv/bin/python bench/distillation_serving.py --teacher=/tmp/distil/teacher \
        --student=/tmp/distil/distilled_seed1 --texts=../shared/data/glue/SST-2/dev.tsv \
        --rounds=12 --calls_per_round=5 --batch_sizes=1,32

Timing is bench/serving_latency.py's (its flags --rounds, --calls_per_round, --warmup,
--batch_sizes, --ort_threads): each side's calls timed by wall clock, the sides in one
order in even rounds and reversed in odd ones; a ratio is the median over rounds of the
teacher's median call over the student's in the same round, printed with its range.
Also printed: the machine (bench/machine.py) and, for the int8 student, its dev accuracy
on `--texts` (a GLUE single-text dev.tsv) beside the float32 student's. Not a test.
"""

import csv
import os
import tempfile

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  registers the WordPiece ops, as TF Serving links them
from absl import app, flags, logging

import machine
from bert_tf.extras import require
from bert_tf.runs import export_checkpoint
from bert_tf.text.preprocessor import Preprocessor
from serving_latency import FLAGS, folder_size, print_table, round_ratios, run_rounds

flags.DEFINE_string("teacher", None, "The teacher's run folder.", required=True)
flags.DEFINE_string("student", None, "The student's run folder.", required=True)
flags.DEFINE_string("texts", None, "A GLUE single-text dev.tsv (sentence, label).",
                    required=True)
TARGETS = (("student SavedModel at least 1.8x the teacher's", "student_text", 1.8, None),
           ("student int8 ONNX at least 3x the teacher's float32 SavedModel",
            "student_onnx_int8", 3.0, 1))


def export(run_folder, export_dir, **options):
    return export_checkpoint.export_from_checkpoint(export_checkpoint.ExportOptions(
        init_checkpoint=run_folder, export_dir=export_dir, **options))


def saved_model_side(path):
    serving = tf.saved_model.load(path).signatures["serving_default"]

    def call(texts):
        return serving(text_a=tf.constant(texts))["logits"].numpy()  # [B, C]
    return call


def onnx_side(path, preprocessor):
    ort = require("onnxruntime", "the int8 ONNX side")
    options = ort.SessionOptions()
    if FLAGS.ort_threads:
        options.intra_op_num_threads = FLAGS.ort_threads
    session = ort.InferenceSession(os.path.join(path, "model.onnx"), options,
                                   providers=["CPUExecutionProvider"])

    def call(texts):
        features = preprocessor(texts)  # [B, L], cut to the longest row
        feed = {name: features[name].numpy().astype(np.int32)
                for name in ("input_ids", "input_mask", "segment_ids")}
        return session.run(["logits"], feed)[0]
    return call


def read_texts(path):
    with open(path, encoding="utf-8") as file:
        rows = list(csv.DictReader(file, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [row["sentence"] for row in rows], [int(row["label"]) for row in rows]


def accuracy(side, texts, labels, batch_size=64):
    logits = np.concatenate([side(texts[i:i + batch_size])
                             for i in range(0, len(texts), batch_size)])
    return float(np.mean(logits.argmax(-1) == np.asarray(labels)))


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    print(machine.describe(), flush=True)
    work_dir = FLAGS.output_dir or tempfile.mkdtemp(prefix="distillation_serving_")
    folders = {"teacher_text": export(FLAGS.teacher, os.path.join(work_dir, "teacher")),
               "student_text": export(FLAGS.student, os.path.join(work_dir, "student")),
               "student_onnx_int8": export(FLAGS.student, os.path.join(work_dir, "int8"),
                                           export_format="onnx", quantize="int8")}
    sides = {name: saved_model_side(path) for name, path in folders.items()
             if name.endswith("_text")}
    sides["student_onnx_int8"] = onnx_side(folders["student_onnx_int8"],
                                           Preprocessor.from_pretrained(FLAGS.student))
    texts, labels = read_texts(FLAGS.texts)
    for name in ("student_text", "student_onnx_int8"):
        print(f"{name}: dev accuracy {100 * accuracy(sides[name], texts, labels):.2f} on "
              f"{len(texts)} texts", flush=True)
    batch_sizes = [int(size) for size in FLAGS.batch_sizes]
    times = {name: {} for name in sides}
    for size in batch_sizes:
        for side, rounds in run_rounds(list(sides), None, sides, texts, size).items():
            times[side][size] = rounds
    sizes = {name: f"{folder_size(path) / 1e6:.1f} MB" for name, path in folders.items()}
    print(f"\nTeacher {FLAGS.teacher} against student {FLAGS.student}: {FLAGS.rounds} "
          f"alternating rounds of {FLAGS.calls_per_round} calls a side; {machine.describe()}")
    print_table(times, sizes, batch_sizes)
    for name, side, least, only in TARGETS:
        for size in [only] if only else batch_sizes:
            ratios = round_ratios(times, side, "teacher_text", size)
            if ratios is None:
                continue
            median = float(np.median(ratios))
            print(f"{name}, batch {size}: {median:.2f}x (rounds {ratios.min():.2f}x to "
                  f"{ratios.max():.2f}x): {'met' if median >= least else 'NOT met'}")


if __name__ == "__main__":
    app.run(main)
