"""Real check: fine-tune the shared 6-layer uncased BERT on CoNLL-2003 English NER with the
reference recipe and report entity F1 on eng.testa (conlleval) per seed, beside the
reference's (Hugging Face transformers on the same weights, ../shared/bench/README.md).

    .venv/bin/python bench/ner_finetune_check.py --seeds=1,2,3,4,5
    .venv/bin/python bench/ner_finetune_check.py --via=fit --seeds=1,2,3

`--via=fit` trains through the Python library (`bert_tf.TextTagger.fit` on the words and
tags in memory) and scores `predict`'s tags of eng.testa with the same conlleval.

The reference recipe (../shared/bench/reference_finetune.py, task `ner`): the first 3,000
sentences of eng.train (-DOCSTART- lines are not sentences), max_seq_length 128, batch
32, lr 5e-5, 2 epochs, 10% warm-up, AdamW eps 1e-6, weight decay 0.01, clip 1.0, dropout
0.1, label on the first sub-token of each word; entity F1 on all of eng.testa. Reads
../shared/data (checkpoints/uncased_L-6_H-384_A-12, conll2003/eng.*: the original IOB1
files). Not part of the test suite.
"""

import os
import tempfile
import time

from absl import app, flags, logging

import bert_tf
import seed_summary
from bert_tf.tasks.ner import conlleval
from bert_tf.tasks.ner import data as ner_data
from bert_tf.tasks.ner import task as ner_task
from bert_tf.tasks.ner.options import NerOptions

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("BERT_TF_SHARED_DATA", os.path.join(REPO, "..", "shared", "data"))

flags.DEFINE_integer("train_sentences", 3000,
                     "First N training sentences, -DOCSTART- excluded (0: all 14,041).")
flags.DEFINE_integer("eval_sentences", 0, "First N eng.testa sentences (0: all, as the "
                                          "reference).")
flags.DEFINE_bool("predict_test", False, "Also tag and score eng.testb.")
flags.DEFINE_enum("via", "runner", ["runner", "fit"], "Train with the runner (as "
                  "bert-run-ner) or with bert_tf.TextTagger.fit on lists of words.")
seed_summary.define_recipe_flags(epochs=2.0, seeds="1,2,3,4,5")
FLAGS = flags.FLAGS


def run_seed(seed, data_dir, work_dir, checkpoint):
    options = NerOptions(
        data_dir=data_dir, init_checkpoint=checkpoint,
        output_dir=os.path.join(work_dir, f"seed{seed}"), do_lower_case=True, do_train=True,
        do_eval=True, do_predict=FLAGS.predict_test, max_seq_length=FLAGS.max_seq_length,
        doc_stride=64, train_batch_size=FLAGS.batch_size, eval_batch_size=64,
        predict_batch_size=64, learning_rate=FLAGS.learning_rate,
        num_train_epochs=FLAGS.epochs, warmup_proportion=0.1, save_checkpoints_steps=100000,
        steps_per_loop=10, seed=seed, pack_sequences=FLAGS.pack_sequences,
        max_sequences_per_row=FLAGS.max_sequences_per_row,
        **({"head_initializer": FLAGS.head_initializer} if FLAGS.head_initializer else {}))
    started = time.time()
    results = ner_task.run(options)
    results["seconds"] = time.time() - started
    return results


def run_seed_with_fit(seed, data_dir, checkpoint):
    """`run_seed` through `bert_tf.TextTagger`: words and tags from memory, the dev
    sentences tagged by `predict` and scored by conlleval."""
    train, dev = (ner_data.read_tagged_file(os.path.join(data_dir, name))
                  for name in ("eng.train", "eng.testa"))
    started = time.time()
    y = [s.tags for s in train]
    model = bert_tf.TextTagger.from_pretrained(
        checkpoint, labels=bert_tf.TextTagger.labels_of(y),
        max_seq_length=FLAGS.max_seq_length, seed=seed)
    model.fit([s.words for s in train], y, batch_size=FLAGS.batch_size, epochs=FLAGS.epochs,
              learning_rate=FLAGS.learning_rate, seed=seed, verbose=2)
    predicted = model.predict([s.words for s in dev], batch_size=64, verbose=0)["tags"]
    counts = conlleval.evaluate_sequences([ner_data.to_iob2(s.tags) for s in dev], predicted)
    results = {"eval_f1": counts.overall().f1,
               "global_step": int(model.optimizer.iterations.numpy()),
               "seconds": time.time() - started}
    results.update({f"eval_f1_{kind}": counts.by_type(kind).f1
                    for kind in counts.sorted_types()})
    return results


def main(argv):
    del argv
    logging.set_verbosity(logging.INFO)
    seeds = seed_summary.parse_seeds(FLAGS.seeds)
    checkpoint = os.path.join(SHARED, "checkpoints", "uncased_L-6_H-384_A-12")
    conll = os.path.join(SHARED, "conll2003")
    work_dir = FLAGS.output_dir or tempfile.mkdtemp(prefix="conll_")
    data_dir = os.path.join(work_dir, "data")
    os.makedirs(data_dir, exist_ok=True)
    count = seed_summary.write_first_sentences(os.path.join(conll, "eng.train"),
                                  os.path.join(data_dir, "eng.train"), FLAGS.train_sentences)
    for name in ("eng.testa", "eng.testb"):
        seed_summary.write_first_sentences(os.path.join(conll, name), os.path.join(data_dir, name),
                              FLAGS.eval_sentences)
    rows = []
    for seed in seeds:
        results = (run_seed_with_fit(seed, data_dir, checkpoint) if FLAGS.via == "fit"
                   else run_seed(seed, data_dir, work_dir, checkpoint))
        rows.append(results)
        types = ", ".join(f"{key[len('eval_f1_'):]} {results[key]:.2f}"
                          for key in sorted(results) if key.startswith("eval_f1_"))
        print(f"seed {seed}: eval F1 {results['eval_f1']:.2f} ({types}); "
              f"{results['global_step']} steps, {results['seconds']:.0f} s", flush=True)
    print(f"CoNLL-2003: {count} training sentences x {FLAGS.epochs} epochs (batch "
          f"{FLAGS.batch_size}, max_seq_length {FLAGS.max_seq_length}, lr "
          f"{FLAGS.learning_rate}), {rows[0]['global_step']} steps; outputs in {work_dir}")
    print(seed_summary.summary_line(
        "NER entity F1 on eng.testa", [r["eval_f1"] for r in rows],
        seed_summary.reference_figures("ner", "entity F1 on eng.testa")))
    for key in sorted(k for k in rows[0] if k.startswith("eval_f1_")):
        print(seed_summary.summary_line(f"  {key[len('eval_f1_'):]} F1",
                                        [r[key] for r in rows]))


if __name__ == "__main__":
    app.run(main)
