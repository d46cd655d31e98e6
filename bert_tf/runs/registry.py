"""The tasks by name: what `bert-train --task=NAME` runs, and what a run's config.json
names as its "command" (so `bert-train --config=<output_dir>/config.json` needs no
`--task`).

    entry = registry.get("classification")
    results = registry.run("classification", entry.options_class(...))

A new task is one folder (its options, data, task class) plus one `TaskEntry` in
`TASKS` below; the driver, the loop, the run config and the command line need no change.
This module imports no TensorFlow, nor any task: each entry names its task's options
class and task class as "module:Class", imported when asked for (`TaskEntry.options_class`:
a module without TensorFlow, what `--help` reads; `TaskEntry.task_class`: when the task
is used).
"""

import dataclasses
import importlib
from typing import Union

from bert_tf.serving import registry as model_registry

DRIVER = "bert_tf.runs.driver"  # loaded when a task runs (`run`)


@dataclasses.dataclass(frozen=True)
class TaskEntry:
    """One task of the registry.

    Attributes:
      name: Its `--task` name, equal to the task class's `command`.
      options: The options dataclass its flags come from, or its dotted name
        "package.module:Class" (a module without TensorFlow: `--help` reads it alone),
        imported when first asked for (`options_class`).
      task: The `Task` subclass, built from those options, or its dotted name
        "package.module:Class", imported when the task is first used
        (`task_class`).
      required: Flags a run must set.
      summary: One line for `bert-train --help`.
    """
    name: str
    options: Union[type, str]
    task: Union[type, str]
    required: tuple
    summary: str

    @property
    def options_class(self) -> type:
        """The options dataclass, imported now when `options` names it."""
        return _load(self.options)

    @property
    def task_class(self) -> type:
        """The `Task` subclass, imported now when `task` names it.

        The plugin pattern: the registry lists the tasks without importing them; a
        task's options module (no TensorFlow: a command's `--help`) and its task module
        (which imports TensorFlow, when the task is used) load by their dotted names
        through importlib.
        """
        return _load(self.task)


def _load(target):
    """`target` itself, or the attribute its "package.module:Name" names."""
    if not isinstance(target, str):
        return target  # `register` refuses what is not a class
    module_name, _, name = target.partition(":")
    return getattr(importlib.import_module(module_name), name)


TASKS = {entry.name: entry for entry in (
    TaskEntry("pretraining", "bert_tf.tasks.pretraining.options:PretrainingOptions",
              "bert_tf.tasks.pretraining.task:PretrainingTask",
              ("input_file", "output_dir"),
              "masked LM (+ next-sentence prediction) on create_pretraining_data's "
              "records (bert-run-pretraining)"),
    TaskEntry("electra", "bert_tf.tasks.electra.options:ElectraOptions",
              "bert_tf.tasks.electra.task:ElectraTask",
              ("input_file", "output_dir"),
              "ELECTRA pre-training: a generator's replacements, detected by the "
              "discriminator (a BERT encoder) on create_pretraining_data's records"),
    TaskEntry("classification", "bert_tf.tasks.classification.options:ClassifierOptions",
              "bert_tf.tasks.classification.task:ClassificationTask",
              ("task_name", "data_dir", "output_dir"),
              "sentence(-pair) classification: GLUE, XNLI or your own files "
              "(bert-run-classifier)"),
    TaskEntry("ner", "bert_tf.tasks.ner.options:NerOptions", "bert_tf.tasks.ner.task:NerTask",
              ("output_dir",),
              "named-entity recognition on CoNLL-style files (bert-run-ner)"),
    TaskEntry("squad", "bert_tf.tasks.squad.options:SquadOptions",
              "bert_tf.tasks.squad.task:SquadTask", ("output_dir",),
              "SQuAD v1.1 / v2.0 question answering (bert-run-squad)"),
    TaskEntry("multiple_choice", "bert_tf.tasks.multiple_choice.options:MultipleChoiceOptions",
              "bert_tf.tasks.multiple_choice.task:MultipleChoiceTask", ("output_dir",),
              "SWAG or your questions with choices (bert-run-multiple-choice)"),
    TaskEntry("sentence_embeddings",
              "bert_tf.tasks.sentence_embeddings.options:SentenceEmbeddingOptions",
              "bert_tf.tasks.sentence_embeddings.task:SentenceEmbeddingTask",
              ("output_dir",),
              "sentence vectors (a bi-encoder): CoSENT / cosine MSE on scored pairs (GLUE "
              "STS-B), in-batch negatives on pairs or triplets; Spearman and retrieval "
              "scores"),
    TaskEntry("distillation", "bert_tf.tasks.distillation.options:DistillationOptions",
              "bert_tf.tasks.distillation.task:DistillationTask",
              ("teacher", "output_dir"),
              "a smaller student of a fine-tuned classification, NER or SQuAD run "
              "(--teacher): soft targets, hidden-state and attention losses"),
)}


def register(entry: TaskEntry) -> None:
    """Adds a task: a project's own (see docs/writing_a_task.md), by a name not taken.

    Raises:
      ValueError: for a name another task has, or one that is not the task class's
        `command` (what its runs' config.json name).
    """
    if not isinstance(entry, TaskEntry):
        raise TypeError(f"register: entry must be a TaskEntry, got {type(entry).__name__}")
    for field in ("options_class", "task_class"):
        if not isinstance(getattr(entry, field), type):
            raise TypeError(f"task {entry.name!r}: {field} must be a class, got "
                            f"{type(getattr(entry, field)).__name__}")
    if isinstance(entry.required, str):  # would be read letter by letter
        raise TypeError(f"task {entry.name!r}: required must be a tuple of flag names, "
                        f"got the str {entry.required!r}")
    if entry.task_class.command != entry.name:
        raise ValueError(f"task {entry.name!r}: its task class {entry.task_class.__name__} "
                         f"has command {entry.task_class.command!r}; set it to the name")
    if TASKS.get(entry.name, entry) is not entry:
        raise ValueError(f"task {entry.name!r} is registered already (by "
                         f"{TASKS[entry.name].task_class.__name__}); choose another name")
    TASKS[entry.name] = entry


def model_types() -> list:
    """Every `--model_type` spelling: the built-in model types and those the task folders
    register (each task's module registers its own as it loads: all load here)."""
    for entry in TASKS.values():
        _ = entry.task_class
    return model_registry.names()


def names() -> list:
    """The `--task` names, sorted."""
    return sorted(TASKS)


def get(name: str) -> TaskEntry:
    """The entry of `name`.

    Raises:
      ValueError: naming the task and listing the registered ones.
    """
    if name not in TASKS:
        raise ValueError(f"--task={name} is not a task; the tasks are: {', '.join(names())}")
    return TASKS[name]


def run(name: str, options, strategy=None) -> dict:
    """Runs task `name` with `options`; returns the scored splits' results (the task's
    module and the driver, which import TensorFlow, load now: `TaskEntry.task_class`)."""
    return importlib.import_module(DRIVER).run(get(name).task_class(options), strategy)
