"""Real check: distil a fine-tuned 6-layer teacher into a student with half its layers and
compare the student's dev score with the teacher's and with the same student fine-tuned
directly (same initial layers, data, recipe and steps; no teacher).

    .venv/bin/python bench/distillation_check.py --task=SST-2 --train_examples=4000
    .venv/bin/python bench/distillation_check.py --task=MRPC --transfer=STS-B
    .venv/bin/python bench/distillation_check.py --task=SST-2 --train_examples=8000 \
        --transfer=SST-2 --transfer_examples=20000 --skip_direct --seeds=1
    .venv/bin/python bench/distillation_check.py --task=CoNLL --train_examples=3000 \
        --teacher_epochs=10 --epochs=2 --transfer=CoNLL

The teacher: the shared `uncased_L-6_H-384_A-12` fine-tuned with the reference recipe
(`--teacher_seed`; the GLUE tasks as bench/glue_finetune_check.py, CoNLL-2003 as
bench/ner_finetune_check.py). Each student starts as DistilBERT's does, from the fine-tuned
teacher's embeddings, its layers `--student_layers` (default 0,2,4), pooler and head, and
trains with the same recipe: distilled (soft targets at T=`--temperature` plus
`--hard_weight` of the gold-label loss) or directly (the gold-label loss alone). With
`--transfer=STS-B` (MRPC only) the distilled student also learns the teacher's soft labels
on STS-B's training pairs (news, caption and forum sentence pairs: unlabelled here);
with `--transfer=SST-2` (`--transfer=CoNLL`) on the SST-2 (CoNLL-2003) training sentences
after the labelled ones (`--transfer_examples`, labels dropped: unlabelled in-domain
text). With a transfer set the direct student trains as many steps as the distilled one
(more epochs over the labelled rows). `--teacher_dir` reuses a teacher fine-tuned before.
Prints each seed, the means beside each other, the student's share of the teacher's
score, and the CPU seconds of each side (process time, both cores). Not part of the tests.
"""

import csv
import glob
import json
import os
import shutil
import tempfile
import time

import tensorflow as tf
from absl import app, flags, logging

import machine
import seed_summary
from bert_tf.runs import registry
from bert_tf.tasks.classification import task as classification_task
from bert_tf.tasks.classification.options import ClassifierOptions
from bert_tf.tasks.distillation.options import DistillationOptions
from bert_tf.tasks.distillation import data as distill_data
from bert_tf.tasks.ner import data as ner_data
from bert_tf.tasks.ner import task as ner_task
from bert_tf.tasks.ner.options import NerOptions

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("BERT_TF_SHARED_DATA", os.path.join(REPO, "..", "shared", "data"))

flags.DEFINE_enum("task", "SST-2", ["SST-2", "MRPC", "CoNLL"], "The teacher's task.")
flags.DEFINE_integer("train_examples", 0, "First N training rows (CoNLL: sentences); 0: "
                                          "all.")
flags.DEFINE_integer("teacher_seed", 1, "Seed of the teacher's fine-tuning.")
flags.DEFINE_float("teacher_epochs", None, "The teacher's training epochs (default: "
                   "--epochs); a small labelled set needs more passes than the students "
                   "with a transfer set make.")
flags.DEFINE_string("student_layers", "0,2,4", "The teacher layers the student keeps.")
flags.DEFINE_float("temperature", 2.0, "Soft-target temperature.")
flags.DEFINE_float("hard_weight", 0.5, "Weight of the gold-label loss beside the soft "
                                       "targets (weight 1).")
flags.DEFINE_enum("transfer", None, ["STS-B", "SST-2", "CoNLL"], "A transfer set the "
                  "teacher labels: MRPC: STS-B's training pairs; SST-2 / CoNLL: the "
                  "training sentences after --train_examples (their labels dropped), "
                  "--transfer_examples of them.")
flags.DEFINE_integer("transfer_examples", 20000, "--transfer=SST-2 / CoNLL: how many "
                                                 "sentences.")
flags.DEFINE_string("teacher_dir", None, "A fine-tuned teacher's output_dir to reuse "
                    "(default: fine-tune one first).")
flags.DEFINE_bool("skip_direct", False, "Do not train the directly fine-tuned students.")
seed_summary.define_recipe_flags(epochs=3.0, seeds="1,2,3")
FLAGS = flags.FLAGS


def recipe(output_dir, seed):
    return dict(output_dir=output_dir, do_train=True, do_eval=True,
                train_batch_size=FLAGS.batch_size, eval_batch_size=64,
                learning_rate=FLAGS.learning_rate, num_train_epochs=FLAGS.epochs,
                warmup_proportion=0.1, save_checkpoints_steps=100000, steps_per_loop=10,
                seed=seed)


