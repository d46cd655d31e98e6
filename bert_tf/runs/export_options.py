"""The options of bert-export-model (`ExportOptions`), without TensorFlow: its `--help`
reads them alone. `--model_type`'s choices and `--export_format`'s help are the names
declared in `bert_tf.serving.catalog`; the export itself is
`bert_tf.runs.export_checkpoint.export_from_checkpoint`.
"""

import dataclasses
from typing import Optional

from bert_tf.options import OptionGroup, compose, option
from bert_tf.runs import option_groups as groups
from bert_tf.serving import catalog


@dataclasses.dataclass(kw_only=True)
class ExportModel(OptionGroup):
    """What is exported, in which format, with which labels, into which folder."""
    model_type: Optional[str] = option(
        None, "What to export (squad = span_labeler, ner = token_classifier; pretrainer: "
        "the masked-LM and next-sentence heads, --export_format=huggingface only). "
        "Default: the model type of the bert_tf run at init_checkpoint (its config.json); "
        "required for other checkpoints. One of: " + ", ".join(catalog.MODEL_TYPES) +
        ", or a model type of your own, registered (bert_tf.serving.registry).")
    export_format: str = option(
        "saved_model", catalog.format_help() + " Every format but peft merges a LoRA run's "
        "adapters into the weights (bert_tf.serving.formats: a format of your own is one "
        "registration).")
    quantize: str = option(
        "none", "--export_format=litert or onnx: int8 is dynamic-range quantization (int8 "
        "weights, float32 inputs and outputs), about a quarter of the float32 model's size.",
        choices=catalog.QUANTIZATIONS)
    label_names: Optional[list] = option(
        None, "Class / tag names in label-id order (default: the label list of a "
        "fine-tuning output_dir; other names for its ids are fine, its labels in another "
        "order are refused).")
    labels_file: Optional[str] = option(None, "Class / tag names, one per line, in id order.")
    text_pair: Optional[bool] = option(
        None, "classifier: serving_default takes text_a and text_b (default: as the run "
        "at init_checkpoint was trained; else false). Must match the run.")
    versioned: bool = option(False, "Write export_dir/<next version number>.")


ExportOptions = compose(
    "ExportOptions", ExportModel, groups.MODEL_SOURCE, groups.TOKENIZER,
    groups.SequenceLength, groups.Regression, groups.DocStride, groups.WindowPooling,
    groups.MultiLabelThreshold, groups.QuestionLengths, groups.ExportDir, groups.Overwrite,
    # None: the run's value (its config.json), else export_settings.PLAIN_DEFAULTS.
    defaults={"max_seq_length": None, "do_lower_case": None, "is_regression": None,
              "window_pooling": None, "multi_label_threshold": None,
              "max_query_length": None, "max_answer_length": None},
    helps={
        "init_checkpoint": "Fine-tuning output_dir / training checkpoint, google-research "
                           "checkpoint (folder or prefix) or Hugging Face folder.",
        "bert_config_file": "bert_config.json (default: the one in or beside "
                            "init_checkpoint).",
        "vocab_file": "vocab.txt the model was trained with (default: in init_checkpoint).",
        "allow_case_mismatch": "Export even when do_lower_case does not fit the vocab or "
                               "the released folder name (uncased / cased).",
        "allow_random_encoder": "Export a model whose encoder weights do not all load from "
                                "init_checkpoint (another model, another "
                                "num_hidden_layers): the missing ones start random. "
                                "Refused by default.",
        "do_lower_case": "Lower-case the input and strip accents (default: as the run at "
                         "init_checkpoint was trained; else true). Must match the run.",
        "max_seq_length": "Sequence length of the signatures (tfhub: the preprocessor's "
                          "default; litert: the model's one row). Default: the run's "
                          "max_seq_length; else 128. A serving choice: may differ from "
                          "the run's.",
        "is_regression": "classifier: one output `score` (default: as the run; else "
                         "false). Must match the run.",
        "doc_stride": "classifier: judge a long text on all of it, in windows this many "
                      "tokens apart with their logits pooled, as a run with "
                      "--long_document=windows and this --doc_stride (default: the run's "
                      "windows; else cut to max_seq_length). A serving choice.",
        "window_pooling": "classifier with --doc_stride: how the windows' logits combine "
                          "(default: the run's --window_pooling; else mean). A serving "
                          "choice.",
        "multi_label_threshold": "classifier of a --multi_label run, SavedModel: a label "
                                 "is predicted when its probability is at least this "
                                 "(default: the run's --multi_label_threshold). A serving "
                                 "choice.",
        "max_query_length": "squad: question tokens kept (default: the run's; else 64). "
                            "A serving choice.",
        "max_answer_length": "squad: longest answer in tokens (default: the run's; else "
                             "30). A serving choice.",
        "export_dir": "SavedModel folder or TF Serving model base path (other formats: "
                      "the folder to write).",
        "overwrite": "Replace an existing SavedModel at export_dir (other formats: a "
                     "folder that is not empty)."},
    doc="What bert-export-model exports (see each field's help).")
