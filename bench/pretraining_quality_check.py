"""Real check: pre-training quality on the reference recipe, masked-LM accuracy per seed.

The recipe of ../shared/bench/README.md ("Pre-training"): a 2-layer BERT (hidden 128,
2 heads, intermediate 512, the uncased 30,522 vocab) from scratch, 600 steps of batch 32,
seq 128, 20 predictions, AdamW lr 1e-3, 60 warm-up steps, linear decay, clip 1.0, on
records made from the first 600 kB of the English sample text; masked-LM accuracy over
the first 20 batches of 32 of the training records. Transformers' `BertForPreTraining`
reached 0.113 / 0.129 / 0.123 there (3 seeds).

    .venv/bin/python bench/pretraining_quality_check.py --seeds=1,2,3

The records are made once per work folder (create_pretraining_data, dupe_factor 5,
random_seed 12345); each seed trains its own model in `<work_dir>/seed<N>`.
"""

import argparse
import os
import pathlib
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from absl import logging  # noqa: E402

import pretraining_data_bench  # noqa: E402
from bert_tf.tasks.pretraining import task as pretraining  # noqa: E402
from bert_tf.tasks.pretraining.options import PretrainingOptions  # noqa: E402
import seed_summary  # noqa: E402
from bert_tf.train import distribute  # noqa: E402
from bert_tf.configs import BertConfig  # noqa: E402

SHARED = REPO.parent / "shared" / "data"
REFERENCE_RANGE = "0.113-0.129 (transformers, 3 seeds; ../shared/bench/README.md)"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dump", default=str(SHARED / "wiki" /
                                              "enwiki-sample-pages-articles.xml.bz2"))
    parser.add_argument("--vocab_file", default=str(SHARED / "checkpoints" /
                                                    "uncased_L-6_H-384_A-12" / "vocab.txt"))
    parser.add_argument("--work_dir", default="/tmp/bert_tf_pretraining_quality")
    parser.add_argument("--text_bytes", type=int, default=600_000)
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--num_train_steps", type=int, default=600)
    return parser.parse_args()


def first_documents(text_path, out_path, limit):
    """Whole documents (blank-line separated) from the start of text_path, up to `limit` bytes."""
    kept, size = [], 0
    for document in text_path.read_text(encoding="utf-8").split("\n\n"):
        length = len(document.encode("utf-8")) + 2
        if size + length > limit:
            break
        kept.append(document)
        size += length
    out_path.write_text("\n\n".join(kept) + "\n\n", encoding="utf-8")
    return size


def make_records(args, work):
    """600 kB of sample text -> pre-training records (made once)."""
    records = work / "records.tfrecord"
    if records.exists():
        return str(records)
    full_text = work / "enwiki_sample.txt"
    pretraining_data_bench.make_text(pathlib.Path(args.dump), full_text)
    text = work / "text.txt"
    size = first_documents(full_text, text, args.text_bytes)
    print(f"text: {size} bytes of {full_text}", flush=True)
    subprocess.run([sys.executable, "-m", "data_prep.create_pretraining_data",
                    f"--input_file={text}", f"--output_file={records}",
                    f"--vocab_file={args.vocab_file}", "--do_lower_case",
                    "--max_seq_length=128", "--max_predictions_per_seq=20",
                    "--dupe_factor=5", "--masked_lm_prob=0.15", "--random_seed=12345"],
                   cwd=REPO, check=True)
    return str(records)


def run_seed(args, records, seed, work):
    config = BertConfig(vocab_size=30522, hidden_size=128, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=512)
    options = PretrainingOptions(
        bert_config=config, input_file=records, output_dir=str(work / f"seed{seed}"),
        do_train=True, do_eval=True, max_seq_length=128, max_predictions_per_seq=20,
        train_batch_size=32, eval_batch_size=32, learning_rate=1e-3,
        num_train_steps=args.num_train_steps, num_warmup_steps=60,
        save_checkpoints_steps=args.num_train_steps, steps_per_loop=100,
        max_eval_steps=20, seed=seed)
    started = time.time()
    result = pretraining.run_pretraining(options, distribute.get_strategy("one_device"))
    evaluation = result["eval"]
    print(f"seed {seed}: masked_lm_accuracy {evaluation['masked_lm_accuracy']:.4f}, "
          f"masked_lm_loss {evaluation['masked_lm_loss']:.3f}, next_sentence_accuracy "
          f"{evaluation['next_sentence_accuracy']:.3f} after {evaluation['global_step']} "
          f"steps, {time.time() - started:.0f} s", flush=True)
    return evaluation


def main():
    args = parse_args()
    logging.set_verbosity(logging.WARNING)
    seeds = seed_summary.parse_seeds(args.seeds)
    work = pathlib.Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    records = make_records(args, work)
    rows = [run_seed(args, records, seed, work) for seed in seeds]
    print(seed_summary.summary_line("masked-LM accuracy",
                                    [r["masked_lm_accuracy"] for r in rows], digits=4))
    print(f"reference: {REFERENCE_RANGE}")


if __name__ == "__main__":
    main()