def prepare_data(work_dir):
    """The task's data folder, cut to --train_examples."""
    if FLAGS.task != "CoNLL":
        task_dir = os.path.join(SHARED, "glue", FLAGS.task)
        return (seed_summary.first_glue_rows(task_dir, FLAGS.task,
                                                   FLAGS.train_examples, work_dir)
                if FLAGS.train_examples else task_dir)
    data_dir = os.path.join(work_dir, "data")
    os.makedirs(data_dir, exist_ok=True)
    conll = os.path.join(SHARED, "conll2003")
    seed_summary.write_first_sentences(os.path.join(conll, "eng.train"),
                          os.path.join(data_dir, "eng.train"), FLAGS.train_examples)
    seed_summary.write_first_sentences(os.path.join(conll, "eng.testa"),
                          os.path.join(data_dir, "eng.testa"), 0)
    return data_dir


def train_teacher(data_dir, work_dir):
    output_dir = os.path.join(work_dir, "teacher")
    common = dict(data_dir=data_dir, do_lower_case=True, max_seq_length=FLAGS.max_seq_length,
                  init_checkpoint=os.path.join(SHARED, "checkpoints",
                                               "uncased_L-6_H-384_A-12"),
                  **dict(recipe(output_dir, FLAGS.teacher_seed),
                         num_train_epochs=FLAGS.teacher_epochs or FLAGS.epochs))
    if FLAGS.task == "CoNLL":
        return output_dir, timed(ner_task.run, NerOptions(
            doc_stride=64, predict_batch_size=64, **common))
    return output_dir, timed(classification_task.run, ClassifierOptions(
        task_name=FLAGS.task, **common))


def write_transfer_file(work_dir):
    """STS-B's training pairs, one `a<TAB>b` a line (their scores dropped); SST-2's or
    CoNLL-2003's training sentences after the labelled ones, one a line (CoNLL: its
    words separated by spaces)."""
    if FLAGS.transfer == "CoNLL":
        path = os.path.join(work_dir, "transfer_conll.txt")
        sentences = ner_data.read_tagged_file(os.path.join(SHARED, "conll2003", "eng.train"))
        sentences = sentences[FLAGS.train_examples:
                              FLAGS.train_examples + FLAGS.transfer_examples]
        with open(path, "w", encoding="utf-8") as target:
            target.writelines(" ".join(sentence.words) + "\n" for sentence in sentences)
        return path
    if FLAGS.transfer == "SST-2":
        path = os.path.join(work_dir, "transfer_sst_2.txt")
        with open(os.path.join(SHARED, "glue", "SST-2", "train.tsv"), encoding="utf-8") as source:
            rows = list(csv.DictReader(source, delimiter="\t", quoting=csv.QUOTE_NONE))
        rows = rows[FLAGS.train_examples:FLAGS.train_examples + FLAGS.transfer_examples]
        with open(path, "w", encoding="utf-8") as target:
            target.writelines(row["sentence"].strip() + "\n" for row in rows
                              if row["sentence"].strip())
        return path
    path = os.path.join(work_dir, "transfer_sts_b.tsv")
    with open(os.path.join(SHARED, "glue", "STS-B", "train.tsv"), encoding="utf-8") as source, \
            open(path, "w", encoding="utf-8") as target:
        rows = csv.DictReader(source, delimiter="\t", quoting=csv.QUOTE_NONE)
        for row in rows:
            a, b = row["sentence1"].strip(), row["sentence2"].strip()
            if a and b:
                target.write(f"{a}\t{b}\n")
    return path


def train_student(teacher_dir, work_dir, seed, distilled, transfer_file=None, epochs=None):
    kind = "distilled" if distilled else "direct"
    weights = (dict(soft_weight=1.0, soft_temperature=FLAGS.temperature,
                    hard_weight=FLAGS.hard_weight) if distilled
               else dict(soft_weight=0.0, hard_weight=1.0))
    values = recipe(os.path.join(work_dir, f"{kind}_seed{seed}"), seed)
    values.update(num_train_epochs=epochs or FLAGS.epochs)
    options = DistillationOptions(
        teacher=teacher_dir, student_layers=FLAGS.student_layers, transfer_file=transfer_file,
        **weights, **values)
    return timed(lambda o: registry.run("distillation", o), options)


