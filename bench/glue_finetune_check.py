"""Real check: fine-tune the shared 6-layer uncased BERT on GLUE MRPC / SST-2 and report dev
metrics per seed against the majority-class baseline, with wall time; for MRPC also the
mean over the seeds beside the reference's (Hugging Face transformers on the same weights
and recipe, ../shared/bench/README.md: rows `mrpc` at lr 5e-5 and `mrpc4` at lr 1e-4).

    .venv/bin/python bench/glue_finetune_check.py --task=MRPC --learning_rate=5e-5 --seeds=1,2,3
    .venv/bin/python bench/glue_finetune_check.py --task=MRPC --learning_rate=1e-4 --seeds=1,2,3
    .venv/bin/python bench/glue_finetune_check.py --task=SST-2 --train_examples=4000
    .venv/bin/python bench/glue_finetune_check.py --task=MRPC --learning_rate=1e-4 --pack_sequences
    .venv/bin/python bench/glue_finetune_check.py --task=MRPC --via=fit --seeds=1,2,3
    .venv/bin/python bench/glue_finetune_check.py --task=MRPC --learning_rate=1e-3 \
        --lora_rank=8 --lora_alpha=16 --lora_dropout=0.1 --seeds=1,2,3 \
        --reference_python=/tmp/refenv/bin/python

`--via=fit` trains through the Python library (`bert_tf.TextClassifier.fit` on the texts
and labels held in memory) instead of the runner: the same recipe must reach the same
scores.

`--lora_rank=R` (with `--lora_alpha`, `--lora_dropout`, `--lora_targets`) fine-tunes LoRA
adapters as the runners' flags of those names do. With `--reference_python` (torch,
transformers and peft installed) the same seeds and recipe also run on Hugging Face PEFT
(bench/reference_lora_finetune.py) over our transformers export of the same checkpoint,
and both sides' means and ranges are printed.

The reference recipe for MRPC: all 3,668 training pairs, max_seq_length 128, batch 32,
3 epochs, 10% warm-up, AdamW eps 1e-6, weight decay 0.01, clip 1.0, dropout 0.1; accuracy
and F1 on the 408 dev pairs.

Reads ../shared/data (checkpoints/uncased_L-6_H-384_A-12, glue/<task>). A training subset
(`--train_examples`, the first N rows) is written to a temporary data folder; dev is
always the whole dev set. Not part of the test suite.
"""

import collections
import json
import os
import subprocess
import sys
import tempfile
import time

from absl import app, flags, logging

import bert_tf
import seed_summary
from bert_tf.tasks.classification import data as classification_data
from bert_tf.runs import export_checkpoint
from bert_tf.tasks.classification import task as classification_task
from bert_tf.tasks.classification.options import ClassifierOptions

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("BERT_TF_SHARED_DATA", os.path.join(REPO, "..", "shared", "data"))

flags.DEFINE_string("task", "MRPC", "GLUE task folder under shared/data/glue.")
flags.DEFINE_integer("train_examples", 0, "Use the first N training rows (0: all).")
seed_summary.define_recipe_flags(epochs=3.0, seeds="1")
flags.DEFINE_bool("trim_padding", True, "Cut batches to their longest sequence.")
flags.DEFINE_enum("via", "runner", ["runner", "fit"], "Train with the runner (as "
                  "bert-run-classifier) or with bert_tf.TextClassifier.fit.")
flags.DEFINE_integer("lora_rank", 0, "LoRA rank (0: full fine-tuning).")
flags.DEFINE_float("lora_alpha", None, "LoRA alpha (default: the rank).")
flags.DEFINE_float("lora_dropout", 0.0, "Dropout on the adapters' input.")
flags.DEFINE_list("lora_targets", ["query", "value"], "Projections that get adapters.")
flags.DEFINE_string("reference_python", None, "A Python with torch, transformers and peft: "
                    "run the same seeds and recipe on PEFT (with --lora_rank).")
FLAGS = flags.FLAGS


