"""Speed of BertPretrainer training and BertEncoder inference on CPU, against keras-hub,
every side timed in the same alternating rounds (ABBA) of one process.

Work (as ../shared/bench/peer_keras_hub.py): batch 16, sequence 128, 20 masked
positions, vocab 30,522, AdamW; L=4/H=256/A=4 and BERT-base. Each of our modes is
`precision:compiler`, compiler `graph` (tf.function, TensorFlow's oneDNN kernels) or
`xla` (tf.function(jit_compile=True), as the keras-hub script uses). The peer is that
script's model and steps (keras-hub's BertBackbone and MaskedLMHead, `train_on_batch`
compiled with XLA, inference through a jit-compiled tf.function), built in this process
(keras-hub must be importable: the keras-hub extra).

Every side (a mode's train step, a mode's inference, the peer's two) makes `--steps`
calls a round, after two untimed ones; the sides run in one order in even rounds and in
the reverse order in odd ones, so that the load of a shared machine falls on all of them
alike. Printed: each side's median sequences/s over the rounds, the fraction of the
machine's matmul peak its matmul FLOPs reach, and for float32 modes the median of the
round ratios against keras-hub (ours over the peer's, in the same round) with their
range.

    .venv/bin/python bench/model_bench.py --models small --modes float32:graph,float32:xla \
        --steps 5 --rounds 10
    .venv/bin/python bench/model_bench.py --models base --modes float32:xla --steps 2 \
        --rounds 4
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import machine  # noqa: E402
from bert_tf.configs import BertConfig  # noqa: E402
from bert_tf.models import BertEncoder, BertPretrainer, pretraining_losses  # noqa: E402

BATCH, SEQ, PREDICTIONS, VOCAB = 16, 128, 20, 30522
MODELS = {"small": (4, 256, 4), "base": (12, 768, 12)}
PEER = "keras-hub float32 xla"


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


def our_sides(layers, hidden, heads, precision, jit_compile):
    """(train call, inference call) of our pretrainer under `precision`."""
    keras.config.set_dtype_policy(precision)
    try:
        keras.utils.set_random_seed(0)
        config = BertConfig(vocab_size=VOCAB, hidden_size=hidden, num_hidden_layers=layers,
                            num_attention_heads=heads, intermediate_size=4 * hidden,
                            max_position_embeddings=512, type_vocab_size=2)
        pretrainer = BertPretrainer(BertEncoder(config))
        pretrainer.build()
        optimizer = keras.optimizers.AdamW(1e-4)
        optimizer.build(pretrainer.trainable_variables)
    finally:
        keras.config.set_dtype_policy("float32")
    batch = make_batch()

    @tf.function(jit_compile=jit_compile)
    def train_step(features):
        with tf.GradientTape() as tape:
            outputs = pretrainer(features, training=True)
            loss = pretraining_losses(features, outputs)["total_loss"]
        grads = tape.gradient(loss, pretrainer.trainable_variables)
        optimizer.apply_gradients(zip(grads, pretrainer.trainable_variables))
        return loss

    inputs = {k: batch[k] for k in ("input_ids", "input_mask", "segment_ids")}
    infer = tf.function(lambda x: pretrainer.encoder(x, training=False)["sequence_output"],
                        jit_compile=jit_compile)
    return (lambda: train_step(batch).numpy()), (lambda: infer(inputs).numpy())


def peer_sides(layers, hidden, heads):
    """(train call, inference call) of ../shared/bench/peer_keras_hub.py's work."""
    import keras_hub  # pylint: disable=import-outside-toplevel
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=VOCAB, num_layers=layers, num_heads=heads, hidden_dim=hidden,
        intermediate_dim=4 * hidden, max_sequence_length=512)
    head = keras_hub.layers.MaskedLMHead(vocabulary_size=VOCAB,
                                         token_embedding=backbone.token_embedding,
                                         activation=None)
    ids, seg, mask = (keras.Input((SEQ,), dtype="int32") for _ in range(3))
    pos = keras.Input((PREDICTIONS,), dtype="int32")
    out = backbone({"token_ids": ids, "segment_ids": seg, "padding_mask": mask})
    model = keras.Model([ids, seg, mask, pos],
                        head(out["sequence_output"], mask_positions=pos))
    model.compile(optimizer=keras.optimizers.AdamW(1e-4),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  jit_compile=True)
    rng = np.random.default_rng(0)
    x = [rng.integers(0, VOCAB, (BATCH, SEQ)).astype("int32"), np.zeros((BATCH, SEQ), "int32"),
         np.ones((BATCH, SEQ), "int32"),
         np.sort(rng.integers(0, SEQ, (BATCH, PREDICTIONS))).astype("int32")]
    y = rng.integers(0, VOCAB, (BATCH, PREDICTIONS)).astype("int32")
    encoder = keras.Model([ids, seg, mask], out["sequence_output"])
    infer = tf.function(lambda a, b, c: encoder([a, b, c], training=False), jit_compile=True)
    return (lambda: model.train_on_batch(x, y)), (lambda: infer(*x[:3]).numpy())