def share_teacher_pass(work_dir, seed):
    """Copies another seed's distill_train.tf_record (and its key) into this seed's
    folder: the teacher's logits over the same rows, which the run reuses when its key
    matches (the teacher pass runs once per data, teacher and transfer set)."""
    target = os.path.join(work_dir, f"distilled_seed{seed}", distill_data.RECORD_NAME)
    keys = glob.glob(os.path.join(work_dir, "distilled_seed*",
                                  distill_data.RECORD_NAME + ".json"))
    if os.path.exists(target) or not keys:
        return
    os.makedirs(os.path.dirname(target), exist_ok=True)
    source = sorted(keys)[0][:-len(".json")]
    shutil.copyfile(source, target)
    shutil.copyfile(source + ".json", target + ".json")


def epochs_of_as_many_steps(distilled_dir) -> float:
    """--epochs over the labelled rows that train as many steps as the distilled run's
    --epochs over labelled and transfer rows (read off its distill_train.tf_record)."""
    record = os.path.join(distilled_dir, distill_data.RECORD_NAME)
    labelled = total = 0
    for serialized in tf.data.TFRecordDataset(record).as_numpy_iterator():
        example = tf.train.Example.FromString(serialized)
        labelled += example.features.feature[distill_data.LABELLED].int64_list.value[0]
        total += 1
    return FLAGS.epochs * total / labelled


def timed(run, options):
    wall, cpu = time.time(), time.process_time()
    results = dict(run(options))
    results.update(seconds=time.time() - wall, cpu_seconds=time.process_time() - cpu)
    return results


def score_key():
    return "eval_f1" if FLAGS.task in ("CoNLL", "MRPC") else "eval_accuracy"


def main(argv):
    del argv
    logging.set_verbosity(logging.INFO)
    print(machine.describe(), flush=True)
    seeds = seed_summary.parse_seeds(FLAGS.seeds)
    work_dir = FLAGS.output_dir or tempfile.mkdtemp(prefix=f"distil_{FLAGS.task}_")
    os.makedirs(work_dir, exist_ok=True)  # a GLUE task with all its rows writes no copy
    data_dir = prepare_data(work_dir)
    if FLAGS.teacher_dir:
        teacher_dir = FLAGS.teacher_dir
        with open(os.path.join(teacher_dir, "eval_results.json"), encoding="utf-8") as file:
            teacher = dict(json.load(file), seconds=0.0, cpu_seconds=0.0)
    else:
        teacher_dir, teacher = train_teacher(data_dir, work_dir)
    key = score_key()
    scale = 1.0 if FLAGS.task == "CoNLL" else 100.0  # NER reports F1 in points already
    print(f"teacher: {key} {scale * teacher[key]:.2f}, {teacher['global_step']} steps, "
          f"{teacher['seconds']:.0f} s wall, {teacher['cpu_seconds']:.0f} s CPU", flush=True)
    transfer = write_transfer_file(work_dir) if FLAGS.transfer else None
    sides = {"distilled": [], "direct": []}
    for seed in seeds:
        for name in ("distilled", "direct"):
            if name == "direct" and FLAGS.skip_direct:
                continue
            epochs = None
            if name == "distilled":
                share_teacher_pass(work_dir, seed)
            if name == "direct" and transfer:  # as many steps as the distilled student
                epochs = epochs_of_as_many_steps(os.path.join(work_dir, f"distilled_seed{seed}"))
            results = train_student(teacher_dir, work_dir, seed, name == "distilled",
                                    transfer if name == "distilled" else None, epochs)
            sides[name].append(results)
            print(f"seed {seed} {name}: {key} {scale * results[key]:.2f}, "
                  f"{results['global_step']} steps, {results['seconds']:.0f} s wall, "
                  f"{results['cpu_seconds']:.0f} s CPU", flush=True)
    teacher_score = scale * teacher[key]
    for name, rows in sides.items():
        if not rows:
            continue
        values = [scale * r[key] for r in rows]
        print(seed_summary.summary_line(f"{FLAGS.task} student ({name}) {key}", values,
                                        side=name))
        mean = sum(values) / len(values)
        print(f"  {name}: {100 * mean / teacher_score:.1f}% of the teacher's "
              f"{teacher_score:.2f}; {min(values):.2f} to {max(values):.2f}; "
              f"mean {sum(r['cpu_seconds'] for r in rows) / len(rows):.0f} s CPU a run")
    print(f"task {FLAGS.task}: train rows {FLAGS.train_examples or 'all'}, "
          f"student layers {FLAGS.student_layers}, T {FLAGS.temperature}, hard weight "
          f"{FLAGS.hard_weight}, transfer {FLAGS.transfer}, batch {FLAGS.batch_size}, "
          f"lr {FLAGS.learning_rate}, {FLAGS.epochs} epochs; outputs in {work_dir}")


if __name__ == "__main__":
    app.run(main)
