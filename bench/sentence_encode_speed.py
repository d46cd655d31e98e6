"""Sentence-encoding speed on this CPU, in one run: `bert-encode`'s library
(`encode.embed_texts`) against sentence-transformers' `encode` on the same texts and
weights at batch sizes 1, 32 and 128, and the raw-text SavedModel's latency at batch 1
(issue 37, deliverable 6).

    .venv/bin/python bench/sentence_encode_speed.py --texts=512 --batch_sizes=1,32,128 \
        --latency_requests=100 --reference_python=.venv/bin/python

The model: ../shared/data/checkpoints/uncased_L-6_H-384_A-12 (all-MiniLM-L6-v2's
weights) as a sentence encoder, mean pooling, normalized, `--max_seq_length` 256 (the
sentence-transformers model's). It is written once as a sentence-transformers folder
(`--export_format=sentence_transformers`), which the reference side loads, and as a
SavedModel.

Texts: the first `--texts` sentences of STS-B dev (sentence1 then sentence2 of each
pair, ../shared/data/glue/STS-B/dev.tsv). Both sides sort the texts by length and pad
each batch to its longest; each is timed over one whole pass at each batch size after one
untimed pass over the first batch (tokenization included on both sides). The SavedModel:
`serving_default(text)` of one text a call, `--latency_requests` calls after 10 untimed
ones, p50 / p99 ms. The reference side runs `bench/reference_sentence_encode.py` in
`--reference_python`; both sides use `--threads` threads (on a machine where other work
runs, fewer threads than cores wait less on each other). Printed: a markdown table and
the largest difference of the first 16 vectors; written to `<output_dir>/results.json`.
Not part of the tests.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  registers the WordPiece ops, as TF Serving links them
from absl import app, flags

import machine
from bert_tf.tasks.sentence_embeddings import encode, serving
from bert_tf.tasks.sentence_embeddings import sentence_transformers as st_folder
from bert_tf.text.preprocessor import Preprocessor
from bert_tf.text.tokenization import FullTokenizer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("BERT_TF_SHARED_DATA", os.path.join(REPO, "..", "shared", "data"))
CHECKPOINT = os.path.join(SHARED, "checkpoints", "uncased_L-6_H-384_A-12")
STSB_DEV = os.path.join(SHARED, "glue", "STS-B", "dev.tsv")
CHECK_TEXTS = 16

flags.DEFINE_integer("texts", 512, "STS-B dev sentences encoded at each batch size.")
flags.DEFINE_list("batch_sizes", ["1", "32", "128"], "Batch sizes of both sides.")
flags.DEFINE_integer("max_seq_length", 256, "Tokens a text, [CLS] and [SEP] included.")
flags.DEFINE_integer("latency_requests", 100, "Timed SavedModel calls at batch 1.")
flags.DEFINE_string("output_dir", None, "Work folder (default: a temporary one).")
flags.DEFINE_string("reference_python", None, "A Python with sentence-transformers "
                    "(default: that side is left out).")
flags.DEFINE_integer("threads", os.cpu_count(), "Threads of both sides: TensorFlow's "
                     "intra- and inter-op threads here, torch's in the reference.")
FLAGS = flags.FLAGS


def stsb_sentences(count):
    """The first `count` sentences of STS-B dev, sentence1 then sentence2 of each pair."""
    with open(STSB_DEV, encoding="utf-8") as file:
        rows = [line.rstrip("\n").split("\t") for line in file][1:]
    return [text for row in rows for text in (row[7], row[8])][:count]


def our_speed(model, tokenizer, texts):
    """{batch size: (seconds, texts/s)} and the vectors of the first CHECK_TEXTS texts."""
    speed = {}
    for batch_size in (int(size) for size in FLAGS.batch_sizes):
        encode.embed_texts(model, tokenizer, texts[:batch_size], FLAGS.max_seq_length,
                            batch_size)  # warm-up
        start = time.perf_counter()
        encode.embed_texts(model, tokenizer, texts, FLAGS.max_seq_length, batch_size)
        seconds = time.perf_counter() - start
        speed[str(batch_size)] = {"seconds": seconds, "texts_per_second": len(texts) / seconds}
    vectors, _ = encode.embed_texts(model, tokenizer, texts[:CHECK_TEXTS],
                                     FLAGS.max_seq_length)
    return speed, vectors


def saved_model_latency(path, texts):
    """p50 / p99 ms of `serving_default` at batch 1."""
    serve = tf.saved_model.load(path).signatures["serving_default"]
    for text in texts[:10]:
        serve(text=tf.constant([text]))["embedding"].numpy()
    times = []
    for index in range(FLAGS.latency_requests):
        start = time.perf_counter()
        serve(text=tf.constant([texts[index % len(texts)]]))["embedding"].numpy()
        times.append(1000 * (time.perf_counter() - start))
    return {"p50_ms": float(np.percentile(times, 50)), "p99_ms": float(np.percentile(times, 99))}


def reference(folder, texts, work_dir):
    """The reference side's results, or None without --reference_python."""
    if not FLAGS.reference_python:
        return None
    texts_file, output = os.path.join(work_dir, "texts.json"), os.path.join(
        work_dir, "reference.json")
    with open(texts_file, "w", encoding="utf-8") as file:
        json.dump(texts, file)
    subprocess.run([FLAGS.reference_python, os.path.join(REPO, "bench",
                                                         "reference_sentence_encode.py"),
                    f"--model_dir={folder}", f"--texts_file={texts_file}",
                    f"--output={output}", f"--batch_sizes={','.join(FLAGS.batch_sizes)}",
                    f"--check_texts={CHECK_TEXTS}",
                    f"--threads={FLAGS.threads}"], check=True)
    with open(output, encoding="utf-8") as file:
        return json.load(file)


