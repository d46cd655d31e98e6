"""The options of bert-extract-features, without TensorFlow: the command's `--help` reads
them alone; the extraction (`bert_tf.runs.feature_extraction`) loads when it runs.
"""

import dataclasses

from bert_tf.options import OptionGroup, compose, option
from bert_tf.runs import option_groups as groups
from bert_tf.runs import options as task_options


@dataclasses.dataclass(kw_only=True)
class ExtractLayers(OptionGroup):
    """Which layers are written."""
    layers: str = option("-1,-2,-3,-4", "Comma-separated Transformer block indexes.")


@dataclasses.dataclass(kw_only=True)
class OneHotEmbeddings(OptionGroup):
    """The original's embedding-lookup switch (a TPU speed choice)."""
    use_one_hot_embeddings: bool = option(
        False, "The original's flag (embeddings looked up by a one-hot matmul, faster on "
        "its TPUs): accepted; the lookup gives the same values either way.")


ExtractOptions = compose(
    "ExtractOptions", groups.InputFile, groups.OutputFile, ExtractLayers, groups.ModelBatch,
    groups.MODEL_SOURCE, groups.Vocab, groups.Case, groups.CaseCheck,
    groups.SequenceLength,
    task_options.Devices, task_options.TpuCluster, OneHotEmbeddings,
    defaults={"do_lower_case": None},  # None: as the run at init_checkpoint, else true
    helps={"input_file": "Text file: one text or `text_a ||| text_b` a line.",
           "do_lower_case": "Lower-case the input and strip accents (default: as the "
                            "bert_tf run at init_checkpoint was trained; else true).",
           "output_file": "JSON lines output (an existing file there is replaced; never "
                          "the input).",
           "init_checkpoint": "Released checkpoint folder, checkpoint prefix or Hugging "
                              "Face folder.",
           "distribution_strategy": "Accepted for the original's command lines (--use_tpu): "
                                    "extraction runs on one device, as TensorFlow places "
                                    "it (the first GPU, else the CPU); a warning says so.",
           "num_gpus": "Accepted for the runners' command lines: extraction runs on one "
                       "device (the first GPU, else the CPU)."},
    doc="What bert-extract-features reads and writes (see each field's help).")
