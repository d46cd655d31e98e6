"""The options of pre-training (bert-run-pretraining, bert-train --task=pretraining; ELECTRA
composes them), without TensorFlow: a command's `--help` reads them alone; the task
(`bert_tf.tasks.pretraining.task`) loads when it runs.
"""

import dataclasses
from typing import Optional

from bert_tf import options as options_lib
from bert_tf.configs import BertConfig
from bert_tf.options import OptionGroup, check_integer, compose, option
from bert_tf.runs import option_groups as groups
from bert_tf.runs.options import Packing, TrainingOptions
from bert_tf.train import choices


@dataclasses.dataclass(kw_only=True)
class StepSchedule(OptionGroup):
    """How long pre-training trains and warms up, in optimizer steps."""
    num_train_steps: int = option(100000, "Optimizer steps.")
    num_warmup_steps: int = option(10000, "Linear warm-up steps.")


@dataclasses.dataclass(kw_only=True)
class PretrainingData(OptionGroup):
    """The model config of the Python API, how the records are read and evaluated."""
    bert_config: Optional[BertConfig] = option(
        None, "The model's BertConfig (Python API; the command reads bert_config_file).",
        flag=False)
    max_eval_steps: int = option(100, "Maximum eval batches.")
    input_compression: str = option(
        "auto", "Compression of the input files; auto: gzip when the file starts with the "
        "gzip magic bytes.", choices=choices.COMPRESSION_TYPES)
    packing_window: int = option(1024, "With --pack_sequences: instances bin-packed "
                                       "together (a window of the shuffled input).")

    def check(self) -> None:
        for name in ("max_eval_steps", "packing_window"):
            check_integer(self, name)


@dataclasses.dataclass(kw_only=True)
class DynamicMasking(OptionGroup):
    """Masks drawn while training instead of at data time."""
    dynamic_masking: bool = option(
        False, "Draw the masks in the input pipeline, anew each epoch, with the original's "
        "rules (--masked_lm_prob, 80% [MASK] / 10% kept / 10% random, at most "
        "--max_predictions_per_seq, never [CLS]/[SEP]/[PAD]). Needs records without masks "
        "(create_pretraining_data --masking=none) and --vocab_file.")
    max_ngram_size: int = option(
        1, "With --dynamic_masking and --whole_word_masking: mask spans of up to this many "
        "whole words, span length n drawn with weight 1/n (tensorflow/models' n-gram "
        "masking). 1: single words.")

    def check(self) -> None:
        if not options_lib.is_integer(self.max_ngram_size) or self.max_ngram_size < 1:
            raise ValueError(f"max_ngram_size={self.max_ngram_size}: expected >= 1")


@dataclasses.dataclass(kw_only=True)
class OptimizerState(OptionGroup):
    """Phase 2 of a two-phase pre-training."""
    restore_optimizer_state: bool = option(
        False, "Phase 2 of a two-phase pre-training: with --init_checkpoint=<the output_dir "
        "of the previous bert-run-pretraining run>, start from its optimizer moments "
        "(Adam/LAMB m and v of its latest ckpt-N) as well as its weights. Its step counter "
        "is not restored: this run has its own --num_warmup_steps, --num_train_steps and "
        "--output_dir and counts from step 0. Refused on a checkpoint without optimizer "
        "state (a released model).")


def check_schedule(options) -> None:
    """Refuses a training schedule that cannot work (steps, warm-up, learning rate)."""
    if options.do_train:
        choices.validate_schedule(options.learning_rate, options.num_train_steps,
                                       options.num_warmup_steps)


def check_masking_flags(options) -> None:
    """Refuses the flags of masks drawn in training without --dynamic_masking."""
    if options.dynamic_masking:
        return
    for flag, value, default in (("whole_word_masking", options.whole_word_masking, False),
                                 ("max_ngram_size", options.max_ngram_size, 1)):
        if value != default:
            raise ValueError(f"--{flag} applies to masks drawn in training: it needs "
                             "--dynamic_masking (records without masks)")


PretrainingOptions = compose(
    "PretrainingOptions", TrainingOptions, groups.InputFile, groups.Vocab, groups.MaskedLm,
    Packing, StepSchedule, PretrainingData, DynamicMasking, OptimizerState,
    defaults={"steps_per_loop": 1000},
    helps={"input_file": "Input TFRecord files (comma-separated globs; gzip or not).",
           "do_eval": "Evaluate on input_file (at most max_eval_steps batches); writes "
                      "eval_results.txt and .json.",
           "pack_sequences": "Pack up to --max_sequences_per_row instances into each row "
           "of --max_seq_length (best-fit bin packing over windows of instances): less "
           "padding, the same losses. Each instance attends only to itself, its position "
           "ids restart at 0 and the next-sentence head reads its own [CLS]. "
           "--train_batch_size then counts rows.",
           "max_sequences_per_row": "With --pack_sequences: at most this many instances "
           "share a row (>= 1). A row has --max_predictions_per_seq + "
           "max_sequences_per_row - 1 masked-LM slots; an instance that would overflow "
           "them (or the row's tokens) goes to another row.",
           "vocab_file": "vocab.txt of the model: with --dynamic_masking, the ids of "
                         "[MASK], the special tokens and the ## word pieces."},
    checks=(check_schedule, check_masking_flags),
    doc="Everything `run_pretraining` needs (see each field's help).")
