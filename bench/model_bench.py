"""Speed of BertPretrainer training and BertEncoder inference on CPU, against keras-hub.

Work (as ../shared/bench/peer_keras_hub.py): batch 16, sequence 128, 20 masked
positions, vocab 30,522, AdamW; L=4/H=256/A=4 and BERT-base. Each mode is
`precision:compiler`, compiler `graph` (tf.function, TensorFlow's oneDNN kernels) or
`xla` (tf.function(jit_compile=True), as the keras-hub script uses). Prints
sequences/s, the fraction of the machine's float32 (or bfloat16) matmul peak that the
model's matmul FLOPs reach, and the ratio to keras-hub (float32 rows only).

    .venv/bin/python bench/model_bench.py --peer_python .venv-peer/bin/python --repeats 3
    .venv/bin/python bench/model_bench.py --models small --modes float32:graph
"""

import argparse
import os
import re
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from bert_tf.configs import BertConfig  # noqa: E402
from bert_tf.models import BertEncoder, BertPretrainer, pretraining_losses  # noqa: E402

BATCH, SEQ, PREDICTIONS, VOCAB = 16, 128, 20, 30522
MODELS = {"small": (4, 256, 4), "base": (12, 768, 12)}
PEER_SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "bench",
                           "peer_keras_hub.py")


def matmul_peak(dtype, size=4096, repeats=5):
    """Measured GFLOP/s of a size x size matmul: best of `repeats`, graph and XLA.

    Both compilers are tried because which one has the faster CPU matmul depends on
    the CPU (oneDNN's kernels are not used on every x86 chip).
    """
    a = tf.cast(tf.random.normal([size, size], dtype=tf.float32), dtype)
    best = float("inf")
    for jit_compile in (False, True):
        matmul = tf.function(lambda x: tf.matmul(x, x), jit_compile=jit_compile)
        matmul(a).numpy()
        for _ in range(repeats):
            start = time.perf_counter()
            matmul(a).numpy()
            best = min(best, time.perf_counter() - start)
    return 2 * size ** 3 / best / 1e9


def forward_flops(layers, hidden, with_mlm):
    """Matmul FLOPs of one sequence's forward pass (what the peak fraction counts)."""
    per_layer = 2 * SEQ * (4 * hidden * hidden + 2 * hidden * 4 * hidden)
    per_layer += 2 * 2 * SEQ * SEQ * hidden  # scores and context
    flops = layers * per_layer
    if with_mlm:
        flops += 2 * PREDICTIONS * (hidden * hidden + hidden * VOCAB)
    return flops


def make_batch(seed=0):
    rng = np.random.default_rng(seed)
    features = {
        "input_ids": rng.integers(0, VOCAB, (BATCH, SEQ)).astype("int32"),
        "input_mask": np.ones((BATCH, SEQ), "int32"),
        "segment_ids": np.zeros((BATCH, SEQ), "int32"),
        "masked_lm_positions": np.sort(rng.integers(0, SEQ, (BATCH, PREDICTIONS)),
                                       axis=1).astype("int32"),
        "masked_lm_ids": rng.integers(0, VOCAB, (BATCH, PREDICTIONS)).astype("int32"),
        "masked_lm_weights": np.ones((BATCH, PREDICTIONS), "float32"),
        "next_sentence_labels": rng.integers(0, 2, (BATCH,)).astype("int32"),
    }
    return {k: tf.constant(v) for k, v in features.items()}


def timed(fn, steps, repeats=1):
    """Best sequences/s over `repeats` windows of `steps` calls, after two warm-ups."""
    fn()  # compile
    fn()
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(steps):
            fn()
        best = max(best, steps * BATCH / (time.perf_counter() - start))
    return best


def bare_train_step(pretrainer, optimizer, jit_compile):
    """The bare pre-training step (forward, backward, update) as one tf.function."""
    @tf.function(jit_compile=jit_compile)
    def train_step(features):
        with tf.GradientTape() as tape:
            outputs = pretrainer(features, training=True)
            loss = pretraining_losses(features, outputs)["total_loss"]
        grads = tape.gradient(loss, pretrainer.trainable_variables)
        optimizer.apply_gradients(zip(grads, pretrainer.trainable_variables))
        return loss
    return train_step


