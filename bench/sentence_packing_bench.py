"""Sentence-embedding training on packed rows vs one text a row: pairs/s, in one run.

STS-B's training pairs (../shared/data/glue/STS-B/train.tsv), CoSENT, batches of
`--batch_size` pairs (two texts each), max_seq_length 128, the shared 6-layer uncased
BERT's config (L6/H384, all-MiniLM-L6-v2's shape; weights do not change the speed). The
training step of `bert-train --task=sentence_embeddings` (`bert_tf.train.loop.train` on the
task's own dataset and loss) runs in two modes:
    trimmed   one text a row, each batch cut to its longest text (the CPU / GPU default)
    packed    the batch's texts packed into rows of up to --max_sequences_per_row
              (--pack_sequences), each batch cut to its longest row
in alternating rounds (ABBA order) in this one process: each round times --steps steps
of each mode after a compiling first loop. Printed: each mode's median pairs/s, and the
median of the rounds' packed / trimmed ratios with their range.

    .venv/bin/python bench/sentence_packing_bench.py --rounds=4
"""

import argparse
import os
import pathlib
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
from absl import logging  # noqa: E402

import machine  # noqa: E402
from bert_tf.models import BertEncoder  # noqa: E402
from bert_tf.tasks.sentence_embeddings import data as pair_data  # noqa: E402
from bert_tf.tasks.sentence_embeddings import losses  # noqa: E402
from bert_tf.tasks.sentence_embeddings.model import SentenceEncoder  # noqa: E402
from bert_tf.text import tokenization  # noqa: E402
from bert_tf.train import distribute, loop, optimization  # noqa: E402
from bert_tf.weights import checkpoints  # noqa: E402

SEQ, SEED = 128, 1
SHARED = pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "data"
CHECKPOINT = SHARED / "checkpoints" / "uncased_L-6_H-384_A-12"


def measure(arrays, per_row, args, work):
    """Pairs/s of the training step after its first (compiling) loop (median of loops)."""
    config = checkpoints.load_config(str(CHECKPOINT / "bert_config.json"))

    def loss_fn(features, outputs):
        return losses.sentence_loss("cosent", outputs["embedding"], 2,
                                    features["scores"], losses.DEFAULT_SCALE)

    result = loop.train(
        distribute.get_strategy("one_device"),
        lambda: SentenceEncoder(BertEncoder(config)), loss_fn,
        lambda context: pair_data.pairs_dataset(
            arrays, args.batch_size, True, seed=SEED, input_context=context,
            trim_padding=True, max_sequences_per_row=per_row),
        optimizer_fn=lambda: optimization.create_optimizer(2e-5, args.steps + 1, 0),
        settings=loop.LoopSettings(
            output_dir=tempfile.mkdtemp(dir=work), num_train_steps=args.steps + 1,
            global_batch_size=args.batch_size, save_checkpoints_steps=args.steps + 1,
            steps_per_loop=max(1, args.steps // 4)))
    rates = [entry["sequences_per_second"] for entry in result.history[1:]]
    return float(np.median(rates))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4, help="ABBA rounds")
    parser.add_argument("--steps", type=int, default=16, help="timed steps a run")
    parser.add_argument("--batch_size", type=int, default=16, help="pairs a batch")
    parser.add_argument("--max_sequences_per_row", type=int, default=8)
    args = parser.parse_args()
    print(machine.describe(), flush=True)
    logging.set_verbosity(logging.WARNING)
    tokenizer = tokenization.FullTokenizer(str(CHECKPOINT / "vocab.txt"), do_lower_case=True)
    columns = pair_data.Columns("sentence1", "sentence2", None, "score", 0.0, 5.0)
    rows = pair_data.read_pairs(str(SHARED / "glue" / "STS-B" / "train.tsv"), columns, True)
    arrays = pair_data.encode_rows(rows, tokenizer, SEQ)
    lengths = arrays["input_mask"].sum(axis=-1)
    print(f"{os.cpu_count()} cpus; L6/H384, STS-B train ({len(rows.texts)} pairs, mean "
          f"{lengths.mean():.1f} tokens a text), batches of {args.batch_size} pairs, "
          f"{args.steps} timed steps a run", flush=True)
    rates = {"trimmed": [], "packed": []}
    with tempfile.TemporaryDirectory() as folder:
        for index in range(args.rounds):
            order = ["trimmed", "packed"] if index % 2 == 0 else ["packed", "trimmed"]
            for mode in order:
                per_row = args.max_sequences_per_row if mode == "packed" else None
                rates[mode].append(measure(arrays, per_row, args, pathlib.Path(folder)))
            print(f"round {index + 1}: trimmed {rates['trimmed'][-1]:.1f}, packed "
                  f"{rates['packed'][-1]:.1f} pairs/s", flush=True)
    ratios = np.asarray(rates["packed"]) / np.asarray(rates["trimmed"])
    print(f"trimmed {np.median(rates['trimmed']):.1f} pairs/s, packed "
          f"{np.median(rates['packed']):.1f} pairs/s; packed / trimmed {np.median(ratios):.2f}x "
          f"(rounds {ratios.min():.2f}x to {ratios.max():.2f}x)", flush=True)


if __name__ == "__main__":
    main()
