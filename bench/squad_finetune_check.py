"""Real check: fine-tune a released BERT on SQuAD v1.1 questions on CPU, report EM/F1.

No SQuAD train set is in ../shared/data, only dev-v1.1.json: this script splits it BY
ARTICLE, trains on questions of the first articles and predicts questions of the last
ones (no paragraph is in both). Figures are therefore from a few thousand training
questions, far from the 88k of the real train set, and not comparable with published
dev scores.

    .venv/bin/python bench/squad_finetune_check.py --seeds=1,2,3   # the reference recipe

The defaults are the reference recipe (../shared/bench/reference_finetune.py, task
`squad`): the first 2,500 questions of articles[:-6] train, the first 400 of the last 6
articles are predicted; max_seq_length 192, doc_stride 64 (windows start 64 tokens
apart), max_query_length 48, batch 16, lr 1e-4, 2 epochs over the training windows, 10%
warm-up, AdamW eps 1e-6, weight decay 0.01, clip 1.0. The mean over the seeds is printed
beside the reference's (Hugging Face transformers on the same weights,
../shared/bench/README.md).

Prints the split, per seed the training time and sequences/s, prediction time and the
official evaluate-v1.1 EM/F1 of the held-out questions, then the summary.
"""

import argparse
import json
import os
import pathlib
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import logging  # noqa: E402  (after the TF log level)

import seed_summary  # noqa: E402
from bert_tf.runs import driver  # noqa: E402
from bert_tf.tasks.squad import task as squad_task  # noqa: E402
from bert_tf.tasks.squad.options import SquadOptions  # noqa: E402

SHARED = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dev_file", default=str(SHARED / "squad" / "dev-v1.1.json"))
    parser.add_argument("--checkpoint",
                        default=str(SHARED / "checkpoints" / "uncased_L-6_H-384_A-12"))
    parser.add_argument("--eval_articles", type=int, default=6,
                        help="held-out articles, taken from the end of the file")
    parser.add_argument("--train_questions", type=int, default=2500,
                        help="training questions, from the first articles")
    parser.add_argument("--eval_questions", type=int, default=400,
                        help="held-out questions predicted (first ones of the articles)")
    parser.add_argument("--max_seq_length", type=int, default=192)
    parser.add_argument("--doc_stride", type=int, default=64)
    parser.add_argument("--max_query_length", type=int, default=48)
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--learning_rate", type=float, default=1e-4)
    parser.add_argument("--seeds", default="1,2,3", help="comma-separated seeds, one run each")
    parser.add_argument("--head_initializer", default=None,
                        help="truncated_normal or normal (default: the runner's)")
    parser.add_argument("--output_dir", default=None, help="default: a temporary folder")
    return parser.parse_args()


def take_questions(articles, limit):
    """Copies of `articles` keeping the first `limit` questions, whole paragraphs."""
    kept, count = [], 0
    for article in articles:
        paragraphs = []
        for paragraph in article["paragraphs"]:
            if count >= limit:
                break
            qas = paragraph["qas"][:limit - count]
            count += len(qas)
            paragraphs.append(dict(paragraph, qas=qas))
        if paragraphs:
            kept.append(dict(article, paragraphs=paragraphs))
    return kept, count


def write_split(args, folder):
    """train.json / heldout.json split by article; returns their paths and sizes."""
    with open(args.dev_file, encoding="utf-8") as reader:
        dev = json.load(reader)
    articles = dev["data"]
    train_articles, train_count = take_questions(articles[:-args.eval_articles],
                                                 args.train_questions)
    eval_articles, eval_count = take_questions(articles[-args.eval_articles:],
                                               args.eval_questions)
    paths = []
    for name, data in (("train.json", train_articles), ("heldout.json", eval_articles)):
        path = os.path.join(folder, name)
        with open(path, "w", encoding="utf-8") as writer:
            json.dump({"version": dev["version"], "data": data}, writer)
        paths.append(path)
    print(f"split of {args.dev_file} by article: train {train_count} questions from "
          f"{len(train_articles)} articles; held out {eval_count} questions from the last "
          f"{len(eval_articles)} articles")
    return paths


def run_seed(args, seed, folder, train_file, heldout_file):
    """Trains and predicts with one seed; returns the official metrics and timings."""
    options = SquadOptions(
        output_dir=os.path.join(folder, f"seed{seed}"), init_checkpoint=args.checkpoint,
        train_file=train_file, predict_file=heldout_file, do_train=True, do_predict=True,
        max_seq_length=args.max_seq_length, doc_stride=args.doc_stride,
        max_query_length=args.max_query_length, train_batch_size=args.batch_size,
        predict_batch_size=32, learning_rate=args.learning_rate,
        num_train_epochs=args.epochs, save_checkpoints_steps=100000, steps_per_loop=20,
        seed=seed,
        **({"head_initializer": args.head_initializer} if args.head_initializer else {}))
    started = time.time()
    outcome = driver.execute(squad_task.SquadTask(options))
    total_seconds = time.time() - started
    evaluation, train = outcome.results, outcome.runner.train_result
    global_step, train_seconds = train.global_step, train.seconds
    predict_seconds = total_seconds - train_seconds  # features, loading, predict, postprocess
    sequences = global_step * args.batch_size
    print(f"seed {seed}: held-out EM {evaluation['exact_match']:.2f}  F1 "
          f"{evaluation['f1']:.2f}; train {global_step} steps, {sequences} sequences in "
          f"{train_seconds:.1f} s of train loop ({sequences / train_seconds:.1f} "
          f"sequences/s); the rest (features, predict, postprocess) {predict_seconds:.1f} s",
          flush=True)
    return evaluation


def main():
    args = parse_args()
    logging.set_verbosity(logging.INFO)
    seeds = seed_summary.parse_seeds(args.seeds)
    folder = args.output_dir or tempfile.mkdtemp(prefix="squad_check_")
    os.makedirs(folder, exist_ok=True)
    train_file, heldout_file = write_split(args, folder)
    rows = [run_seed(args, seed, folder, train_file, heldout_file) for seed in seeds]
    print(f"model {args.checkpoint}, max_seq_length {args.max_seq_length}, doc_stride "
          f"{args.doc_stride}, batch {args.batch_size}, lr {args.learning_rate}, "
          f"{args.epochs} epochs; outputs in {folder}")
    reference_recipe = (args.train_questions, args.eval_questions, args.epochs,
                        args.max_seq_length, args.learning_rate) == (2500, 400, 2.0, 192, 1e-4)
    for key, metric in (("exact_match", "EM"), ("f1", "F1")):
        reference = seed_summary.reference_figures("squad", metric) if reference_recipe \
            else None
        print(seed_summary.summary_line(f"SQuAD held-out {metric}", [r[key] for r in rows],
                                        reference))


if __name__ == "__main__":
    main()
