"""Pre-trains BERT (masked LM + next-sentence prediction) on TFRecords.

Flags are those of google-research/bert's run_pretraining.py, plus
`distribution_strategy`, `num_gpus`, `optimizer`, `weight_decay_rate`,
`gradient_accumulation_steps`, `mixed_precision`, `use_xla`, `keep_checkpoint_max`,
`input_compression`, and for less wasted work `pack_sequences`,
`max_sequences_per_row`, `dynamic_masking` (with `vocab_file`, `masked_lm_prob`,
`whole_word_masking`, `max_ngram_size`) and `next_sentence`. `--use_tpu` means
`--distribution_strategy=tpu`.

`output_dir` receives training checkpoints (`ckpt-<step>.*`, resumed from on restart),
TensorBoard summaries (`train/`), the final model in the google-research layout
(`bert_model.ckpt.*` + `bert_config.json`, a valid `--init_checkpoint` for fine-tuning)
and, with `--do_eval`, `eval_results.txt`.
"""

import sys

from absl import flags, logging

from bert_tf.cli import common
from bert_tf.configs import BertConfig
from bert_tf.tasks import pretraining
from bert_tf.train import distribute, optimization, records

FLAGS = flags.FLAGS
flags.DEFINE_string("bert_config_file", None, "bert_config.json of the model to train.")
flags.DEFINE_string("input_file", None,
                    "Input TFRecord files (comma-separated globs; gzip or not).")
flags.DEFINE_string("output_dir", None, "Where checkpoints, summaries and results go.")
flags.DEFINE_string("init_checkpoint", None,
                    "Initial weights (google-research checkpoint prefix or folder, or a "
                    "Hugging Face folder); used only when output_dir has no checkpoint.")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length of the records.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per record.")
