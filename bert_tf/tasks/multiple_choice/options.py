"""The options of multiple choice (bert-run-multiple-choice, bert-train
--task=multiple_choice), without TensorFlow: a command's `--help` reads them alone; the
task (`bert_tf.tasks.multiple_choice.task`) loads when it runs.
"""

from bert_tf.options import compose
from bert_tf.runs import option_groups as groups
from bert_tf.runs.options import (FINETUNING, RUN, TRAINING_LOOP, EvalStep, HeadDropout,
                                  TrainStep, check_micro_batches)


# No packing: an example is C rows already.
MultipleChoiceOptions = compose(
    "MultipleChoiceOptions", RUN, TrainStep, EvalStep, TRAINING_LOOP, FINETUNING,
    HeadDropout, groups.DataDir, groups.SplitFiles, groups.EvalFile,
    helps={"max_seq_length": "Sub-tokens of each choice's row, [CLS] context question "
                             "[SEP] choice [SEP].",
           "data_dir": "Folder with SWAG's train.csv / val.csv / test.csv, or train / dev "
                       "(or val) / test .jsonl files.",
           "train_file": "Training file, .csv or .jsonl (overrides data_dir).",
           "eval_file": "Evaluation file, labelled (overrides data_dir).",
           "predict_file": "File to predict (overrides data_dir); with labels its scores "
                           "are written too."},
    checks=(check_micro_batches,),
    doc="The fine-tuning options plus the data files.")
