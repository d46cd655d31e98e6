"""The teacher run and the student's shape: what `--teacher` holds, checked before any
work, and the settings the student takes from it.

    teacher = read_teacher("/runs/sst2")       # TeacherRun: config.json, checkpoint, ...
    layers = student_layers("0,2,4", teacher.config.num_hidden_layers)
    config = student_config(options, teacher)  # the student's BertConfig
"""

import dataclasses
import os
from typing import Optional

import tensorflow as tf

from bert_tf import options as options_lib
from bert_tf.configs import BertConfig
from bert_tf.runs import run_config, run_groups
from bert_tf.tasks.classification.task import ClassificationTask
from bert_tf.tasks.classification.options import ClassifierOptions
from bert_tf.tasks.distillation.options import parse_indices
from bert_tf.tasks.ner.task import NerTask
from bert_tf.tasks.ner.options import NerOptions
from bert_tf.tasks.squad.task import SquadTask
from bert_tf.tasks.squad.options import SquadOptions
from bert_tf.weights import checkpoints, training_checkpoints

# The fine-tuned runs a student can learn from, by their config.json "command".
TEACHER_TASKS = {"classification": (ClassifierOptions, ClassificationTask),
                 "ner": (NerOptions, NerTask), "squad": (SquadOptions, SquadTask)}
# Options where the student's run says where its data is only when it is set.
DATA_OPTIONS = ("data_dir", "train_file", "eval_file", "predict_file")
# What the student's run resolves itself (its model and vocab): not the teacher task's.
OWN_OPTIONS = ("init_checkpoint", "bert_config_file", "vocab_file", "allow_random_encoder")
# The config fields a student must share with its teacher (the token and position
# tables: the features are the teacher's).
SHARED_FIELDS = ("vocab_size", "type_vocab_size", "max_position_embeddings")


@dataclasses.dataclass
class TeacherRun:
    """A fine-tuned run folder read for distillation.

    Attributes:
      folder: The run's output_dir.
      saved: Its config.json (`run_config.read`).
      config: Its BertConfig.
      checkpoint: The checkpoint prefix its weights come from (best/ first).
      vocab_file: Its vocab.txt.
      options_class, task_class: Of its task (`TEACHER_TASKS`).
    """
    folder: str
    saved: dict
    config: BertConfig
    checkpoint: str
    vocab_file: str
    options_class: type
    task_class: type

    @property
    def options(self) -> dict:
        return self.saved.get("options") or {}

    @property
    def max_seq_length(self) -> int:
        return self.options.get("max_seq_length")

    @property
    def do_lower_case(self) -> Optional[bool]:
        return run_config.trained_case(self.saved)


def read_teacher(folder: Optional[str]) -> TeacherRun:
    """The run at `folder` (--teacher), after checks that it is a fine-tuned run.

    Raises:
      ValueError / FileNotFoundError: naming --teacher and what the folder is instead.
    """
    if not folder:
        raise ValueError("--teacher is required: the output_dir of a fine-tuned "
                         "classification, NER or SQuAD run")
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"--teacher={folder}: no such folder (expected the "
                                "output_dir of a fine-tuned run)")
    folder = run_groups.best_run(folder)  # a run of several seeds: its best
    saved = run_config.read(folder)
    if not saved or os.path.dirname(saved["path"]) != os.path.normpath(folder):
        raise ValueError(f"--teacher={folder} is not a run folder of bert_tf (no "
                         "config.json of a run): give the output_dir of a fine-tuned "
                         "classification, NER or SQuAD run")
    command = saved.get("command")
    if command not in TEACHER_TASKS or not saved.get("options"):
        raise ValueError(
            f"--teacher={folder} is a {command or 'older'} run (model type "
            f"{saved.get('model_type')}), not a fine-tuned {', '.join(TEACHER_TASKS)} "
            "run: a student learns a task's outputs from a model fine-tuned on it")
    prefix = training_checkpoints.best_checkpoint(folder) or tf.train.latest_checkpoint(folder)
    if not prefix:
        raise ValueError(f"--teacher={folder} holds no training checkpoint: train the "
                         "teacher first")
    files = {name: os.path.join(folder, name) for name in ("bert_config.json", "vocab.txt")}
    for name, path in files.items():
        if not os.path.isfile(path):
            raise FileNotFoundError(f"--teacher={folder} has no {name}: it is not a "
                                    "complete run folder")
    options_class, task_class = TEACHER_TASKS[command]
    return TeacherRun(folder, saved, BertConfig.from_json_file(files["bert_config.json"]),
                      prefix, files["vocab.txt"], options_class, task_class)


