r"""Fine-tune BERT for multiple choice (SWAG, or your questions with choices in JSONL).

Flags in the style of run_classifier / run_ner, plus strategy / precision / optimizer
settings and `export_dir` (SavedModel: `context`, `question` and `choices` text in,
per-choice `probabilities` out). Example:

    bert-run-multiple-choice --data_dir=swagaf/data \
      --init_checkpoint=uncased_L-12_H-768_A-12 --output_dir=/tmp/swag \
      --do_train --do_eval --max_seq_length=80 --train_batch_size=16 \
      --learning_rate=2e-5 --num_train_epochs=3

Reads SWAG's train.csv / val.csv / test.csv (columns sent1, sent2, ending0..3, label;
choice i is the pair sent1, sent2 + " " + ending_i) or train / dev / test .jsonl
({"context", "question", "choices", "label"}: the pair context + " " + question,
choice); writes eval_results.txt and eval_predictions.tsv / test_predictions.tsv.
"""

from bert_tf.commands import command_line
from bert_tf.tasks.multiple_choice.options import MultipleChoiceOptions

OPTIONS = MultipleChoiceOptions
REQUIRED = ("output_dir",)
run_main = command_line.command(__name__, OPTIONS, "bert_tf.tasks.multiple_choice.task:run",
                                REQUIRED)

if __name__ == "__main__":
    run_main()