def run_seed(seed, data_dir, work_dir, checkpoint):
    options = ClassifierOptions(
        task_name=FLAGS.task, data_dir=data_dir, init_checkpoint=checkpoint,
        output_dir=os.path.join(work_dir, f"seed{seed}"), do_lower_case=True, do_train=True,
        do_eval=True, max_seq_length=FLAGS.max_seq_length, train_batch_size=FLAGS.batch_size,
        eval_batch_size=64, learning_rate=FLAGS.learning_rate,
        num_train_epochs=FLAGS.epochs, warmup_proportion=0.1, save_checkpoints_steps=100000,
        steps_per_loop=10, seed=seed, trim_padding=FLAGS.trim_padding,
        pack_sequences=FLAGS.pack_sequences, max_sequences_per_row=FLAGS.max_sequences_per_row,
        **({"head_initializer": FLAGS.head_initializer} if FLAGS.head_initializer else {}),
        **lora_options())
    started = time.time()
    results = classification_task.run(options)
    results["seconds"] = time.time() - started
    return results


def lora_options():
    """The ClassifierOptions fields of the --lora_* flags (none without --lora_rank)."""
    if not FLAGS.lora_rank:
        return {}
    return {"lora_rank": FLAGS.lora_rank, "lora_alpha": FLAGS.lora_alpha,
            "lora_dropout": FLAGS.lora_dropout, "lora_targets": FLAGS.lora_targets}


def run_reference(seeds, data_dir, work_dir, checkpoint):
    """PEFT on the same seeds, data and recipe (bench/reference_lora_finetune.py in
    --reference_python): its per-seed results."""
    base_dir = os.path.join(work_dir, "reference_base")
    if not os.path.isdir(base_dir):
        export_checkpoint.export_from_checkpoint(export_checkpoint.ExportOptions(
            init_checkpoint=checkpoint, model_type="encoder", export_format="huggingface",
            export_dir=base_dir))
    output_json = os.path.join(work_dir, "reference_results.json")
    subprocess.run([FLAGS.reference_python, os.path.join(REPO, "bench",
                                                         "reference_lora_finetune.py"),
                    f"--base_dir={base_dir}", f"--data_dir={data_dir}",
                    f"--task={FLAGS.task.upper()}", f"--seeds={','.join(map(str, seeds))}",
                    f"--epochs={FLAGS.epochs}", f"--batch_size={FLAGS.batch_size}",
                    f"--max_seq_length={FLAGS.max_seq_length}",
                    f"--learning_rate={FLAGS.learning_rate}", f"--lora_rank={FLAGS.lora_rank}",
                    f"--lora_alpha={FLAGS.lora_alpha or FLAGS.lora_rank}",
                    f"--lora_dropout={FLAGS.lora_dropout}",
                    f"--lora_targets={','.join(FLAGS.lora_targets)}",
                    f"--output_json={output_json}"], check=True)
    with open(output_json, encoding="utf-8") as file:
        return json.load(file)["runs"]


def run_seed_with_fit(seed, data_dir, checkpoint):
    """`run_seed` through `bert_tf.TextClassifier`: texts and labels from memory."""
    processor = classification_data.get_processor(FLAGS.task)
    train, dev = (processor.get_examples(data_dir, split) for split in ("train", "dev"))

    def columns(examples):
        texts_a = [e.text_a for e in examples]
        if examples[0].text_b is None:
            return texts_a, [e.label for e in examples]
        return (texts_a, [e.text_b for e in examples]), [e.label for e in examples]
    started = time.time()
    model = bert_tf.TextClassifier.from_pretrained(
        checkpoint, labels=processor.get_labels(), max_seq_length=FLAGS.max_seq_length,
        seed=seed)
    x, y = columns(train)
    model.fit(x, y, batch_size=FLAGS.batch_size, epochs=FLAGS.epochs,
              learning_rate=FLAGS.learning_rate, seed=seed, verbose=2)
    dev_x, dev_y = columns(dev)
    predicted = model.predict(dev_x, batch_size=64, verbose=0)["labels"]
    correct = [p == t for p, t in zip(predicted, dev_y)]
    positive = processor.get_labels()[-1]
    tp = sum(p == t == positive for p, t in zip(predicted, dev_y))
    fp = sum(p == positive != t for p, t in zip(predicted, dev_y))
    fn = sum(t == positive != p for p, t in zip(predicted, dev_y))
    return {"eval_accuracy": sum(correct) / len(correct),
            "eval_f1": 2 * tp / max(1, 2 * tp + fp + fn),
            "global_step": int(model.optimizer.iterations.numpy()),
            "seconds": time.time() - started}


