"""The options of SQuAD question answering (bert-run-squad, bert-train --task=squad),
without TensorFlow: a command's `--help` reads them alone; the task
(`bert_tf.tasks.squad.task`) loads when it runs.
"""

import dataclasses

from absl import logging

from bert_tf import options as options_lib
from bert_tf.options import OptionGroup, compose, option
from bert_tf.runs import option_groups as groups
from bert_tf.runs.options import (FINETUNING, RUN, TRAINING_LOOP, TrainStep,
                                  check_micro_batches)
from bert_tf.tasks.squad import features as squad_features


@dataclasses.dataclass(kw_only=True)
class SquadData(OptionGroup):
    """The SQuAD version and how predictions are decoded and logged."""
    n_best_size: int = option(20, "Total number of n-best predictions to generate in "
                                  "nbest_predictions.json.")
    version_2_with_negative: bool = option(False, "SQuAD 2.0: some questions have no "
                                                  "answer.")
    null_score_diff_threshold: float = option(
        0.0, 'Predict "" when null score - best non-null score exceeds this.')
    verbose_logging: bool = option(False, "Log answers whose text could not be mapped back "
                                          "onto the context.")

    def check(self) -> None:
        if not options_lib.is_integer(self.n_best_size) or self.n_best_size < 1:
            raise ValueError(f"n_best_size must be at least 1, got {self.n_best_size}: "
                             "with none, every answer would be empty")


def check_squad_flags(options) -> None:
    """Refuses a step without its file, and windows without room for the context; warns
    when consecutive windows would not overlap."""
    if options.do_train and not options.train_file:
        raise ValueError("do_train needs train_file")
    if options.do_predict and not options.predict_file:
        raise ValueError("do_predict needs predict_file")
    squad_features.check_lengths(options.max_seq_length, options.max_query_length)
    room = options.max_seq_length - options.max_query_length - 3
    if options.doc_stride > room:
        logging.warning("doc_stride %d exceeds the context room of a window (%d): "
                        "consecutive windows will start one window apart (no text is "
                        "skipped, none overlaps)", options.doc_stride, room)


# SQuAD has no do_eval step (do_predict scores predict_file when it has answers), no
# dropout option for its head and no packing (its start/end softmax covers the whole
# row, padding included, so packed windows would train on another loss).
SquadOptions = compose(
    "SquadOptions", RUN, TrainStep, TRAINING_LOOP, FINETUNING, groups.SplitFiles,
    groups.DocStride, groups.QuestionLengths, SquadData,
    defaults={"max_seq_length": 384, "doc_stride": 128},
    helps={"max_seq_length": "Sub-tokens per window, question and [CLS]/[SEP] included.",
           "train_file": "SQuAD JSON for training, e.g. train-v1.1.json.",
           "predict_file": "SQuAD JSON for predictions, e.g. dev-v1.1.json or "
                           "test-v1.1.json.",
           "doc_stride": "When splitting up a long document into chunks, how much stride "
                         "to take between chunks."},
    checks=(check_micro_batches, check_squad_flags),
    doc="The fine-tuning options plus the SQuAD flags of the original run_squad.py.")
