"""Real check: multi-label classification (run_classifier --multi_label) on CoNLL-2003
sentences, ours beside Hugging Face transformers' BertForSequenceClassification
(problem_type="multi_label_classification") on the same weights, token ids and recipe.

    .venv/bin/python bench/multi_label_check.py --seeds=1,2,3 \\
        --reference_python=/work/venv-ref/bin/python
    # smoke test of both sides (a few minutes):
    .venv/bin/python bench/multi_label_check.py --seeds=1 --train_examples=64 \\
        --eval_examples=64 --epochs=0.5 --reference_python=/work/venv-ref/bin/python

Data: each sentence of ../shared/data/conll2003/eng.train (the first --train_examples,
-DOCSTART- lines are not sentences) and eng.testa (all 3,250, or the first
--eval_examples) is one example, labelled with the SET of entity types its tags hold
(LOC, MISC, ORG, PER); a sentence without an entity has no label (the empty set: right
when nothing is predicted for it; about a fifth of the sentences). They are written as
train.jsonl / dev.jsonl (`{"text": ..., "label": [...]}`), which `--task_name=generic
--multi_label` reads, and as token ids (ours: `convert_examples_to_features`) in
train.npz / dev.npz for the reference, so both sides see the same ids.

Weights: the released ../shared/data/checkpoints/uncased_L-6_H-384_A-12 encoder; the
classifier head (4 outputs) is drawn on our side once per seed, N(0, 0.02), and given to
both (`seed<N>/start/` for ours, `seed<N>/hf_weights.npz` for transformers, as
continued_pretraining_check.py does). Recipe: the first 8,000 training sentences,
max_seq_length 64 (batches cut to their longest on both sides), batch 32, lr 1e-4, 1
epoch (250 steps), 10% warm-up then linear decay, AdamW eps 1e-6, weight decay 0.01 (not
biases and LayerNorm), clip 1.0, dropout 0.1, threshold 0.5: about 5-8 minutes a side
and seed on 2 free cores (much more on a busy machine). Reported per seed and as means:
micro F1 (the target: ours within 1 point of the reference's mean), macro F1, subset
accuracy.
"""

import json
import os
import pathlib
import shutil
import subprocess
import time

import keras
import numpy as np
import tensorflow as tf
from absl import app, flags, logging

import seed_summary
from bert_tf.models import BertClassifier
from bert_tf.serving import huggingface
from bert_tf.tasks.classification import data as classification_data
from bert_tf.runs.text_files import InputExample
from bert_tf.tasks.classification import task as classification_task
from bert_tf.tasks.classification.options import ClassifierOptions
from bert_tf.tasks.ner import data as ner_data
from bert_tf.text.tokenization import FullTokenizer
from bert_tf.weights import checkpoints

REPO = pathlib.Path(__file__).resolve().parents[1]
SHARED = pathlib.Path(os.environ.get("BERT_TF_SHARED_DATA", REPO.parent / "shared" / "data"))
RELEASED = SHARED / "checkpoints" / "uncased_L-6_H-384_A-12"
LABELS = ["LOC", "MISC", "ORG", "PER"]
THRESHOLD = 0.5

flags.DEFINE_integer("train_examples", 8000, "First N sentences of eng.train (0: all).")
flags.DEFINE_integer("eval_examples", 0, "First N sentences of eng.testa (0: all 3,250).")
flags.DEFINE_string("reference_python", None,
                    "A Python with torch and transformers: runs the reference side.")
seed_summary.define_recipe_flags(epochs=1.0, seeds="1,2,3")
FLAGS = flags.FLAGS
FLAGS.set_default("max_seq_length", 64)
FLAGS.set_default("learning_rate", 1e-4)


def entity_sets(path, count):
    """(text, sorted entity types) of the first `count` sentences of a CoNLL file."""
    sentences = ner_data.read_tagged_file(str(path))
    if count:
        sentences = sentences[:count]
    return [(" ".join(sentence.words),
             sorted({tag.split("-", 1)[1] for tag in sentence.tags if tag != "O"}))
            for sentence in sentences]


def write_data(work, tokenizer):
    """train/dev .jsonl for ours, the same examples' token ids (.npz) for the reference."""
    data_dir = work / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    conll = SHARED / "conll2003"
    for split, name, count in (("train", "eng.train", FLAGS.train_examples),
                               ("dev", "eng.testa", FLAGS.eval_examples)):
        rows = entity_sets(conll / name, count)
        (data_dir / f"{split}.jsonl").write_text(
            "".join(json.dumps({"text": text, "label": labels}) + "\n"
                    for text, labels in rows), encoding="utf-8")
        examples = [InputExample(str(i), text, None, tuple(labels))
                    for i, (text, labels) in enumerate(rows)]
        features = classification_data.convert_examples_to_features(
            examples, LABELS, FLAGS.max_seq_length, tokenizer)
        np.savez(work / f"{split}.npz",
                 **{key: np.array([getattr(f, field) for f in features],
                                  np.float32 if key == "labels" else np.int64)
                    for key, field in (("input_ids", "input_ids"),
                                       ("input_mask", "input_mask"),
                                       ("segment_ids", "segment_ids"),
                                       ("labels", "label_id"))})
        counts = np.sum([f.label_id for f in features], axis=0)
        print(f"{split}: {len(rows)} sentences; with " + ", ".join(
            f"{label} {int(c)}" for label, c in zip(LABELS, counts)) +
            f"; no entity {sum(1 for _, labels in rows if not labels)}", flush=True)
    return data_dir


