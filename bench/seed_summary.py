"""Seeds for the real checks, and our figures over them beside the reference's.

The reference's figures are read from `../shared/bench/README.md` (its table "Reference
fine-tuning"), never written here: Hugging Face transformers fine-tuning the same weights
with the same recipe, 3 seeds on a GPU.
"""

import os

import numpy as np
from absl import flags

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_BENCH_README = os.path.join(REPO, "..", "shared", "bench", "README.md")


def parse_seeds(text):
    """"1,2,3" -> [1, 2, 3]; raises ValueError naming the flag on anything else."""
    try:
        seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"--seeds must be comma-separated integers, got {text!r}") from None
    if not seeds:
        raise ValueError("--seeds must name at least one seed")
    return seeds


def reference_figures(task, metric, readme=SHARED_BENCH_README):
    """(mean, min, max) of the reference table's row `task` / `metric`, or None.

    Args:
      task: the table's first column up to any bracket, e.g. "mrpc", "mrpc4", "ner".
      metric: its second column, e.g. "dev accuracy", "EM", "F1".
    """
    if not os.path.isfile(readme):
        return None
    with open(readme, encoding="utf-8") as file:
        for line in file:
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if len(cells) < 6:
                continue
            if cells[0].split(" (")[0] == task and cells[1] == metric:
                try:
                    return float(cells[2]), float(cells[4]), float(cells[5])
                except ValueError:
                    return None
    return None


def summary_line(label, values, reference=None, digits=2, side="ours"):
    """`label: <side> mean x [min, max] over n seeds; reference mean y [min, max]; gap`."""
    values = np.asarray(values, dtype=float)
    text = (f"{label}: {side} mean {values.mean():.{digits}f} [{values.min():.{digits}f}, "
            f"{values.max():.{digits}f}] sd {values.std():.{digits}f} over {len(values)} "
            f"seed(s) ({', '.join(f'{v:.{digits}f}' for v in values)})")
    if reference:
        mean, low, high = reference
        gap = values.mean() - mean
        verdict = "within 1 point or above" if gap >= -1.0 else "BELOW the target"
        text += (f"; reference mean {mean:.2f} [{low:.2f}, {high:.2f}]; "
                 f"ours - reference = {gap:+.2f} ({verdict})")
    return text


def define_recipe_flags(epochs, seeds):
    """The fine-tuning recipe flags the real checks share (reference defaults)."""
    flags.DEFINE_float("epochs", epochs, "Training epochs.")
    flags.DEFINE_integer("max_seq_length", 128, "Max sequence length.")
    flags.DEFINE_integer("batch_size", 32, "Training batch size.")
    flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate.")
    flags.DEFINE_string("seeds", seeds, "Comma-separated seeds, one run each.")
    flags.DEFINE_string("head_initializer", None, "truncated_normal or normal (default: "
                                                  "the runner's).")
    flags.DEFINE_string("output_dir", None, "Output folder (default: a temporary one).")
    flags.DEFINE_bool("pack_sequences", False, "Train on packed rows (the runners' "
                                               "--pack_sequences; not for SQuAD).")
    flags.DEFINE_integer("max_sequences_per_row", 3, "Examples a packed row at most.")