def student_layers(text: Optional[str], teacher_layers: int) -> list:
    """The teacher layers (0-based) a --student_layers student copies: a list as given,
    or a count N taken evenly (i * L / N); default half the layers.

    Raises:
      ValueError: naming --student_layers, for an index out of range, a repeated or
        unordered one, or a count above the teacher's layers.
    """
    values = parse_indices(text, "student_layers")
    if values is None:
        values = [max(1, teacher_layers // 2)]
    if len(values) == 1 and "," not in (text or ""):
        count = values[0]
        if not 1 <= count <= teacher_layers:
            raise ValueError(f"--student_layers={text}: a count of layers from 1 to the "
                             f"teacher's {teacher_layers}")
        return [index * teacher_layers // count for index in range(count)]
    outside = [index for index in values if index >= teacher_layers]
    if outside:
        raise ValueError(f"--student_layers={text}: layer {outside[0]} is out of range; "
                         f"the teacher has layers 0 to {teacher_layers - 1}")
    if values != sorted(set(values)):
        raise ValueError(f"--student_layers={text}: the layers must increase, each once")
    return values


def student_config(student_config_file: Optional[str], layers: Optional[list],
                   teacher: TeacherRun) -> BertConfig:
    """The student's BertConfig: the teacher's with `layers`' count, or the file's.

    Raises:
      ValueError / FileNotFoundError: naming --student_config_file, for a missing file or
        token / position tables other than the teacher's.
    """
    if not student_config_file:
        return BertConfig.from_dict(dict(teacher.config.to_dict(),
                                         num_hidden_layers=len(layers)))
    if not os.path.isfile(student_config_file):
        raise FileNotFoundError(f"--student_config_file={student_config_file}: no such "
                                "file")
    config = checkpoints.load_config(student_config_file)
    for name in SHARED_FIELDS:
        if getattr(config, name) != getattr(teacher.config, name):
            raise ValueError(
                f"--student_config_file={student_config_file}: {name}="
                f"{getattr(config, name)}, the teacher's is {getattr(teacher.config, name)}: "
                "the student reads the teacher's token ids and positions, so its "
                f"{name} must be the same")
    return config


def layer_mapping(layer_map: Optional[str], student: int, teacher: int) -> list:
    """The teacher layer (1-based; 0: embeddings) of each student layer 0 ... M (0: the
    embeddings): [0, g(1), ..., g(M)], uniform g(m) = m * L / M unless --layer_map.

    Raises:
      ValueError: naming --layer_map, for a list of the wrong length or out of range.
    """
    given = parse_indices(layer_map, "layer_map")
    if given is None:
        return [0] + [layer * teacher // student for layer in range(1, student + 1)]
    if len(given) != student or not all(1 <= value <= teacher for value in given):
        raise ValueError(f"--layer_map={layer_map}: expected {student} teacher layers "
                         f"(one per student layer), each from 1 to {teacher}")
    return [0] + given


def teacher_task_options(options, teacher: TeacherRun):
    """The options of the teacher's task for the student's run: the teacher run's own
    (task, files, labels, length, case), with the student run's training, evaluation
    and output settings, and its data files where it names them."""
    values = dict(teacher.options)
    names = {spec.name for spec in options_lib.option_specs(teacher.options_class)}
    for spec in options_lib.option_specs(type(options)):
        if spec.name not in names or spec.name in OWN_OPTIONS:
            continue
        value = getattr(options, spec.name)
        if spec.name in DATA_OPTIONS and not value:
            continue
        values[spec.name] = value
    if "labels" in names and teacher.saved.get("labels") and not teacher.options.get(
            "is_regression"):
        values["labels"] = list(teacher.saved["labels"])
    for name in OWN_OPTIONS:
        values.pop(name, None)
    return options_lib.options_from_dict(teacher.options_class, values, teacher.saved["path"])