def starting_weights(seed, seed_dir):
    """The released encoder with a head drawn from `seed`, written for both sides."""
    keras.utils.set_random_seed(seed)
    model = checkpoints.from_pretrained(BertClassifier, str(RELEASED), num_classes=len(LABELS),
                                        head_initializer="normal")
    start = seed_dir / "start"
    checkpoints.save_google_checkpoint(model, str(start / "bert_model.ckpt"),
                                       write_config=True)
    shutil.copy(RELEASED / "vocab.txt", start / "vocab.txt")
    np.savez(seed_dir / "hf_weights.npz", **huggingface.hf_state_dict(model))
    config = dict(model.config.to_dict(), num_labels=len(LABELS),
                  problem_type="multi_label_classification")
    (seed_dir / "config.json").write_text(json.dumps(config))
    return str(start)


def check_same_ids(output_dir, work):
    """Our cached training features hold the token ids the reference reads."""
    spec = classification_data.feature_spec(FLAGS.max_seq_length, False, len(LABELS))
    dataset = tf.data.TFRecordDataset(str(output_dir / "train.tf_record"))
    ours = np.stack([tf.io.parse_single_example(record, spec)["input_ids"].numpy()
                     for record in dataset])
    if not np.array_equal(ours, np.load(work / "train.npz")["input_ids"]):
        raise SystemExit("our cached features and train.npz hold other token ids")


def run_ours(seed, seed_dir, data_dir, start):
    options = ClassifierOptions(
        task_name="generic", multi_label=True, labels=LABELS, data_dir=str(data_dir),
        init_checkpoint=start, output_dir=str(seed_dir / "ours"), do_lower_case=True,
        do_train=True, do_eval=True, max_seq_length=FLAGS.max_seq_length,
        train_batch_size=FLAGS.batch_size, eval_batch_size=64,
        learning_rate=FLAGS.learning_rate, num_train_epochs=FLAGS.epochs,
        warmup_proportion=0.1, multi_label_threshold=THRESHOLD,
        save_checkpoints_steps=1000000, steps_per_loop=10, seed=seed)
    started = time.time()
    results = classification_task.run(options)
    results["seconds"] = round(time.time() - started, 1)
    check_same_ids(seed_dir / "ours", seed_dir.parent)
    return {"f1_micro": results["eval_f1_micro"], "f1_macro": results["eval_f1_macro"],
            "subset_accuracy": results["eval_subset_accuracy"],
            "steps": results["global_step"], "seconds": results["seconds"]}


def run_reference(seed, work):
    completed = subprocess.run(
        [FLAGS.reference_python, str(REPO / "bench" / "reference_multi_label.py"),
         f"--work_dir={work}", f"--seed={seed}", f"--epochs={FLAGS.epochs}",
         f"--batch_size={FLAGS.batch_size}", f"--learning_rate={FLAGS.learning_rate}",
         f"--threshold={THRESHOLD}"],
        capture_output=True, text=True)
    if completed.returncode:
        raise SystemExit(f"reference_multi_label.py failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def describe(side, seed, row):
    return (f"seed {seed} {side}: micro F1 {100 * row['f1_micro']:.2f}, macro F1 "
            f"{100 * row['f1_macro']:.2f}, subset accuracy "
            f"{100 * row['subset_accuracy']:.2f} ({row['steps']} steps, "
            f"{row['seconds']} s)")


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    seeds = seed_summary.parse_seeds(FLAGS.seeds)
    work = pathlib.Path(FLAGS.output_dir or "/tmp/bert_tf_multi_label_check")
    tokenizer = FullTokenizer(str(RELEASED / "vocab.txt"), do_lower_case=True)
    data_dir = write_data(work, tokenizer)
    ours, reference = [], []
    for seed in seeds:
        seed_dir = work / f"seed{seed}"
        shutil.rmtree(seed_dir, ignore_errors=True)  # a run of its own, not a resumed one
        start = starting_weights(seed, seed_dir)
        ours.append(run_ours(seed, seed_dir, data_dir, start))
        print(describe("ours", seed, ours[-1]), flush=True)
        if FLAGS.reference_python:
            reference.append(run_reference(seed, work))
            print(describe("transformers", seed, reference[-1]), flush=True)
    print(f"recipe: max_seq_length {FLAGS.max_seq_length}, batch {FLAGS.batch_size}, lr "
          f"{FLAGS.learning_rate}, {FLAGS.epochs} epoch(s), threshold {THRESHOLD}; "
          f"outputs in {work}")
    for key, name in (("f1_micro", "micro F1"), ("f1_macro", "macro F1"),
                      ("subset_accuracy", "subset accuracy")):
        ref = [100 * row[key] for row in reference]
        figures = (float(np.mean(ref)), min(ref), max(ref)) if ref else None
        print(seed_summary.summary_line(f"dev {name}", [100 * row[key] for row in ours],
                                        figures))


if __name__ == "__main__":
    app.run(main)
