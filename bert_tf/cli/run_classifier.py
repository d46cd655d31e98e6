r"""Fine-tune BERT for sentence(-pair) classification: GLUE, XNLI or your own files.

Flags as google-research/bert's run_classifier.py, plus strategy / precision / optimizer
settings, `export_dir`, and the columns of the generic task. Example:

    bert-run-classifier --task_name=MRPC --data_dir=glue/MRPC \
      --init_checkpoint=uncased_L-12_H-768_A-12 --output_dir=/tmp/mrpc \
      --do_train --do_eval --max_seq_length=128 --train_batch_size=32 \
      --learning_rate=2e-5 --num_train_epochs=3
"""

import sys

from bert_tf import command_line
from bert_tf.tasks.classification import task as classification_task

OPTIONS = classification_task.ClassifierOptions
REQUIRED = ("task_name", "data_dir", "output_dir")


def run():
    """Runs the command with the parsed flags; returns the evaluation results."""
    return classification_task.run(command_line.options_from_flags(OPTIONS))


def run_main():
    command_line.run_command(sys.modules[__name__], run, REQUIRED, OPTIONS)


if __name__ == "__main__":
    run_main()
