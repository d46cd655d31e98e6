r"""Fine-tune BERT for named-entity recognition on CoNLL-2003 or any token-per-line file.

Flags in the style of run_classifier.py (same model, training, strategy and precision
flags) plus the data files and their columns. Example:

    bert-run-ner --data_dir=conll2003 --init_checkpoint=cased_L-12_H-768_A-12 \
      --do_lower_case=false --output_dir=/tmp/ner --do_train --do_eval --do_predict \
      --max_seq_length=128 --doc_stride=64 --train_batch_size=32 \
      --learning_rate=5e-5 --num_train_epochs=3

`python -m bert_tf.tasks.ner.conlleval < /tmp/ner/test_predictions.txt` prints conlleval's
report of the predictions.
"""

import sys

from absl import flags

from bert_tf.cli import common

from bert_tf.tasks.ner import task as ner_task

FLAGS = flags.FLAGS

flags.DEFINE_string("data_dir", None, "Folder with eng.train/eng.testa/eng.testb (or "
                                      "train.txt/valid.txt/test.txt).")
flags.DEFINE_string("train_file", None, "Training file (overrides data_dir).")
flags.DEFINE_string("eval_file", None, "Evaluation file (overrides data_dir).")
flags.DEFINE_string("predict_file", None, "File to tag (overrides data_dir); with gold tags "
                                          "its scores are written too.")
flags.DEFINE_integer("tag_column", -1, "Column of the tag (negative: from the end).")
flags.DEFINE_integer("word_column", 0, "Column of the word.")
flags.DEFINE_integer("doc_stride", 64, "Sub-tokens between the starts of the overlapping "
                                       "windows of a sentence longer than max_seq_length.")
common.define_common_flags()


def run():
    """Runs the command with the parsed flags; returns the evaluation results."""
    return ner_task.run(common.options_from_values(ner_task.NerOptions, FLAGS))


def run_main():
    common.run_command(sys.modules[__name__], run, required=('output_dir',))


if __name__ == "__main__":
    run_main()