def main(_):
    print(machine.describe(), flush=True)
    tf.config.threading.set_intra_op_parallelism_threads(FLAGS.threads)
    tf.config.threading.set_inter_op_parallelism_threads(FLAGS.threads)
    work_dir = FLAGS.output_dir or tempfile.mkdtemp(prefix="sentence_encode_speed_")
    vocab_file = os.path.join(CHECKPOINT, "vocab.txt")
    model = serving.load_sentence_encoder(CHECKPOINT, pooling="mean", normalize=True)
    preprocessor = Preprocessor(vocab_file, True, FLAGS.max_seq_length)
    folder = st_folder.export_sentence_transformers(
        model, preprocessor, os.path.join(work_dir, "sentence_transformers"), overwrite=True)
    saved = serving.export_sentence_encoder(model, preprocessor,
                                            os.path.join(work_dir, "saved_model"),
                                            overwrite=True)
    texts = stsb_sentences(FLAGS.texts)
    ours, vectors = our_speed(model, FullTokenizer(vocab_file, do_lower_case=True), texts)
    results = {"texts": len(texts), "max_seq_length": FLAGS.max_seq_length,
               "cpus": os.cpu_count(), "threads": FLAGS.threads, "ours": ours,
               "saved_model_batch_1": saved_model_latency(saved, texts)}
    theirs = reference(folder, texts, work_dir)
    print(f"| batch | bert-encode texts/s | sentence-transformers texts/s |")
    print("| --- | --- | --- |")
    for size, figures in ours.items():
        other = f"{theirs['speed'][size]['texts_per_second']:.1f}" if theirs else "-"
        print(f"| {size} | {figures['texts_per_second']:.1f} | {other} |")
    latency = results["saved_model_batch_1"]
    print(f"SavedModel serving_default, batch 1: p50 {latency['p50_ms']:.1f} ms, "
          f"p99 {latency['p99_ms']:.1f} ms")
    if theirs:
        results["reference"] = {key: value for key, value in theirs.items()
                                if key != "vectors"}
        difference = float(np.abs(np.asarray(theirs["vectors"]) - vectors).max())
        results["max_abs_difference"] = difference
        print(f"Largest difference of the first {CHECK_TEXTS} vectors: {difference:.2e}")
    with open(os.path.join(work_dir, "results.json"), "w", encoding="utf-8") as file:
        json.dump(results, file, indent=1)
    print(f"Written: {os.path.join(work_dir, 'results.json')}")


if __name__ == "__main__":
    app.run(main)
