"""Real check (issue 51, item 4): our LoRA equals Hugging Face PEFT's.

    .venv/bin/python bench/lora_reference_check.py --reference_python=/tmp/refenv/bin/python

(a) The layer: a `Projection` with adapters (in 384, out 384, rank 8, alpha 16: the
shared model's width) and PEFT's `LoraLayer` on the same W, b, A, B and batch (32 rows):
the output, the gradients of sum(y * g) for A and B, and A and B after one step of our
BERT optimizer (`optimization.create_optimizer`: AdamW, weight decay 0.01, global-norm
clipping 1.0, epsilon 1e-6) against one `torch.optim.AdamW` step after
`clip_grad_norm_` (same rate). Expected within 1e-6.
(b) The model: a BertClassifier of the shared checkpoint (uncased_L-6_H-384_A-12) with
adapters on all six projections of every layer (rank 8, their B random, so that they
move the logits) and a random head (kernel N(0, 0.5): logits of about 1); our
`--export_format=peft` folder, loaded by PEFT's `PeftModel.from_pretrained` onto our
`--export_format=huggingface` export of the base (transformers'
BertForSequenceClassification), against our unmerged model's logits.
Expected within 1e-5; the merged model's logits are printed beside them.

Measured (2026-11-29, PEFT 0.21.2, torch 2.13.0+cpu, AMD EPYC, seed 0): (a) y 4.3e-07,
A and B after the step 2.9e-07 and 9.2e-08, gradients 4.9e-07 and 3.3e-07 of their
largest; (b) logits 7.8e-07 (largest 1.06; the adapters move them by up to 0.50),
merged vs unmerged 6.0e-07.

The reference script (bench/reference_lora.py) runs in `--reference_python` (torch,
transformers and peft); the two sides exchange .npz files in a work folder. Reads
../shared/data; not part of the test suite.
"""

import os
import subprocess
import sys
import tempfile

import numpy as np
import tensorflow as tf
from absl import app, flags

from bert_tf.layers import Projection
from bert_tf.models import BertClassifier
from bert_tf.serving import peft
from bert_tf.runs import export_checkpoint
from bert_tf.text.preprocessor import Preprocessor
from bert_tf.train import lora, optimization
from bert_tf.train.lora_names import TARGETS
from bert_tf.weights import checkpoints

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("BERT_TF_SHARED_DATA", os.path.join(REPO, "..", "shared", "data"))
CHECKPOINT = os.path.join(SHARED, "checkpoints", "uncased_L-6_H-384_A-12")
TEXTS = [("The quick brown fox jumps over the lazy dog.", "It was not amused."),
         ("BERT reads both sides of a word at once.", "Left and right."),
         ("Café prices rose by 3.5% in Zürich, officials said on Tuesday.", "Why?")]
WIDTH, RANK, ALPHA, ROWS = 384, 8, 16.0, 32
STEP = dict(lr=1e-3, weight_decay=0.01, epsilon=1e-6, clipnorm=1.0)

flags.DEFINE_string("reference_python", None, "A Python with torch, transformers and peft.")
flags.DEFINE_integer("max_seq_length", 32, "Row length of (b).")
flags.DEFINE_integer("seed", 0, "Seed of the random weights and inputs.")
FLAGS = flags.FLAGS


def layer_side(work, rng):
    """(a), ours: writes layer.npz for the reference; returns our y, gradients, A, B."""
    weights = {"W": rng.normal(0, 0.02, (WIDTH, WIDTH)), "b": rng.normal(0, 0.02, WIDTH),
               "A": rng.uniform(-1, 1, (RANK, WIDTH)) / np.sqrt(WIDTH),
               "B": rng.normal(0, 0.02, (WIDTH, RANK))}  # torch's layouts: [out, in]
    weights = {key: value.astype(np.float32) for key, value in weights.items()}
    x = rng.normal(size=(ROWS, WIDTH)).astype(np.float32)
    g = rng.normal(size=(ROWS, WIDTH)).astype(np.float32)
    layer = Projection(WIDTH, lora_rank=RANK, lora_alpha=ALPHA, name="proj")
    layer.build((None, WIDTH))
    for variable, key in zip(layer.weights, ("W", "b", "A", "B")):
        variable.assign(weights[key] if key == "b" else weights[key].T)
    layer.bias.trainable = False  # as `apply_lora` leaves the encoder's biases
    trained = layer.trainable_variables
    assert [v.path for v in trained] == ["proj/lora_a", "proj/lora_b"], trained
    optimizer = optimization.create_optimizer(STEP["lr"], 10, 0,
                                              weight_decay_rate=STEP["weight_decay"],
                                              clipnorm=STEP["clipnorm"],
                                              epsilon=STEP["epsilon"])
    optimizer.build(trained)
    lr = float(optimizer.learning_rate)
    with tf.GradientTape() as tape:
        y = layer(x)
        loss = tf.reduce_sum(y * g)
    grads = tape.gradient(loss, trained)
    optimizer.apply_gradients(zip(grads, trained))
    np.savez(os.path.join(work, "layer.npz"), x=x, g=g, r=RANK, alpha=ALPHA,
             **dict(STEP, lr=lr), **weights)
    return {"y": y.numpy(), "grad_A": grads[0].numpy().T, "grad_B": grads[1].numpy().T,
            "A": layer.lora_a.numpy().T, "B": layer.lora_b.numpy().T}


