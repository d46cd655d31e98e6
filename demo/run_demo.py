"""The whole bert_tf story on the bundled data, in a few minutes of CPU (`make demo`).

1. build a WordPiece vocab from demo/data/corpus.txt          (data_prep/build_vocab.py)
2. turn the corpus into pre-training TFRecords                (data_prep/create_pretraining_data.py)
3. pre-train a small BERT with masked LM + next sentence      (run_pretraining.py)
4. fine-tune a review classifier from that checkpoint         (run_classifier.py)
5. export it as a SavedModel and classify two sentences through it with TensorFlow and
   tensorflow-text alone (`import tensorflow_text` before `tf.saved_model.load`).

Everything goes under --output_dir (default demo_output/), which is cleared first, so the
demo can be run again. Every step is the same command a user would type; each is printed.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA_DIR = os.path.join(REPO_ROOT, "demo", "data")

# A small BERT that learns the demo corpus in a couple of CPU minutes.
DEMO_BERT_CONFIG = {
    "vocab_size": None,  # set from the vocab that step 1 writes
    "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
    "intermediate_size": 512, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 512,
    "type_vocab_size": 2, "initializer_range": 0.02,
}

SERVING_CHECK = """
import sys, tensorflow as tf, tensorflow_text  # noqa: F401  (registers the tokenizer ops)
serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
outputs = serve(text_a=tf.constant(sys.argv[2:]))
for text, label, probs in zip(sys.argv[2:], outputs["labels"].numpy(),
                              outputs["probabilities"].numpy()):
    print(f"  {label.decode():>9}  p={probs.max():.3f}  {text}")
"""


def run_step(title, args, log_dir):
    """Runs one CLI step, its output teed to a log file; stops the demo if it fails."""
    print(f"\n=== {title}\n$ {' '.join(args)}", flush=True)
    log_path = os.path.join(log_dir, title.split(".")[0].strip().replace(" ", "_") + ".log")
    start = time.time()
    with open(log_path, "w", encoding="utf-8") as log:
        process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, cwd=REPO_ROOT)
        for line in process.stdout:
            log.write(line)
            if _worth_showing(line):
                print("  " + ABSL_PREFIX.sub("", line.rstrip()), flush=True)
        process.wait()
    if process.returncode:
        sys.exit(f"demo: step '{title}' failed (exit {process.returncode}); see {log_path}")
    print(f"  ({time.time() - start:.0f} s)", flush=True)
    return time.time() - start


# "I1122 14:11:28.764044 140237240204160 training.py:202] " in front of absl log lines.
ABSL_PREFIX = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ [\w.]+:\d+\] ")


def _worth_showing(line):
    """Progress and result lines of the runners, not TensorFlow's start-up noise."""
    noise = ("oneDNN", "cuda", "cpu_feature_guard", "absl::InitializeLog", "AVX", "WARNING: All log",
             "rebuild TensorFlow", "tensorflow/core", "I0000 00:00", "Sharding callback")
    return line.strip() and not any(word in line for word in noise)


def python_script(path, *flags):
    return [sys.executable, os.path.join(REPO_ROOT, path), *flags]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output_dir", default=os.path.join(REPO_ROOT, "demo_output"))
    parser.add_argument("--pretrain_steps", type=int, default=1500)
    args = parser.parse_args()
    out = os.path.abspath(args.output_dir)
    shutil.rmtree(out, ignore_errors=True)
    logs = os.path.join(out, "logs")
    os.makedirs(logs)
    paths = {name: os.path.join(out, name) for name in
             ("vocab.txt", "bert_config.json", "records", "pretraining", "classifier", "export")}
    timings = {}

    timings["vocab"] = run_step("1. Build a WordPiece vocab", python_script(
        "data_prep/build_vocab.py", f"--input_file={DATA_DIR}/corpus.txt",
        f"--output_file={paths['vocab.txt']}", "--vocab_size=2000", "--num_unused=10",
        "--do_lower_case=true", "--lower_thresh=2"), logs)
    with open(paths["vocab.txt"], encoding="utf-8") as f:
        vocab_size = sum(1 for _ in f)
    with open(paths["bert_config.json"], "w", encoding="utf-8") as f:
        json.dump({**DEMO_BERT_CONFIG, "vocab_size": vocab_size}, f, indent=2)

    os.makedirs(paths["records"])
    timings["records"] = run_step("2. Create pre-training records", python_script(
        "data_prep/create_pretraining_data.py", f"--input_file={DATA_DIR}/corpus.txt",
        f"--output_file={paths['records']}/corpus.tfrecord", f"--vocab_file={paths['vocab.txt']}",
        "--do_lower_case=true", "--max_seq_length=64", "--max_predictions_per_seq=10",
        "--dupe_factor=3", "--num_workers=2", "--random_seed=7"), logs)

    timings["pretrain"] = run_step("3. Pre-train a small BERT", python_script(
        "run_pretraining.py", f"--input_file={paths['records']}/corpus.tfrecord",
        f"--output_dir={paths['pretraining']}", f"--bert_config_file={paths['bert_config.json']}",
        "--do_train", "--do_eval", "--max_seq_length=64", "--max_predictions_per_seq=10",
        "--train_batch_size=32", "--eval_batch_size=32", "--learning_rate=1e-3",
        f"--num_train_steps={args.pretrain_steps}", f"--num_warmup_steps={args.pretrain_steps // 10}",
        "--save_checkpoints_steps=500", "--iterations_per_loop=100", "--max_eval_steps=20",
        "--seed=1"), logs)

    timings["finetune"] = run_step("4. Fine-tune a review classifier", python_script(
        "run_classifier.py", "--task_name=generic", f"--data_dir={DATA_DIR}/reviews",
        "--text_column=sentence", "--label_column=label", f"--vocab_file={paths['vocab.txt']}",
        f"--bert_config_file={paths['bert_config.json']}",
        f"--init_checkpoint={paths['pretraining']}", f"--output_dir={paths['classifier']}",
        "--do_train", "--do_eval", "--max_seq_length=64", "--train_batch_size=32",
        "--learning_rate=3e-4", "--num_train_epochs=3", "--steps_per_loop=25", "--seed=1",
        f"--export_dir={paths['export']}"), logs)

    # New combinations of the review set's phrases: the demo model knows no other English.
    sentences = ["The soup was rich and full of flavour and the staff were warm and attentive.",
                 "The room was dirty and smelled of smoke, and the shower was broken."]
    timings["serve"] = run_step("5. Classify two sentences with the SavedModel",
                                [sys.executable, "-c", SERVING_CHECK, paths["export"], *sentences],
                                logs)
    print_summary(out, paths, timings)


def print_summary(out, paths, timings):
    print("\n=== Summary")
    rows = [("vocab", paths["vocab.txt"]), ("config", paths["bert_config.json"]),
            ("pre-training records", paths["records"]),
            ("pre-trained model", paths["pretraining"]),
            ("classifier", paths["classifier"]), ("SavedModel", paths["export"]),
            ("logs", os.path.join(out, "logs"))]
    for what, where in rows:
        print(f"  {what:<22} {os.path.relpath(where, REPO_ROOT)}")
    for name in ("pretraining", "classifier"):
        results = os.path.join(paths[name], "eval_results.txt")
        if os.path.exists(results):
            with open(results, encoding="utf-8") as f:
                print(f"  {name} eval: " + ", ".join(line.strip() for line in f if line.strip()))
    print("  time: " + ", ".join(f"{k} {v:.0f}s" for k, v in timings.items())
          + f", total {sum(timings.values()):.0f}s")


if __name__ == "__main__":
    main()
