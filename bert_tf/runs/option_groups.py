"""The option groups that several commands share, each option declared once here (the
runners, extraction, export and the data tools compose them; `bert_tf.options`).

    model source       InitCheckpoint, EncoderSource
    tokenizer and case Vocab, Case, CaseCheck
    sequence layout    SequenceLength, DocStride, WindowPooling
    task files         DataDir, SplitFiles, EvalFile, InputFile, OutputFile, OutputDir,
                       RecordColumns
    model calls        ModelBatch
    serving settings   Regression, MultiLabelThreshold, QuestionLengths (a task's head,
                       the same in its run and its export)
    export             ExportDir, Overwrite
    masked LM          MaskedLm (run_pretraining and create_pretraining_data)
    loss weights       ClassWeightOptions (classifier, NER)

A command whose default or help differs for one of them says so where it composes the
group (`compose(..., defaults=..., helps=...)`). This module imports no TensorFlow: the
data tools compose it too.
"""

import dataclasses
import math
from typing import Optional, Union

from bert_tf import options as options_lib
from bert_tf.options import OptionGroup, check_integer, option
from bert_tf.text import windows


@dataclasses.dataclass(kw_only=True)
class InitCheckpoint(OptionGroup):
    """The weights a command starts from."""
    init_checkpoint: Optional[str] = option(
        None, "Initial weights: a released google-research folder, a TF1 checkpoint prefix "
        "or a Hugging Face folder; used only when output_dir has no checkpoint.")


@dataclasses.dataclass(kw_only=True)
class EncoderSource(OptionGroup):
    """The model's config, and whether a partly random encoder is accepted."""
    bert_config_file: Optional[str] = option(
        None, "bert_config.json of the model (default: the one in init_checkpoint).")
    allow_random_encoder: bool = option(
        False, "Use an encoder that starts partly or wholly random: fine-tuning without "
        "init_checkpoint, or a checkpoint whose encoder weights do not all load (another "
        "model, another num_hidden_layers). Refused by default.")


@dataclasses.dataclass(kw_only=True)
class Vocab(OptionGroup):
    """The WordPiece vocabulary."""
    vocab_file: Optional[str] = option(
        None, "WordPiece vocab.txt (default: the one in init_checkpoint).")


@dataclasses.dataclass(kw_only=True)
class Case(OptionGroup):
    """Whether the text is lower-cased."""
    do_lower_case: bool = option(
        True, "Lower-case the input and strip accents (uncased models).")


@dataclasses.dataclass(kw_only=True)
class CaseCheck(OptionGroup):
    """Whether a case that does not fit the model is accepted."""
    allow_case_mismatch: bool = option(
        False, "Run even when do_lower_case does not fit the model (an uncased vocab or "
        "an uncased_* folder with do_lower_case=false, or a cased one with true).")


@dataclasses.dataclass(kw_only=True)
class SequenceLength(OptionGroup):
    """The length of a model row."""
    max_seq_length: int = option(128, "Sub-tokens per sequence, [CLS]/[SEP] included.")

    def check(self) -> None:
        """Refuses a row too short for [CLS], a token and [SEP]."""
        check_integer(self, "max_seq_length", 3, " ([CLS], a token, [SEP])")


@dataclasses.dataclass(kw_only=True)
class DocStride(OptionGroup):
    """How far apart the windows of a long text start."""
    doc_stride: Optional[int] = option(
        None, "Sub-tokens between the starts of consecutive windows of a text longer "
        "than max_seq_length.")

    def check(self) -> None:
        """Refuses a stride that would never advance."""
        if self.doc_stride is not None:
            check_integer(self, "doc_stride")


@dataclasses.dataclass(kw_only=True)
class WindowPooling(OptionGroup):
    """How the windows of a long text combine."""
    window_pooling: Optional[str] = option(
        None, "--long_document=windows: how a document's window logits combine into its "
        "own: mean (the default) or max.", choices=windows.POOLINGS)


