r"""Fine-tune BERT for sentence(-pair) classification: GLUE, XNLI or your own files.

Flags as google-research/bert's run_classifier.py, plus strategy / precision / optimizer
settings, `export_dir`, and the columns of the generic task. Example:

    bert-run-classifier --task_name=MRPC --data_dir=glue/MRPC \
      --init_checkpoint=uncased_L-12_H-768_A-12 --output_dir=/tmp/mrpc \
      --do_train --do_eval --max_seq_length=128 --train_batch_size=32 \
      --learning_rate=2e-5 --num_train_epochs=3
"""

import sys

from absl import flags

from bert_tf.cli import common

from bert_tf.tasks.classification import data as classification_data
from bert_tf.tasks.classification import task as classification_task

FLAGS = flags.FLAGS

flags.DEFINE_string("task_name", None,
                    f"One of: {', '.join(classification_data.TASK_NAMES)} (generic: your own "
                    "train/dev/test .tsv/.csv/.jsonl files).")
flags.DEFINE_string("data_dir", None, "Folder with the task's files.")
flags.DEFINE_string("text_column", "text", "generic task: column of the text.")
flags.DEFINE_string("text_pair_column", None, "generic task: column of the second text.")
flags.DEFINE_string("label_column", "label", "generic task: column of the label.")
flags.DEFINE_string("id_column", None, "generic task: column of the example id.")
flags.DEFINE_list("labels", None, "generic task: class names in id order (default: the "
                                  "sorted labels of the train file).")
flags.DEFINE_bool("is_regression", False, "generic task: the label is a number.")
flags.DEFINE_string("xnli_language", "zh", "xnli task: language of train/dev/test.")
common.define_common_flags()


def run():
    """Runs the command with the parsed flags; returns the evaluation results."""
    options = common.options_from_values(classification_task.ClassifierOptions, FLAGS)
    return classification_task.run(options)


def run_main():
    common.run_command(sys.modules[__name__], run, required=('task_name', 'data_dir', 'output_dir'))


if __name__ == "__main__":
    run_main()
