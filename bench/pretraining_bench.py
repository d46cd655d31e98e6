"""Throughput of the whole pre-training runner against the bare model train step.

Work (as bench/model_bench.py): BertPretrainer, batch 16, sequence 128, 20 masked
positions, vocab 30,522, L=4/H=256/A=4 by default; the same optimizer in both paths
(AdamW, weight decay 0.01 without LayerNorm/bias, global-norm clipping 1.0, warm-up +
linear decay).

* bare: one `tf.function(jit_compile=True)` step (forward, backward, AdamW update) on a
  batch held in memory, called in a Python loop (bench/model_bench.py's step);
* runner: `pretraining.run_pretraining` on TFRecords written for the run: tf.data
  pipeline (interleave, shuffle, parse), OneDeviceStrategy, `iterations_per_loop` steps
  per compiled call, the loss dict reduced per step, progress logging and TensorBoard
  summaries per loop. Checkpoint writes are excluded (they happen between loops and
  are not counted in the loop's rate); the first (compiling) loop is skipped.

Rounds alternate between the two paths; the best sequences/s of each is reported, and
the overhead is 1 - runner / bare.

    .venv/bin/python bench/pretraining_bench.py
    .venv/bin/python bench/pretraining_bench.py --layers 12 --hidden 768 --heads 12
"""

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import machine  # noqa: E402
import model_bench  # noqa: E402
from bert_tf.tasks.pretraining import task as pretraining  # noqa: E402
from bert_tf.tasks.pretraining.options import PretrainingOptions  # noqa: E402
from bert_tf.train import distribute  # noqa: E402
from bert_tf.train import optimization  # noqa: E402
from bert_tf.configs import BertConfig  # noqa: E402
from bert_tf.models import BertEncoder, BertPretrainer  # noqa: E402

BATCH, SEQ, PREDICTIONS, VOCAB = 16, 128, 20, 30522


def _feature(values, kind=np.int64):
    if kind is np.int64:
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    return tf.train.Feature(float_list=tf.train.FloatList(value=values))


def write_records(directory, num_files=4, per_file=256, seed=0):
    """Random full-length records in the original layout."""
    rng = np.random.default_rng(seed)
    for index in range(num_files):
        path = os.path.join(directory, f"bench-{index}.tfrecord")
        with tf.io.TFRecordWriter(path) as writer:
            for _ in range(per_file):
                positions = np.sort(rng.choice(np.arange(1, SEQ), PREDICTIONS, False))
                features = {
                    "input_ids": _feature(rng.integers(5, VOCAB, SEQ).tolist()),
                    "input_mask": _feature([1] * SEQ),
                    "segment_ids": _feature([0] * (SEQ // 2) + [1] * (SEQ // 2)),
                    "masked_lm_positions": _feature(positions.tolist()),
                    "masked_lm_ids": _feature(rng.integers(5, VOCAB, PREDICTIONS).tolist()),
                    "masked_lm_weights": _feature([1.0] * PREDICTIONS, np.float32),
                    "next_sentence_labels": _feature([int(rng.integers(0, 2))]),
                }
                example = tf.train.Example(features=tf.train.Features(feature=features))
                writer.write(example.SerializeToString())
    return os.path.join(directory, "bench-*.tfrecord")


def make_config(args):
    return BertConfig(vocab_size=VOCAB, hidden_size=args.hidden,
                      num_hidden_layers=args.layers, num_attention_heads=args.heads,
                      intermediate_size=4 * args.hidden, max_position_embeddings=512,
                      type_vocab_size=2)


def bare_step_rate(args, config, steps):
    """Sequences/s of the jit-compiled bare step on an in-memory batch."""
    keras.utils.set_random_seed(0)
    model = BertPretrainer(BertEncoder(config))
    model.build()
    optimizer = optimization.create_optimizer(1e-4, 100000, 1000)
    optimizer.build(model.trainable_variables)
    rng = np.random.default_rng(0)
    batch = {
        "input_ids": rng.integers(5, VOCAB, (BATCH, SEQ)),
        "input_mask": np.ones((BATCH, SEQ)),
        "segment_ids": np.zeros((BATCH, SEQ)),
        "masked_lm_positions": np.sort(rng.integers(1, SEQ, (BATCH, PREDICTIONS)), 1),
        "masked_lm_ids": rng.integers(5, VOCAB, (BATCH, PREDICTIONS)),
        "next_sentence_labels": rng.integers(0, 2, (BATCH,)),
    }
    batch = {k: tf.constant(v, tf.int32) for k, v in batch.items()}
    batch["masked_lm_weights"] = tf.ones((BATCH, PREDICTIONS))

    train_step = model_bench.bare_train_step(model, optimizer, jit_compile=True)
    train_step(batch).numpy()
    train_step(batch).numpy()
    start = time.perf_counter()
    for _ in range(steps):
        loss = train_step(batch)
    loss.numpy()
    return steps * BATCH / (time.perf_counter() - start)


def runner_rate(args, config, input_file, steps, workdir):
    """Sequences/s of run_pretraining's train loops after the first (compiling) one."""
    loops = 1 + max(1, steps // args.iterations_per_loop)
    options = PretrainingOptions(
        do_train=True, bert_config=config, input_file=input_file,
        output_dir=tempfile.mkdtemp(dir=workdir), max_seq_length=SEQ,
        max_predictions_per_seq=PREDICTIONS, train_batch_size=BATCH, learning_rate=1e-4,
        num_train_steps=loops * args.iterations_per_loop, num_warmup_steps=10,
        save_checkpoints_steps=loops * args.iterations_per_loop,
        steps_per_loop=args.iterations_per_loop, use_xla=True, seed=0)
    result = pretraining.run_pretraining(options, distribute.get_strategy("one_device"))
    rates = [h["sequences_per_second"] for h in result["train"].history[1:]]
    return float(np.mean(rates))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per round")
    parser.add_argument("--iterations_per_loop", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(machine.describe(), flush=True)
    config = make_config(args)
    with tempfile.TemporaryDirectory() as workdir:
        input_file = write_records(workdir)
        bare, runner = [], []
        for round_index in range(args.rounds):
            bare.append(bare_step_rate(args, config, args.steps))
            runner.append(runner_rate(args, config, input_file, args.steps, workdir))
            print(f"round {round_index}: bare {bare[-1]:.2f} seq/s, "
                  f"runner {runner[-1]:.2f} seq/s", flush=True)
    best_bare, best_runner = max(bare), max(runner)
    print(f"L{args.layers}/H{args.hidden}, batch {BATCH}, seq {SEQ}, "
          f"{PREDICTIONS} masked, XLA, {os.cpu_count()} cpus")
    print(f"bare train step: {best_bare:.2f} seq/s; whole runner: {best_runner:.2f} seq/s; "
          f"overhead {100 * (1 - best_runner / best_bare):.1f}%")


if __name__ == "__main__":
    main()
