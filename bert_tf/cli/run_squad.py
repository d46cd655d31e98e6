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

from bert_tf.commands import command_line
from bert_tf.tasks.squad.options import SquadOptions

OPTIONS = SquadOptions
REQUIRED = ("output_dir",)
run_main = command_line.command(__name__, OPTIONS, "bert_tf.tasks.squad.task:run", REQUIRED)

if __name__ == "__main__":
    run_main()