def run_rounds(sides, steps, rounds, batch=BATCH):
    """{side: [sequences/s of each round]}: `steps` calls a side a round, ABBA order
    (each call a batch of `batch` sequences)."""
    for call in sides.values():  # compile, then one more untimed call
        call()
        call()
    names = list(sides)
    rates = {name: [] for name in names}
    for number in range(rounds):
        for name in names if number % 2 == 0 else names[::-1]:
            start = time.perf_counter()
            for _ in range(steps):
                sides[name]()
            rates[name].append(steps * batch / (time.perf_counter() - start))
            print(f"round {number + 1}/{rounds} {name}: {rates[name][-1]:.1f} seq/s",
                  flush=True)
    return rates


def table_rows(model_name, rates, peaks):
    """Markdown rows of one model: median seq/s, % of peak, ratio to keras-hub."""
    layers, hidden, _ = MODELS[model_name]
    flops = {"train": 3 * forward_flops(layers, hidden, with_mlm=True),
             "infer": forward_flops(layers, hidden, with_mlm=False)}
    rows = []
    for implementation in dict.fromkeys(name for name, _ in rates):
        precision = "float32" if implementation == PEER else implementation.split()[0]
        cells = []
        for kind in ("train", "infer"):
            median = float(np.median(rates[implementation, kind]))
            cells += [f"{median:.1f}",
                      f"{100 * median * flops[kind] / 1e9 / peaks[precision]:.0f}%"]
        for kind in ("train", "infer"):
            if (PEER, kind) in rates and precision == "float32" and implementation != PEER:
                ratios = (np.array(rates[implementation, kind])
                          / np.array(rates[PEER, kind]))
                cells.append(f"{np.median(ratios):.2f}x ({ratios.min():.2f}x to "
                             f"{ratios.max():.2f}x)")
            else:
                cells.append("-")
        rows.append(f"| L{layers}/H{hidden} | {implementation} | {' | '.join(cells)} |")
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="small,base")
    parser.add_argument("--modes",
                        default="float32:graph,float32:xla,mixed_bfloat16:graph")
    parser.add_argument("--steps", type=int, default=5, help="timed calls a side a round")
    parser.add_argument("--rounds", type=int, default=10, help="alternating rounds")
    parser.add_argument("--no_peer", action="store_true", help="time ours alone")
    args = parser.parse_args()
    print(machine.describe(), flush=True)
    print(f"{os.cpu_count()} cpus; batch {BATCH}, seq {SEQ}, {PREDICTIONS} masked, "
          f"vocab {VOCAB}, AdamW; {args.rounds} rounds of {args.steps} calls a side")
    peaks = {"float32": matmul_peak(tf.float32), "mixed_bfloat16": matmul_peak(tf.bfloat16)}
    print(f"matmul peak 4096^2: float32 {peaks['float32']:.0f} GFLOP/s, "
          f"bfloat16 {peaks['mixed_bfloat16']:.0f} GFLOP/s", flush=True)
    rows = []
    for model_name in args.models.split(","):
        layers, hidden, heads = MODELS[model_name]
        sides = {}
        if not args.no_peer:
            sides[PEER, "train"], sides[PEER, "infer"] = peer_sides(layers, hidden, heads)
        for mode in args.modes.split(","):
            precision, compiler = mode.split(":")
            name = f"{precision} {compiler}"
            sides[name, "train"], sides[name, "infer"] = our_sides(
                layers, hidden, heads, precision, compiler == "xla")
        rows += table_rows(model_name, run_rounds(sides, args.steps, args.rounds), peaks)
    print("\n| model | implementation | train seq/s | train % peak | infer seq/s | "
          "infer % peak | train vs keras-hub | infer vs keras-hub |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
