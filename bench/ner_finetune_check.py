"""Real check: fine-tune the shared 6-layer uncased BERT on CoNLL-2003 English NER and
report dev (eng.testa) and test (eng.testb) entity F1 as conlleval computes it, with
wall time.

    .venv/bin/python bench/ner_finetune_check.py --train_sentences=3000 --epochs=2

Reads ../shared/data (checkpoints/uncased_L-6_H-384_A-12, conll2003/eng.*: the
original IOB1 files). `--train_sentences` / `--eval_sentences` take the first N
sentences of each file (written to a temporary folder). Not part of the test suite.
"""

import os
import tempfile
import time

from absl import app, flags, logging

from bert_tf.tasks import ner_pipeline

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("BERT_TF_SHARED_DATA", os.path.join(REPO, "..", "shared", "data"))

flags.DEFINE_integer("train_sentences", 0, "First N training sentences (0: all 14,041).")
flags.DEFINE_integer("eval_sentences", 0, "First N dev and test sentences (0: all).")
flags.DEFINE_float("epochs", 2.0, "Training epochs.")
flags.DEFINE_integer("max_seq_length", 128, "Max sequence length.")
flags.DEFINE_integer("batch_size", 32, "Training batch size.")
flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate.")
flags.DEFINE_integer("seed", 1, "Random seed.")
flags.DEFINE_string("output_dir", None, "Output folder (default: a temporary one).")
FLAGS = flags.FLAGS


def _first_sentences(source, target, count):
    """Copies the first `count` sentences (blank-line separated) of a CoNLL file."""
    seen = 0
    with open(source, encoding="utf-8") as reader, open(target, "w", encoding="utf-8") as out:
        for line in reader:
            if not line.strip():
                seen += 1
                if count and seen > count:
                    break
            out.write(line)


def main(argv):
    del argv
    logging.set_verbosity(logging.INFO)
    checkpoint = os.path.join(SHARED, "checkpoints", "uncased_L-6_H-384_A-12")
    conll = os.path.join(SHARED, "conll2003")
    work_dir = FLAGS.output_dir or tempfile.mkdtemp(prefix="conll_")
    data_dir = os.path.join(work_dir, "data")
    os.makedirs(data_dir, exist_ok=True)
    # The -DOCSTART- line and its blank line count as one "sentence" here.
    _first_sentences(os.path.join(conll, "eng.train"), os.path.join(data_dir, "eng.train"),
                     FLAGS.train_sentences and FLAGS.train_sentences + 1)
    for name in ("eng.testa", "eng.testb"):
        _first_sentences(os.path.join(conll, name), os.path.join(data_dir, name),
                         FLAGS.eval_sentences and FLAGS.eval_sentences + 1)
    options = ner_pipeline.NerOptions(
        data_dir=data_dir, init_checkpoint=checkpoint, output_dir=os.path.join(work_dir, "out"),
        do_lower_case=True, do_train=True, do_eval=True, do_predict=True,
        max_seq_length=FLAGS.max_seq_length, doc_stride=64, train_batch_size=FLAGS.batch_size,
        eval_batch_size=64, predict_batch_size=64, learning_rate=FLAGS.learning_rate,
        num_train_epochs=FLAGS.epochs, warmup_proportion=0.1, save_checkpoints_steps=100000,
        steps_per_loop=10, seed=FLAGS.seed)
    started = time.time()
    results = ner_pipeline.run(options)
    seconds = time.time() - started
    print(f"CoNLL-2003: train sentences {FLAGS.train_sentences or 'all'} x {FLAGS.epochs} "
          f"epochs (batch {FLAGS.batch_size}, max_seq_length {FLAGS.max_seq_length}, "
          f"lr {FLAGS.learning_rate}), {results['global_step']} steps")
    for key in sorted(results):
        print(f"  {key} = {results[key]}")
    print(f"wall time (train + dev + test): {seconds:.0f} s; conlleval reports: "
          f"python -m bert_tf.tasks.conlleval < {work_dir}/out/eval_predictions.txt")


if __name__ == "__main__":
    app.run(main)
