"""The options of `bert-train --task=distillation`: the fine-tuning options, the teacher,
the student, the losses and the transfer set (each option declared once, here or in the
shared groups).

The teacher's task, labels, text pairs, max_seq_length and case come from the teacher
run's config.json; `--max_seq_length`, `--do_lower_case` and `--vocab_file` default to
the teacher's, and a value that differs from it is refused. Its data files too, unless
`--data_dir` (or `--train_file` / `--eval_file` / `--predict_file`) names others.
"""

import dataclasses
from typing import Optional

from bert_tf.options import OptionGroup, compose, option
from bert_tf.runs import option_groups as groups
from bert_tf.runs.options import FinetuneOptions

HIDDEN_LOSSES = ("mse", "cosine")
ATTENTION_LOSSES = ("tinybert", "minilm")


def parse_indices(text: Optional[str], flag: str) -> Optional[list]:
    """[int, ...] of a comma list "0,2,4" (None for None or "").

    Raises:
      ValueError: naming `flag`, for an entry that is not a whole number >= 0.
    """
    if not text:
        return None
    values = []
    for part in str(text).rstrip(",").split(","):
        part = part.strip()
        if not part.isdigit():
            raise ValueError(f"--{flag}={text}: expected whole numbers >= 0 separated by "
                             f"commas (e.g. 0,2,4), got {part!r}")
        values.append(int(part))
    return values


@dataclasses.dataclass(kw_only=True)
class Teacher(OptionGroup):
    """The fine-tuned run the student learns from."""
    teacher: Optional[str] = option(
        None, "The teacher: the output_dir of a fine-tuned run (classification, NER or "
        "SQuAD; its config.json gives the task, labels, max_seq_length and case, its "
        "best/ or latest checkpoint the weights).")
    cache_teacher: bool = option(
        True, "Compute the teacher's logits once, before training, and keep them with "
        "the training features (distill_train.tf_record); false: the teacher runs on "
        "every training batch. Hidden-state and attention losses, and SQuAD (whose "
        "features are not fixed-length rows), always run it on the fly.")
    transfer_file: Optional[str] = option(
        None, "Classification and NER: a UTF-8 text file of unlabelled in-domain texts, "
        "one a line (a pair: two texts separated by a tab; NER: a sentence whose words "
        "are separated by spaces, as in the training file), that the teacher labels "
        "softly and that are mixed into training (soft loss only).")


@dataclasses.dataclass(kw_only=True)
class Student(OptionGroup):
    """The student's shape and first weights."""
    student_layers: Optional[str] = option(
        None, "The teacher's encoder layers (0-based, e.g. 0,2,4) the student copies, or "
        "a count N (layers taken evenly: i * L / N). The student takes the teacher's "
        "embeddings, those layers, its pooler and its head (DistilBERT's initialisation). "
        "Default: half the teacher's layers. Not with --student_config_file.")
    student_config_file: Optional[str] = option(
        None, "bert_config.json of another (smaller, narrower) student, with the "
        "teacher's vocab_size, type_vocab_size and max_position_embeddings.")
    student_init_checkpoint: Optional[str] = option(
        None, "With --student_config_file: the student's first weights (a released "
        "folder, a pre-training run, a Hugging Face folder; a run of the teacher's task "
        "with its head too).")

    def check(self) -> None:
        """Refuses a layer list that does not parse, and layers with a config."""
        layers = parse_indices(self.student_layers, "student_layers")
        if layers is not None and len(layers) == 1 and layers[0] == 0:
            raise ValueError("--student_layers=0: a count must be at least 1 (a single "
                             "layer index: write it as a list of one, e.g. 0,)")
        if self.student_layers and self.student_config_file:
            raise ValueError("--student_layers and --student_config_file both name the "
                             "student: give one")
        if self.student_init_checkpoint and not self.student_config_file:
            raise ValueError("--student_init_checkpoint needs --student_config_file (the "
                             "student of --student_layers starts from the teacher)")


@dataclasses.dataclass(kw_only=True)
class DistillationLosses(OptionGroup):
    """The losses and their weights (0: off)."""
    soft_temperature: float = option(
        2.0, "Temperature T of the soft targets: KL(softmax(t/T) || softmax(s/T)) * T^2.")
    soft_weight: float = option(1.0, "Weight of the soft-target loss.")
    hard_weight: float = option(
        0.0, "Weight of the task's own loss on the gold labels (not of transfer rows).")
    hidden_weight: float = option(0.0, "Weight of the hidden-state loss (--hidden_loss).")
    hidden_loss: str = option(
        "mse", "mse: TinyBERT's MSE of the embeddings and every mapped layer's output "
        "(through a learned projection when the widths differ), summed over the layers; "
        "cosine: DistilBERT's 1 - cos of the last layer's outputs.", choices=HIDDEN_LOSSES)
    attention_weight: float = option(
        0.0, "Weight of the attention loss (--attention_loss; the student needs the "
        "teacher's number of heads).")
    attention_loss: str = option(
        "tinybert", "tinybert: MSE of the attention scores of every mapped layer, summed; "
        "minilm: KL of the last layer's attention distributions plus its value "
        "relation.", choices=ATTENTION_LOSSES)
    layer_map: Optional[str] = option(
        None, "The teacher layer (1-based) each student layer (1 ... M) learns from, e.g. "
        "2,4,6. Default: uniform, student layer m from teacher layer m * L / M.")

    @property
    def traces(self) -> bool:
        """Whether the losses need hidden states or attention maps."""
        return self.hidden_weight > 0 or self.attention_weight > 0

    def check(self) -> None:
        """Refuses a temperature <= 0, negative weights, all weights 0, a bad map."""
        if not self.soft_temperature > 0:
            raise ValueError(f"soft_temperature must be > 0, got {self.soft_temperature}")
        names = ("soft_weight", "hard_weight", "hidden_weight", "attention_weight")
        for name in names:
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not any(getattr(self, name) > 0 for name in names):
            raise ValueError(f"every loss weight is 0 ({', '.join(names)}): nothing to "
                             "train")
        parse_indices(self.layer_map, "layer_map")


def check_distillation(options) -> None:
    """Refuses what distillation does not take: packed rows."""
    if options.pack_sequences:
        raise ValueError("--pack_sequences: distillation trains unpacked rows (the "
                         "teacher's logits are per example)")


DistillationOptions = compose(
    "DistillationOptions", FinetuneOptions, Teacher, Student, DistillationLosses,
    groups.DataDir, groups.SplitFiles, groups.EvalFile,
    defaults={"max_seq_length": None, "do_lower_case": None},
    helps={"max_seq_length": "Default: the teacher's (another value is refused).",
           "do_lower_case": "Default: the teacher's (another value is refused).",
           "vocab_file": "Default: the teacher's vocab.txt.",
           "init_checkpoint": "Distillation: --student_init_checkpoint names the "
           "student's first weights (this one, if given, must be the same).",
           "bert_config_file": "Distillation: --student_config_file names the student's "
           "config (this one, if given, must be the same).",
           "data_dir": "Default: the teacher run's data_dir.",
           "train_file": "Default: the teacher run's.",
           "predict_file": "Default: the teacher run's.",
           "eval_file": "Default: the teacher run's."},
    checks=(check_distillation,),
    doc="FinetuneOptions plus the teacher, the student, the losses and the transfer set.")
