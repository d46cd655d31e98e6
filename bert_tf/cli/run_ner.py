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

from bert_tf.commands import command_line
from bert_tf.tasks.ner.options import NerOptions

OPTIONS = NerOptions
REQUIRED = ("output_dir",)
run_main = command_line.command(__name__, OPTIONS, "bert_tf.tasks.ner.task:run", REQUIRED)

if __name__ == "__main__":
    run_main()
