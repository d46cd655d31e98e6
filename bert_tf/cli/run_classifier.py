r"""Fine-tune BERT for sentence(-pair) classification: GLUE, XNLI or your own files.

Flags as google-research/bert's run_classifier.py, plus strategy / precision / optimizer
settings, `export_dir`, and the columns of the generic task. Example:

    bert-run-classifier --task_name=MRPC --data_dir=glue/MRPC \
      --init_checkpoint=uncased_L-12_H-768_A-12 --output_dir=/tmp/mrpc \
      --do_train --do_eval --max_seq_length=128 --train_batch_size=32 \
      --learning_rate=2e-5 --num_train_epochs=3
"""

from bert_tf.commands import command_line
from bert_tf.tasks.classification.options import ClassifierOptions

OPTIONS = ClassifierOptions
REQUIRED = ("task_name", "data_dir", "output_dir")
run_main = command_line.command(__name__, OPTIONS, "bert_tf.tasks.classification.task:run",
                                REQUIRED)

if __name__ == "__main__":
    run_main()
