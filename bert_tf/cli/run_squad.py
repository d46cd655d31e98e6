r"""Fine-tune BERT on SQuAD v1.1 / v2.0 and predict answers, with the official metrics.

Flags as google-research/bert's run_squad.py, plus strategy / precision / optimizer
settings and `export_dir`. Example:

    bert-run-squad --vocab_file=uncased_L-12_H-768_A-12/vocab.txt \
      --bert_config_file=uncased_L-12_H-768_A-12/bert_config.json \
      --init_checkpoint=uncased_L-12_H-768_A-12/bert_model.ckpt \
      --do_train --train_file=train-v1.1.json --do_predict --predict_file=dev-v1.1.json \
      --train_batch_size=12 --learning_rate=3e-5 --num_train_epochs=2.0 \
      --max_seq_length=384 --doc_stride=128 --output_dir=/tmp/squad_base

Writes predictions.json, nbest_predictions.json (and null_odds.json with
--version_2_with_negative) to output_dir; when the predict file has answers, also
eval_results.json, the JSON of the official evaluate-v1.1.py / evaluate-v2.0.py.
"""

import sys

from absl import flags

from bert_tf.cli import common

from bert_tf.tasks.squad import task as squad_task

FLAGS = flags.FLAGS

flags.DEFINE_string("train_file", None, "SQuAD JSON for training, e.g. train-v1.1.json.")
flags.DEFINE_string("predict_file", None,
                    "SQuAD JSON for predictions, e.g. dev-v1.1.json or test-v1.1.json.")
flags.DEFINE_integer("doc_stride", 128, "When splitting up a long document into chunks, "
                     "how much stride to take between chunks.")
flags.DEFINE_integer("max_query_length", 64, "Question tokens kept (longer questions are "
                     "truncated).")
flags.DEFINE_integer("n_best_size", 20, "Total number of n-best predictions to generate "
                     "in nbest_predictions.json.")
flags.DEFINE_integer("max_answer_length", 30, "Longest answer, in sub-tokens.")
flags.DEFINE_bool("version_2_with_negative", False,
                  "SQuAD 2.0: some questions have no answer.")
flags.DEFINE_float("null_score_diff_threshold", 0.0,
                   'Predict "" when null score - best non-null score exceeds this.')
flags.DEFINE_bool("verbose_logging", False,
                  "Log answers whose text could not be mapped back onto the context.")

# The shared fine-tuning flags, with run_squad's defaults; SQuAD has no do_eval step
# (do_predict scores predict_file) and no dropout flag for its head.
_SQUAD_DEFAULTS = {"max_seq_length": 384, "train_batch_size": 32,
                   "predict_batch_size": 8, "learning_rate": 5e-5,
                   "num_train_epochs": 3.0}
common.define_common_flags(_SQUAD_DEFAULTS,
                           exclude=("do_eval", "eval_batch_size", "dropout_rate",
                                    "pack_sequences", "max_sequences_per_row"))


def run():
    """Runs the command with the parsed flags; returns the evaluation results."""
    return squad_task.run(common.options_from_values(squad_task.SquadOptions, FLAGS))


def run_main():
    common.run_command(sys.modules[__name__], run, required=('output_dir',))


if __name__ == "__main__":
    run_main()
