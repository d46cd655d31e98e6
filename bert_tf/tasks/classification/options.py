"""The options of classification (bert-run-classifier, bert-train --task=classification),
without TensorFlow: a command's `--help` reads them alone; the task
(`bert_tf.tasks.classification.task`) loads when it runs.
"""

import dataclasses
from typing import Optional

from bert_tf.options import OptionGroup, compose, option
from bert_tf.runs import column_roles
from bert_tf.runs import option_groups as groups
from bert_tf.runs.options import FinetuneOptions

# The --task_name values: the GLUE tasks of `data.GLUE_TASKS`, xnli and generic
# (tests/test_help.py checks that they agree).
TASK_NAMES = ("cola", "generic", "mnli", "mnli-mm", "mrpc", "qnli", "qqp", "rte", "sst-2",
              "sts-b", "wnli", "xnli")
# --long_document (`long_documents` does the windows).
LONG_DOCUMENT_MODES = ("truncate", "windows")


@dataclasses.dataclass(kw_only=True)
class ClassifierData(OptionGroup):
    """The task and, for the generic task, its columns, labels and long texts."""
    task_name: str = option(
        "", f"One of: {', '.join(TASK_NAMES)} (generic: your own "
        "train/dev/test .tsv/.csv/.jsonl files), or a name --processor_module adds.")
    processor_module: Optional[str] = option(
        None, "A .py file (or module name) of your DataProcessor classes in the original's "
        "style: its `processors` dict {task_name: class} adds those --task_name values.")
    text_pair_column: Optional[str] = option(None, "generic task: column of the second text.")
    label_column: str = option("label", "generic task: column of the label.")
    labels: Optional[list] = option(None, "generic task: class names in id order (default: "
                                    "the sorted labels of the train file).")
    multi_label: bool = option(
        False, "generic task: each row holds a set of labels (none, one or several): "
        "one sigmoid output per label, binary cross-entropy, micro / macro F1 and subset "
        "accuracy; a TSV/CSV cell separates them with --label_separator, a JSONL row "
        "gives a list; an empty cell is no label.")
    label_separator: str = option(",", "--multi_label: what separates the labels of a "
                                       "TSV/CSV cell.")
    xnli_language: str = option("zh", "xnli task: language of train/dev/test.")
    long_document: str = option(
        "truncate", "A text longer than max_seq_length: truncate (the original: its first "
        "tokens) or windows (cut into windows --doc_stride tokens apart, each trained with "
        "the document's label; eval, predict and the export pool the windows' logits per "
        "document, see --window_pooling). Of a pair, the second text is windowed and the "
        "first repeated in every window.", choices=LONG_DOCUMENT_MODES)

    def check(self) -> None:
        if not self.label_separator:
            raise ValueError("label_separator must not be empty: it separates the labels "
                             "of a TSV/CSV cell")


ClassifierOptions = compose(
    "ClassifierOptions", FinetuneOptions, ClassifierData, groups.RecordColumns,
    groups.DataDir, groups.DocStride, groups.WindowPooling, groups.Regression,
    groups.MultiLabelThreshold, groups.ClassWeightOptions,
    defaults={"data_dir": "", "text_column": "text"},
    checks=(column_roles.check_columns_apart,),
    helps={"text_column": "generic task: column of the text.",
           "id_column": "generic task: column of the example id.",
           "doc_stride": "--long_document=windows: tokens between the starts of "
           "consecutive windows, below a window's capacity (max_seq_length - 2 tokens; for "
           "pairs, those the second text gets when the first takes up to half; default: "
           "half the capacity)."},
    doc="FinetuneOptions plus the task and, for the generic task, its columns.")