@dataclasses.dataclass(kw_only=True)
class Regression(OptionGroup):
    """A classifier of one score instead of classes."""
    is_regression: bool = option(False, "generic task: the label is a number.")


@dataclasses.dataclass(kw_only=True)
class MultiLabelThreshold(OptionGroup):
    """When a multi-label classifier predicts a label."""
    multi_label_threshold: float = option(
        0.5, "--multi_label: a label is predicted when its probability is at least this "
        "(between 0 and 1; also in the export).")

    def check(self) -> None:
        if self.multi_label_threshold is not None:
            check_threshold(self.multi_label_threshold)


def check_threshold(threshold) -> None:
    """Refuses a multi-label threshold outside (0, 1): no label, or every label, would be
    predicted (one rule for the runs, the export and the API)."""
    if not 0 < threshold < 1:
        raise ValueError("multi_label_threshold must be between 0 and 1 (exclusive), "
                         f"got {threshold}")


@dataclasses.dataclass(kw_only=True)
class QuestionLengths(OptionGroup):
    """The question and answer lengths of a span labeler (SQuAD)."""
    max_query_length: int = option(64, "Question tokens kept (longer questions are "
                                       "truncated).")
    max_answer_length: int = option(30, "Longest answer, in sub-tokens.")

    def check(self) -> None:
        """Refuses empty questions or answers."""
        for name, what in (("max_query_length", "question"), ("max_answer_length", "answer")):
            value = getattr(self, name)
            if not options_lib.is_integer(value) or value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}: with none, "
                                 f"every {what} would be empty")


@dataclasses.dataclass(kw_only=True)
class DataDir(OptionGroup):
    """The folder a task finds its files in."""
    data_dir: Optional[str] = option(None, "Folder with the task's files.")


@dataclasses.dataclass(kw_only=True)
class SplitFiles(OptionGroup):
    """The training and prediction files of a task."""
    train_file: Optional[str] = option(None, "Training file (overrides data_dir).")
    predict_file: Optional[str] = option(None, "File to predict (overrides data_dir).")


@dataclasses.dataclass(kw_only=True)
class EvalFile(OptionGroup):
    """The evaluation file of a task."""
    eval_file: Optional[str] = option(None, "Evaluation file (overrides data_dir).")


@dataclasses.dataclass(kw_only=True)
class InputFile(OptionGroup):
    """What a command reads."""
    input_file: Optional[str] = option(
        None, "Input corpus files: comma-separated paths or globs.")

    def check(self) -> None:
        """Refuses a command without input."""
        if not self.input_file:
            raise ValueError("--input_file is required")


@dataclasses.dataclass(kw_only=True)
class OutputFile(OptionGroup):
    """What a command writes."""
    output_file: Optional[str] = option(None, "The file to write.")

    def check(self) -> None:
        """Refuses a command without output."""
        if not self.output_file:
            raise ValueError("--output_file is required")


@dataclasses.dataclass(kw_only=True)
class RecordColumns(OptionGroup):
    """Which column of a .tsv/.csv file (its header's name) or field of a .jsonl row holds
    the text, and which its id."""
    text_column: Optional[str] = option(None, "The column of the text.")
    id_column: Optional[str] = option(None, "The column of each row's id.")


@dataclasses.dataclass(kw_only=True)
class ModelBatch(OptionGroup):
    """How many sequences one model call takes (inference without a training loop)."""
    batch_size: int = option(32, "Sequences per model call.")

    def check(self) -> None:
        check_integer(self, "batch_size")


@dataclasses.dataclass(kw_only=True)
class OutputDir(OptionGroup):
    """The folder a command writes to."""
    output_dir: Optional[str] = option(
        None, "Folder for checkpoints, summaries, cached features and results.")


@dataclasses.dataclass(kw_only=True)
class ExportDir(OptionGroup):
    """Where a model is exported."""
    export_dir: Optional[str] = option(None, "Also export a SavedModel for TF Serving here.")