def encode(length):
    """int32 input_ids, input_mask, segment_ids [B, length] of the TEXTS pairs."""
    preprocessor = Preprocessor(os.path.join(CHECKPOINT, "vocab.txt"), True, length,
                                text_pair=True, trim=False)
    features = preprocessor(tuple(list(column) for column in zip(*TEXTS)))
    return {name: np.asarray(value, np.int32) for name, value in features.items()}


def model_side(work, rng):
    """(b), ours: writes the adapter, base and inputs folders; returns our logits
    (base alone, unmerged, merged)."""
    inputs = encode(FLAGS.max_seq_length)
    np.savez(os.path.join(work, "inputs.npz"), num_labels=2, **inputs)
    model = checkpoints.from_pretrained(BertClassifier, CHECKPOINT, num_classes=2)
    for variable in model.weights:  # a head of a trained model's size: logits of ~1
        if variable.path.endswith("classifier/dense/kernel"):
            variable.assign(rng.normal(0, 0.5, variable.shape).astype(np.float32))
    base = model(inputs, training=False)["logits"].numpy()
    lora.apply_lora(model, lora.LoraSettings(rank=RANK, alpha=ALPHA, targets=TARGETS))
    for variable in model.weights:
        if variable.path.endswith("/lora_b"):
            variable.assign(rng.normal(0, 0.05, variable.shape).astype(np.float32))
    unmerged = model(inputs, training=False)["logits"].numpy()
    peft.export_peft(model, os.path.join(work, "adapter"))
    export_checkpoint.export_from_checkpoint(export_checkpoint.ExportOptions(
        init_checkpoint=CHECKPOINT, model_type="encoder", export_format="huggingface",
        export_dir=os.path.join(work, "base")))
    lora.merge_adapters(model)
    merged = model(inputs, training=False)["logits"].numpy()
    return base, unmerged, merged


def report(name, ours, theirs, limit):
    """Prints one comparison; returns whether it is within `limit`."""
    difference = float(np.abs(ours - theirs).max())
    scale = float(np.abs(theirs).max())
    print(f"{name}: {ours.shape}, max |ours - PEFT| = {difference:.2e} (largest |value| "
          f"{scale:.3g}; {'within' if difference <= limit else 'ABOVE'} {limit:g})")
    return difference <= limit


def main(argv):
    del argv
    if not FLAGS.reference_python:
        sys.exit("lora_reference_check: pass --reference_python (torch, transformers, peft)")
    work = tempfile.mkdtemp(prefix="lora_reference_")
    rng = np.random.default_rng(FLAGS.seed)
    ours = layer_side(work, rng)
    base, unmerged, merged = model_side(work, rng)
    subprocess.run([FLAGS.reference_python, os.path.join(REPO, "bench", "reference_lora.py"),
                    f"--work_dir={work}"], check=True)
    layer = np.load(os.path.join(work, "layer_reference.npz"))
    theirs = np.load(os.path.join(work, "model_reference.npz"))
    print(f"PEFT {theirs['peft_version']}, torch {theirs['torch_version']}; work folder {work}")
    print(f"(a) LoRA layer in {WIDTH} out {WIDTH} rank {RANK} alpha {ALPHA:g}, {ROWS} rows")
    within = [report(key, ours[key], layer[key], 1e-6) for key in ("y", "A", "B")]
    for key in ("grad_A", "grad_B"):  # sums over the batch: compared relative to their size
        relative = float(np.abs(ours[key] - layer[key]).max() / np.abs(layer[key]).max())
        print(f"{key}: max |ours - PEFT| / max |PEFT| = {relative:.2e}")
        within.append(relative <= 1e-6)
    print(f"(b) BertClassifier of {os.path.basename(CHECKPOINT)}, adapters on "
          f"{', '.join(TARGETS)} (rank {RANK}), {len(TEXTS)} rows")
    print(f"adapters move the logits by up to {np.abs(unmerged - base).max():.3g}; merged "
          f"vs unmerged {np.abs(merged - unmerged).max():.2e}")
    within.append(report("logits (PEFT folder on the transformers base)", unmerged,
                         theirs["logits"], 1e-5))
    print("all within their limits" if all(within) else "SOME ABOVE THEIR LIMITS")


if __name__ == "__main__":
    app.run(main)
