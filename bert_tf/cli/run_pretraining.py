"""Pre-trains BERT (masked LM + next-sentence prediction) on TFRecords.

Flags are those of google-research/bert's run_pretraining.py, plus
`distribution_strategy`, `num_gpus`, `optimizer`, `weight_decay_rate`,
`gradient_accumulation_steps`, `mixed_precision`, `use_xla`, `keep_checkpoint_max`,
`input_compression`, and for less wasted work `pack_sequences`,
`max_sequences_per_row`, `dynamic_masking` (with `vocab_file`, `masked_lm_prob`,
`whole_word_masking`, `max_ngram_size`), `next_sentence`, `restore_optimizer_state`
(phase 2 from phase 1's moments) and `allow_random_encoder`. `--use_tpu` means
`--distribution_strategy=tpu`. `bert_config_file` defaults to the one in an
`init_checkpoint` folder.

`output_dir` receives training checkpoints (`ckpt-<step>.*`, resumed from on restart),
TensorBoard summaries (`train/`), the final model in the google-research layout
(`bert_model.ckpt.*` + `bert_config.json`, a valid `--init_checkpoint` for fine-tuning)
and, with `--do_eval`, `eval_results.txt`.
"""

from bert_tf.commands import command_line
from bert_tf.tasks.pretraining.options import PretrainingOptions

OPTIONS = PretrainingOptions
REQUIRED = ("input_file", "output_dir")
RUN = "bert_tf.tasks.pretraining.task:run_pretraining"  # loaded once the flags are parsed
run_main = command_line.command(__name__, OPTIONS, RUN, REQUIRED)

if __name__ == "__main__":
    run_main()