def bench_ours(layers, hidden, heads, steps, jit_compile, repeats=1):
    """Returns (train seq/s, inference seq/s) for the current global dtype policy."""
    keras.utils.set_random_seed(0)
    config = BertConfig(vocab_size=VOCAB, hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=heads, intermediate_size=4 * hidden,
                        max_position_embeddings=512, type_vocab_size=2)
    pretrainer = BertPretrainer(BertEncoder(config))
    pretrainer.build()
    optimizer = keras.optimizers.AdamW(1e-4)
    optimizer.build(pretrainer.trainable_variables)
    batch = make_batch()

    train_step = bare_train_step(pretrainer, optimizer, jit_compile)
    encoder = pretrainer.encoder
    inputs = {k: batch[k] for k in ("input_ids", "input_mask", "segment_ids")}
    infer = tf.function(lambda x: encoder(x, training=False)["sequence_output"],
                        jit_compile=jit_compile)
    train = timed(lambda: train_step(batch).numpy(), steps, repeats)
    inference = timed(lambda: infer(inputs).numpy(), steps, repeats)
    return train, inference


def bench_peer(peer_python, layers, hidden, heads, repeats=1):
    """Runs keras-hub's script in its own interpreter `repeats` times; returns the best
    (train, infer) seq/s, or None if it failed."""
    runs = []
    for _ in range(repeats):
        result = subprocess.run(
            [peer_python, PEER_SCRIPT, str(layers), str(hidden), str(heads)],
            capture_output=True, text=True, check=False,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
        match = re.search(r"train ([\d.]+) seq/s, infer ([\d.]+) seq/s", result.stdout)
        if not match:
            print(f"peer failed (rc {result.returncode}): {result.stderr[-2000:]}",
                  file=sys.stderr)
            return None
        runs.append((float(match.group(1)), float(match.group(2))))
    return max(train for train, _ in runs), max(infer for _, infer in runs)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="small,base")
    parser.add_argument("--modes",
                        default="float32:graph,float32:xla,mixed_bfloat16:graph")
    parser.add_argument("--steps", type=int, default=10, help="timed steps, small model")
    parser.add_argument("--base_steps", type=int, default=5, help="timed steps, BERT-base")
    parser.add_argument("--repeats", type=int, default=1,
                        help="best of N: peer runs, and timed windows of ours")
    parser.add_argument("--peer_python", default=None,
                        help="Python of a venv with keras-hub (e.g. .venv-peer/bin/python)")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cpus; batch {BATCH}, seq {SEQ}, {PREDICTIONS} masked, "
          f"vocab {VOCAB}, AdamW")
    peaks = {"float32": matmul_peak(tf.float32), "mixed_bfloat16": matmul_peak(tf.bfloat16)}
    print(f"matmul peak 4096^2: float32 {peaks['float32']:.0f} GFLOP/s, "
          f"bfloat16 {peaks['mixed_bfloat16']:.0f} GFLOP/s", flush=True)
    rows = []
    for model_name in args.models.split(","):
        layers, hidden, heads = MODELS[model_name]
        train_flops = 3 * forward_flops(layers, hidden, with_mlm=True)
        infer_flops = forward_flops(layers, hidden, with_mlm=False)
        steps = args.steps if model_name == "small" else args.base_steps
        peer = (bench_peer(args.peer_python, layers, hidden, heads, args.repeats)
                if args.peer_python else None)
        if peer:
            peer_row = (f"| L{layers}/H{hidden} | keras-hub float32 xla | {peer[0]:.1f} | "
                        f"{100 * peer[0] * train_flops / 1e9 / peaks['float32']:.0f}% | "
                        f"{peer[1]:.1f} | "
                        f"{100 * peer[1] * infer_flops / 1e9 / peaks['float32']:.0f}% | 1.00x |"
                        " 1.00x |")
            rows.append(peer_row)
            print(peer_row, flush=True)
        for mode in args.modes.split(","):
            precision, compiler = mode.split(":")
            keras.config.set_dtype_policy(precision)
            try:
                train, infer = bench_ours(layers, hidden, heads, steps, compiler == "xla",
                                          args.repeats)
            finally:
                keras.config.set_dtype_policy("float32")
            peak = peaks[precision]
            row = (f"| L{layers}/H{hidden} | bert_tf {precision} {compiler} | {train:.1f} | "
                   f"{100 * train * train_flops / 1e9 / peak:.0f}% | {infer:.1f} | "
                   f"{100 * infer * infer_flops / 1e9 / peak:.0f}% |")
            if peer and precision == "float32":
                row += f" {train / peer[0]:.2f}x | {infer / peer[1]:.2f}x |"
            else:
                row += " - | - |"
            rows.append(row)
            print(row, flush=True)
    print("\n| model | implementation | train seq/s | train % peak | infer seq/s | "
          "infer % peak | train vs keras-hub | infer vs keras-hub |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
