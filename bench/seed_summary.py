"""Seeds for the real checks, and our figures over them beside the reference's.

The reference's figures are read from `../shared/bench/README.md` (its table "Reference
fine-tuning"), never written here: Hugging Face transformers fine-tuning the same weights
with the same recipe, 3 seeds on a GPU.
"""

import os
import shutil

import numpy as np
from absl import flags

from bert_tf.tasks.ner import data as ner_data

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


def first_glue_rows(task_dir, task, count, work_dir):
    """A copy of the GLUE folder `task_dir` in `work_dir`/data whose train.tsv keeps its
    first `count` rows (CoLA's file has no header); returns the copy's path."""
    data_dir = os.path.join(work_dir, "data")
    os.makedirs(data_dir, exist_ok=True)
    for name in os.listdir(task_dir):
        if name.endswith(".tsv") and name != "train.tsv":
            shutil.copy(os.path.join(task_dir, name), data_dir)
    with open(os.path.join(task_dir, "train.tsv"), encoding="utf-8") as source, \
            open(os.path.join(data_dir, "train.tsv"), "w", encoding="utf-8") as target:
        header = task.lower() != "cola"
        for index, line in enumerate(source):
            if index >= count + int(header):
                break
            target.write(line)
    return data_dir


def write_first_sentences(source, target, count):
    """Writes the first `count` sentences of a CoNLL file (0: all), without -DOCSTART-.

    Sentences are what `bert_tf.tasks.ner.data.read_tagged_file` reads, so the training set is
    the reference's `conll(path)[:count]`. Returns the number written.
    """
    sentences = ner_data.read_tagged_file(source)
    if count:
        sentences = sentences[:count]
    with open(target, "w", encoding="utf-8") as out:
        for sentence in sentences:
            for word, tag in zip(sentence.words, sentence.tags):
                out.write(f"{word} {tag}\n")
            out.write("\n")
    return len(sentences)