flags.DEFINE_bool("do_train", False, "Train.")
flags.DEFINE_bool("do_eval", False, "Evaluate on input_file.")
flags.DEFINE_integer("train_batch_size", 32, "Global batch per optimizer step.")
flags.DEFINE_integer("eval_batch_size", 8, "Global eval batch.")
flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate.")
flags.DEFINE_integer("num_train_steps", 100000, "Optimizer steps.")
flags.DEFINE_integer("num_warmup_steps", 10000, "Linear warm-up steps.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "Checkpoint every this many steps.")
flags.DEFINE_integer("iterations_per_loop", 1000, "Steps per compiled loop call.")
flags.DEFINE_integer("max_eval_steps", 100, "Maximum eval batches.")
flags.DEFINE_bool("use_tpu", False, "Same as --distribution_strategy=tpu.")
flags.DEFINE_string("tpu_name", None, "Cloud TPU name or grpc:// address.")
flags.DEFINE_string("tpu_zone", None, "GCE zone of the Cloud TPU.")
flags.DEFINE_string("gcp_project", None, "GCP project of the Cloud TPU.")
flags.DEFINE_string("master", None, "Unused (TF1 TPU master); kept for old commands.")
flags.DEFINE_integer("num_tpu_cores", 8, "Unused: TPUStrategy finds the cores itself.")
flags.DEFINE_enum("distribution_strategy", "one_device", list(distribute.STRATEGIES),
                  "tf.distribute strategy.")
flags.DEFINE_integer("num_gpus", 0, "GPUs for one_device / mirrored.")
flags.DEFINE_enum("optimizer", "adamw", list(optimization.OPTIMIZER_TYPES), "Optimizer.")
flags.DEFINE_float("weight_decay_rate", 0.01, "Decoupled weight decay.")
flags.DEFINE_enum("lr_schedule", "linear", list(optimization.LR_SCHEDULES),
                  "linear: warm-up, then linear decay from the peak to 0 (as Hugging Face "
                  "transformers); google_research: the original's linear decay over all "
                  "steps, which the warm-up overrides (rate after warm-up: "
                  "peak * (1 - num_warmup_steps / num_train_steps)).")
flags.DEFINE_bool("adam_bias_correction", True,
                  "AdamW: bias-corrected moments with epsilon added after the correction "
                  "(as torch). false: the original AdamWeightDecayOptimizer, which has no "
                  "bias correction.")
flags.DEFINE_integer("gradient_accumulation_steps", 1,
                     "Split each replica's batch into this many micro-batches.")
flags.DEFINE_enum("mixed_precision", "none", ["none", "bfloat16", "float16"],
                  "Mixed precision (float16 uses dynamic loss scaling).")
flags.DEFINE_bool("use_xla", False, "XLA-compile the forward and backward pass.")
flags.DEFINE_integer("keep_checkpoint_max", 5, "Training checkpoints kept.")
flags.DEFINE_enum("input_compression", "auto", list(records.COMPRESSION_TYPES),
                  "TFRecord compression (auto detects gzip).")
flags.DEFINE_integer("seed", None, "Seed for shuffling and initialisation.")
flags.DEFINE_bool("pack_sequences", False,
                  "Pack up to --max_sequences_per_row instances into each row of "
                  "--max_seq_length (best-fit bin packing over windows of instances): "
                  "less padding, the same losses. Each instance attends only to itself, "
                  "its position ids restart at 0 and the next-sentence head reads its "
                  "own [CLS]. --train_batch_size then counts rows.")
flags.DEFINE_integer("max_sequences_per_row", 3,
                     "With --pack_sequences: at most this many instances share a row "
                     "(>= 1). A row has --max_predictions_per_seq + "
                     "max_sequences_per_row - 1 masked-LM slots; an instance that would "
                     "overflow them (or the row's tokens) goes to another row.")
flags.DEFINE_bool("dynamic_masking", False,
                  "Draw the masks in the input pipeline, anew each epoch, with the "
                  "original's rules (--masked_lm_prob, 80% [MASK] / 10% kept / 10% "
                  "random, at most --max_predictions_per_seq, never [CLS]/[SEP]/[PAD]). "
                  "Needs records without masks (create_pretraining_data --masking=none) "
                  "and --vocab_file.")
flags.DEFINE_string("vocab_file", None,
                    "vocab.txt of the model: with --dynamic_masking, the ids of [MASK], the "
                    "special tokens and the ## word pieces.")
flags.DEFINE_float("masked_lm_prob", 0.15, "With --dynamic_masking: share of the tokens "
                   "of each instance to mask.")
flags.DEFINE_bool("whole_word_masking", False,
                  "With --dynamic_masking: mask all the word pieces of a word together.")
flags.DEFINE_integer("max_ngram_size", 1,
                     "With --dynamic_masking and --whole_word_masking: mask spans of up "
                     "to this many whole words, span length n drawn with weight 1/n "
                     "(tensorflow/models' n-gram masking). 1: single words.")
flags.DEFINE_bool("next_sentence", True,
                  "Train the next-sentence head on next_sentence_labels. false: masked "
                  "LM only (RoBERTa; records of create_pretraining_data "
                  "--next_sentence=false), the model has no next-sentence head.")


def options_from_flags():
    """PretrainingOptions from the absl flags."""
    return common.options_from_values(
        pretraining.PretrainingOptions, FLAGS,
        bert_config=BertConfig.from_json_file(FLAGS.bert_config_file))


def pretrain():
    """Builds the options and the strategy from the flags, then pre-trains."""
    options = options_from_flags()
    strategy_name = "tpu" if FLAGS.use_tpu else FLAGS.distribution_strategy
    strategy = distribute.get_strategy(strategy_name, num_gpus=FLAGS.num_gpus,
                                       tpu_name=FLAGS.tpu_name, tpu_zone=FLAGS.tpu_zone,
                                       gcp_project=FLAGS.gcp_project)
    logging.info("Strategy %s with %d replica(s)", type(strategy).__name__,
                 strategy.num_replicas_in_sync)
    pretraining.run_pretraining(options, strategy)


def run_main():
    common.run_command(sys.modules[__name__], pretrain,
                       required=("bert_config_file", "input_file", "output_dir"))


if __name__ == "__main__":
    run_main()