def print_reference_comparison(rows):
    """MRPC: our mean over the seeds beside the reference row of the same learning rate."""
    reference_task = {5e-5: "mrpc", 1e-4: "mrpc4"}.get(FLAGS.learning_rate)
    if (FLAGS.task.upper() != "MRPC" or FLAGS.train_examples or FLAGS.epochs != 3.0
            or FLAGS.lora_rank):
        reference_task = None  # not the reference recipe
    for key, metric in (("eval_accuracy", "dev accuracy"), ("eval_f1", "dev F1")):
        if key not in rows[0]:
            continue
        reference = (seed_summary.reference_figures(reference_task, metric)
                     if reference_task else None)
        print(seed_summary.summary_line(f"{FLAGS.task} {metric} (lr {FLAGS.learning_rate})",
                                        [100 * r[key] for r in rows], reference))


def main(argv):
    del argv
    logging.set_verbosity(logging.INFO)
    try:
        seeds = seed_summary.parse_seeds(FLAGS.seeds)
    except ValueError as error:
        sys.exit(f"glue_finetune_check: error: {error}")
    checkpoint = os.path.join(SHARED, "checkpoints", "uncased_L-6_H-384_A-12")
    task_dir = os.path.join(SHARED, "glue", FLAGS.task)
    work_dir = FLAGS.output_dir or tempfile.mkdtemp(prefix=f"glue_{FLAGS.task}_")
    data_dir = task_dir
    if FLAGS.train_examples:
        data_dir = seed_summary.first_glue_rows(task_dir, FLAGS.task, FLAGS.train_examples,
                                                  work_dir)
    processor = classification_data.get_processor(FLAGS.task)
    dev = processor.get_examples(data_dir, "dev")
    train = processor.get_examples(data_dir, "train")
    majority_label, majority_count = collections.Counter(e.label for e in dev).most_common(1)[0]
    rows = []
    for seed in seeds:
        results = (run_seed_with_fit(seed, data_dir, checkpoint) if FLAGS.via == "fit"
                   else run_seed(seed, data_dir, work_dir, checkpoint))
        rows.append(results)
        print(f"seed {seed}: " + ", ".join(f"{key} = {results[key]:.4f}"
                                           for key in sorted(results)
                                           if isinstance(results[key], float)), flush=True)
    print(f"task {FLAGS.task}: {len(train)} training examples x {FLAGS.epochs} epochs "
          f"(batch {FLAGS.batch_size}, max_seq_length {FLAGS.max_seq_length}, "
          f"lr {FLAGS.learning_rate}{', packed rows' if FLAGS.pack_sequences else ''}), "
          f"{rows[0]['global_step']} steps, "
          f"{sum(r['seconds'] for r in rows) / len(rows):.0f} s a seed (train + eval)")
    print(f"dev: {len(dev)} examples; majority class {majority_label!r}: "
          f"accuracy {majority_count / len(dev):.4f}; outputs in {work_dir}")
    print_reference_comparison(rows)
    if FLAGS.reference_python:
        reference = run_reference(seeds, data_dir, work_dir, checkpoint)
        for key, metric in (("eval_accuracy", "dev accuracy"), ("eval_f1", "dev F1")):
            label = f"{FLAGS.task} {metric} (lr {FLAGS.learning_rate}, LoRA {FLAGS.lora_rank})"
            print(seed_summary.summary_line(label, [100 * r[key] for r in rows]))
            print(seed_summary.summary_line(label, [100 * r[key] for r in reference],
                                            side="PEFT"))
        print(f"PEFT: {reference[0]['global_step']} steps, {reference[0]['trained_weights']:,} "
              f"trained weights, {sum(r['seconds'] for r in reference) / len(reference):.0f} "
              "s a seed")


if __name__ == "__main__":
    app.run(main)
