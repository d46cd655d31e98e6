"""Check: each distillation loss of `bert_tf.tasks.distillation.losses` equals its
reference implementation's (`reference_distillation_losses.py`: transformers' DistilBERT
distiller, TinyBERT, MiniLM, in PyTorch) on the same fixed tensors, to 1e-6.

    .venv/bin/python bench/distillation_loss_check.py --reference_python=/tmp/refenv/bin/python

The tensors (seed --seed): logits [8, 5] (the teacher's 3x sharper), hidden states
[4, 7, 16], attention scores [4, 2, 7, 7] and values [4, 2, 7, 8], a padding mask with
rows of 7, 5, 3 and 6 real tokens (masked keys' scores are -10000 on both sides, as the
models add them), temperature 2. Prints each loss on both sides and the largest
difference; exits 1 when one differs by more than --tolerance.
"""

import json
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
from absl import app, flags

from bert_tf.tasks.distillation import losses

REPO = pathlib.Path(__file__).resolve().parents[1]
flags.DEFINE_string("reference_python", None, "Python with torch and numpy (the reference).")
flags.DEFINE_integer("seed", 0, "Seed of the tensors.")
flags.DEFINE_float("tolerance", 1e-6, "Largest difference accepted (absolute).")
FLAGS = flags.FLAGS


def make_tensors(seed):
    """The fixed tensors both sides compute on (float32 values)."""
    rng = np.random.default_rng(seed)
    mask = np.zeros([4, 7], np.float32)
    for row, length in enumerate((7, 5, 3, 6)):
        mask[row, :length] = 1.0
    bias = (1.0 - mask)[:, None, None, :] * -10000.0
    floats = lambda *shape: rng.normal(size=shape).astype(np.float32)  # noqa: E731
    return {"temperature": np.float32(2.0),
            "student_logits": floats(8, 5), "teacher_logits": 3 * floats(8, 5),
            "student_hidden": floats(4, 7, 16), "teacher_hidden": floats(4, 7, 16),
            "student_scores": floats(4, 2, 7, 7) + bias,
            "teacher_scores": 2 * floats(4, 2, 7, 7) + bias,
            "student_values": floats(4, 2, 7, 8), "teacher_values": floats(4, 2, 7, 8),
            "mask": mask}


def ours(arrays):
    """Our value of each loss."""
    mask, bias = arrays["mask"], (1.0 - arrays["mask"])[:, None, None, :] * -10000.0
    values = {
        "soft_target": losses.soft_target_loss(arrays["student_logits"],
                                               arrays["teacher_logits"],
                                               float(arrays["temperature"])),
        "hidden_cosine": losses.hidden_cosine(arrays["student_hidden"],
                                              arrays["teacher_hidden"], mask),
        "hidden_mse": losses.hidden_mse(arrays["student_hidden"], arrays["teacher_hidden"]),
        "attention_mse": losses.attention_score_mse(arrays["student_scores"],
                                                    arrays["teacher_scores"]),
        "minilm_attention_kl": losses.relation_kl(arrays["student_scores"],
                                                  arrays["teacher_scores"]),
        "minilm_value_kl": losses.relation_kl(
            losses.value_relation_logits(arrays["student_values"], bias),
            losses.value_relation_logits(arrays["teacher_values"], bias))}
    return {name: float(value) for name, value in values.items()}


def reference(arrays, python):
    """The reference script's values, computed in its Python."""
    with tempfile.TemporaryDirectory() as folder:
        path = pathlib.Path(folder) / "tensors.npz"
        np.savez(path, **arrays)
        done = subprocess.run([python, str(REPO / "bench" / "reference_distillation_losses.py"),
                               str(path)], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv):
    del argv
    if not FLAGS.reference_python:
        sys.exit("--reference_python is required (a Python with torch and numpy)")
    arrays = make_tensors(FLAGS.seed)
    mine, theirs = ours(arrays), reference(arrays, FLAGS.reference_python)
    worst = 0.0
    print(f"{'loss':<22}{'bert_tf':>16}{'reference':>16}{'|difference|':>16}")
    for name in mine:
        difference = abs(mine[name] - theirs[name])
        worst = max(worst, difference)
        print(f"{name:<22}{mine[name]:>16.9f}{theirs[name]:>16.9f}{difference:>16.2e}")
    print(f"largest difference {worst:.2e} (tolerance {FLAGS.tolerance:g})")
    sys.exit(0 if worst <= FLAGS.tolerance else 1)


if __name__ == "__main__":
    app.run(main)