@dataclasses.dataclass(kw_only=True)
class Overwrite(OptionGroup):
    """Whether a folder that holds files is replaced."""
    overwrite: bool = option(False, "Replace an output folder that is not empty.")


@dataclasses.dataclass(kw_only=True)
class MaskedLm(OptionGroup):
    """How many tokens are masked, and how (data time or training time)."""
    max_predictions_per_seq: int = option(20, "Masked positions per record.")
    masked_lm_prob: float = option(0.15, "With --dynamic_masking: share of the tokens of "
                                         "each instance to mask.")
    whole_word_masking: bool = option(
        False, "With --dynamic_masking: mask all the word pieces of a word together, and "
        "the characters of a segmented word when the records carry word_starts "
        "(create_pretraining_data --masking=none --word_segmenter / "
        "--word_boundaries_file).",
        aliases=("do_whole_word_mask",))  # the original's flag
    next_sentence: bool = option(
        True, "Train the next-sentence head on next_sentence_labels. false: masked LM only "
        "(RoBERTa; records of create_pretraining_data --next_sentence=false), the model "
        "has no next-sentence head.")

    def check(self) -> None:
        """Refuses no masked position, or a share of tokens outside (0, 1)."""
        if not options_lib.is_integer(self.max_predictions_per_seq) or \
                self.max_predictions_per_seq < 1:
            raise ValueError(f"max_predictions_per_seq={self.max_predictions_per_seq}: "
                             "expected >= 1")
        if not 0.0 < self.masked_lm_prob < 1.0:
            raise ValueError(f"masked_lm_prob={self.masked_lm_prob}: expected a value in "
                             "(0, 1)")


MODEL_SOURCE = (InitCheckpoint, EncoderSource)
TOKENIZER = (Vocab, Case, CaseCheck)


# --class_weights=balanced (`bert_tf.runs.class_weights` counts the train file).
BALANCED = "balanced"

@dataclasses.dataclass(kw_only=True)
class ClassWeightOptions(OptionGroup):
    """The option of the tasks whose loss takes class weights (classifier, NER)."""
    class_weights: Optional[str] = option(
        None, "Weights of the classes (NER: tags) in the training loss: 'balanced' "
        "(n_samples / (n_classes * count), counted over the train file, as scikit-learn) "
        "or label:weight pairs such as pos:3,neg:1 (labels not listed weigh 1). The loss "
        "is sum(w_i * loss_i) / sum(w_i) as torch's CrossEntropyLoss(weight=...); with "
        "--multi_label the weight of each label's positive term (torch's pos_weight; "
        "balanced: negatives / positives). Logged and written into eval_results.")

    def check(self) -> None:
        """Refuses a --class_weights value that does not parse, naming the pair."""
        parse_class_weights(self.class_weights)


def parse_class_weights(text: Optional[str]) -> Union[None, str, dict]:
    """None, `BALANCED`, or {label: weight} from a `--class_weights` value.

    Raises:
      ValueError: for an empty value, a pair without `:` or label, a weight that is not
        a finite number > 0, or a label given twice; naming the pair.
    """
    if text is None:
        return None
    text = str(text).strip()
    if text.lower() == BALANCED:
        return BALANCED
    if not text:
        raise ValueError("class_weights is empty; expected 'balanced' or label:weight "
                         "pairs such as pos:3,neg:1")
    weights = {}
    for pair in text.split(","):
        label, colon, value = pair.strip().rpartition(":")
        label = label.strip()
        if not colon or not label:
            raise ValueError(f"class_weights: {pair.strip()!r} is not a label:weight pair; "
                             "expected 'balanced' or pairs such as pos:3,neg:1")
        try:
            weight = float(value)
        except ValueError:
            weight = float("nan")
        if not (math.isfinite(weight) and weight > 0):
            raise ValueError(f"class_weights: the weight of {label!r} is {value.strip()!r}; "
                             "expected a finite number > 0")
        if label in weights:
            raise ValueError(f"class_weights: label {label!r} is given twice")
        weights[label] = weight
    return weights
