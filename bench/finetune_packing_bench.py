"""Fine-tuning on packed rows vs one example a row: useful tokens/s, in one run.

For each task at max_seq_length 128, batch 32 examples, with the shared 6-layer uncased
BERT's config (L6/H384; weights do not change the speed):
    MRPC    sentence pairs (all 3,668 training pairs)
    SST-2   single sentences (the first --sst2_examples training rows)
    CoNLL   CoNLL-2003 NER sentences (eng.train, windows as run_ner makes them)
the training step of the runners (`bert_tf.train.loop.train` on the task's own dataset
and loss) runs in these modes:
    static    one example a row of 128 tokens (what TPU and XLA runs compute)
    trimmed   one example a row, each batch cut to its longest example (the CPU / GPU
              default without XLA)
    packed    up to 3 examples a row of 128 (--pack_sequences), a batch of rows holding
              32 examples on average
without XLA, and static and packed again with XLA (`--xla_modes`). Modes alternate
`--repeats` times in this one process; the best run of each counts. For each: rows/s
after the first (compiling) loop, examples/s, useful (non-padding) tokens/s = examples/s
x mean real tokens an example, and the padding share of the tokens computed. Ratios are
packed over static and over trimmed, from the same run.

    .venv/bin/python bench/finetune_packing_bench.py
"""

import argparse
import os
import pathlib
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
from absl import logging  # noqa: E402

import machine  # noqa: E402
from bert_tf.models import BertClassifier, BertEncoder, BertTokenClassifier  # noqa: E402
from bert_tf.tasks.classification import data as classification_data  # noqa: E402
from bert_tf.tasks.classification import task as classification_task  # noqa: E402
from bert_tf.tasks.ner import data as ner_data  # noqa: E402
from bert_tf.tasks.ner import task as ner_task  # noqa: E402
from bert_tf.text import tokenization  # noqa: E402
from bert_tf.train import distribute, finetune_packing, loop, optimization  # noqa: E402
from bert_tf.weights import checkpoints  # noqa: E402

SEQ, BATCH, SEED = 128, 32, 1
SHARED = pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "data"
CHECKPOINT = SHARED / "checkpoints" / "uncased_L-6_H-384_A-12"


class Task:
    """A task's training features and how the runner batches and scores them."""

    def __init__(self, name, lengths, make_model, loss_fn, dataset_fn, plan):
        self.name, self.lengths, self.plan = name, np.asarray(lengths), plan
        self.make_model, self.loss_fn, self.dataset_fn = make_model, loss_fn, dataset_fn


def glue_task(name, tokenizer, work, per_row, limit=None):
    processor = classification_data.get_processor(name)
    examples = processor.get_examples(str(SHARED / "glue" / name), "train")[:limit]
    labels = processor.get_labels(str(SHARED / "glue" / name))
    path = str(work / f"{name}.tf_record")
    classification_data.write_example_features(examples, labels, SEQ, tokenizer, path)

    lengths = classification_data.record_lengths(path, SEQ, False)

    def dataset_fn(mode, rows):
        return lambda context: classification_data.classifier_dataset(
            path, SEQ, rows, True, False, seed=SEED, input_context=context,
            trim_padding=mode == "trimmed",
            max_sequences_per_row=per_row if mode == "packed" else None)

    return Task(name, lengths, lambda encoder: BertClassifier(encoder, len(labels)),
                classification_task.classifier_loss_fn(False), dataset_fn,
                finetune_packing.plan_packing(lengths, SEQ, per_row, BATCH))


def conll_task(tokenizer, per_row):
    sentences = ner_data.read_tagged_file(str(SHARED / "conll2003" / "eng.train"))
    labels = ner_data.build_label_list(sentences)
    features = ner_data.convert_sentences_to_features(sentences, labels, SEQ, tokenizer)
    lengths = features.input_mask.sum(axis=1)
    plan = finetune_packing.plan_packing(lengths, SEQ, per_row, BATCH)

    def dataset_fn(mode, rows):
        return ner_task.windows_dataset_fn(
            features, rows, True, SEED, trim=mode == "trimmed",
            packing_plan=plan if mode == "packed" else None, max_sequences_per_row=per_row)

    return Task("CoNLL", lengths, lambda encoder: BertTokenClassifier(encoder, len(labels)),
                ner_task.token_loss_fn, dataset_fn, plan)


