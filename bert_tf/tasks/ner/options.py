"""The options of named-entity recognition (bert-run-ner, bert-train --task=ner),
without TensorFlow: a command's `--help` reads them alone; the task
(`bert_tf.tasks.ner.task`) loads when it runs.
"""

import dataclasses

from bert_tf import options as options_lib
from bert_tf.options import OptionGroup, compose, option
from bert_tf.runs import column_roles
from bert_tf.runs import option_groups as groups
from bert_tf.runs.options import FinetuneOptions


@dataclasses.dataclass(kw_only=True)
class NerData(OptionGroup):
    """The columns of a token-per-line file."""
    tag_column: int = option(-1, "Column of the tag (negative: from the end).")
    word_column: int = option(0, "Column of the word.")

    def check(self) -> None:
        for name in ("tag_column", "word_column"):
            if not options_lib.is_integer(getattr(self, name)):
                raise ValueError(f"{name} must be an integer (negative: from the end), "
                                 f"got {getattr(self, name)!r}")


NerOptions = compose(
    "NerOptions", FinetuneOptions, groups.DataDir, groups.SplitFiles, groups.EvalFile,
    NerData, groups.DocStride, groups.ClassWeightOptions,
    defaults={"doc_stride": 64}, checks=(column_roles.check_columns_apart,),
    helps={"data_dir": "Folder with eng.train/eng.testa/eng.testb (or "
                       "train.txt/valid.txt/test.txt).",
           "predict_file": "File to tag (overrides data_dir); with gold tags its scores "
                           "are written too.",
           "doc_stride": "Sub-tokens between the starts of the overlapping windows of a "
                         "sentence longer than max_seq_length."},
    doc="FinetuneOptions plus the data files and their columns.")