def computed_tokens_per_row(dataset_fn, batches=30):
    """Mean tokens computed a row (the batches' sequence length) over `batches` batches."""
    return float(np.mean([batch["input_ids"].shape[1]
                          for batch in dataset_fn(None).take(batches)]))


def measure(task, mode, use_xla, steps, work):
    """Rows/s of the runner's training step after the first loop (median of loops)."""
    rows = task.plan.rows_per_batch if mode == "packed" else BATCH
    config = checkpoints.load_config(str(CHECKPOINT / "bert_config.json"))
    result = loop.train(
        distribute.get_strategy("one_device"),
        lambda: task.make_model(BertEncoder(config)), task.loss_fn,
        task.dataset_fn(mode, rows),
        optimizer_fn=lambda: optimization.create_optimizer(2e-5, steps, 0),
        settings=loop.LoopSettings(
            output_dir=tempfile.mkdtemp(dir=work), num_train_steps=steps,
            global_batch_size=rows, save_checkpoints_steps=steps,
            steps_per_loop=max(1, steps // 4), use_xla=use_xla))
    rates = [entry["sequences_per_second"] for entry in result.history[1:]]
    return float(np.median(rates)), rows


def report(task, label, rows_per_second, computed):
    """Prints a mode's figures; returns its useful tokens/s."""
    per_row = task.plan.examples_per_row if label.startswith("packed") else 1.0
    mean_length = task.lengths.mean()
    examples = rows_per_second * per_row
    useful = examples * mean_length
    padding = 1 - per_row * mean_length / computed
    print(f"{task.name:6s} {label:14s} {rows_per_second:8.2f} rows/s {examples:8.1f} "
          f"examples/s {useful:10,.0f} useful tokens/s, padding {padding:6.1%} "
          f"({computed:.1f} tokens computed a row)", flush=True)
    return useful


def run_task(task, args, work):
    print(f"{task.name}: {task.plan.describe()}; mean {task.lengths.mean():.1f} real "
          "tokens an example", flush=True)
    modes = [(mode, False) for mode in ("static", "trimmed", "packed")]
    if args.xla_modes:
        modes += [("static", True), ("packed", True)]
    best = {}
    for _ in range(args.repeats):
        for mode, use_xla in modes:
            rate, rows = measure(task, mode, use_xla, args.steps, work)
            key = f"{mode}{' XLA' if use_xla else ''}"
            best[key] = max(best.get(key, 0.0), rate)
    useful = {}
    for key, rate in best.items():
        mode = key.split()[0]
        rows = task.plan.rows_per_batch if mode == "packed" else BATCH
        computed = (computed_tokens_per_row(task.dataset_fn(mode, rows))
                    if mode == "trimmed" else SEQ)
        useful[key] = report(task, key, rate, computed)
    line = (f"{task.name} useful tokens/s, packed / static: "
            f"{useful['packed'] / useful['static']:.2f}x, packed / trimmed: "
            f"{useful['packed'] / useful['trimmed']:.2f}x")
    if args.xla_modes:
        line += f"; with XLA packed / static: {useful['packed XLA'] / useful['static XLA']:.2f}x"
    print(line, flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="MRPC,SST-2,CoNLL")
    parser.add_argument("--sst2_examples", type=int, default=4000)
    parser.add_argument("--steps", type=int, default=12, help="training steps a run")
    parser.add_argument("--repeats", type=int, default=1,
                        help="alternating runs of every mode; best of each")
    parser.add_argument("--xla_modes", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--max_sequences_per_row", type=int, default=3)
    args = parser.parse_args()
    print(machine.describe(), flush=True)
    logging.set_verbosity(logging.WARNING)
    tokenizer = tokenization.FullTokenizer(str(CHECKPOINT / "vocab.txt"), do_lower_case=True)
    print(f"{os.cpu_count()} cpus; L6/H384 at max_seq_length {SEQ}, batch {BATCH} "
          f"examples, up to {args.max_sequences_per_row} a packed row, {args.steps} steps a run", flush=True)
    with tempfile.TemporaryDirectory() as folder:
        work = pathlib.Path(folder)
        for name in args.tasks.split(","):
            started = time.time()
            per_row = args.max_sequences_per_row
            task = (conll_task(tokenizer, per_row) if name == "CoNLL" else
                    glue_task(name, tokenizer, work, per_row,
                              args.sst2_examples if name == "SST-2" else None))
            run_task(task, args, work)
            print(f"({time.time() - started:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
