"""Your own classification task in google-research/bert's style: a `DataProcessor`.

    # my_processors.py
    import os
    from bert_tf.compat.run_classifier import DataProcessor, InputExample

    class SentimentProcessor(DataProcessor):
        def get_train_examples(self, data_dir):
            return self._create(self._read_tsv(os.path.join(data_dir, "train.tsv")), "train")
        def get_dev_examples(self, data_dir): ...
        def get_test_examples(self, data_dir): ...
        def get_labels(self):
            return ["neg", "pos"]
        def _create(self, lines, set_type):
            return [InputExample(guid=f"{set_type}-{i}", text_a=line[0], label=line[1])
                    for i, line in enumerate(lines[1:])]

    processors = {"sentiment": SentimentProcessor}   # the original's `processors` dict

    bert-run-classifier --processor_module=my_processors.py --task_name=sentiment ...

`--processor_module` (a .py file, or a module name found from the current folder or
sys.path) is imported; its `processors` dict, or its calls of `register_processor`,
add task names. `get_processor(name, data_dir, splits)` wraps a registered processor
in the interface of bert_tf's own processors (`bert_tf.tasks.classification.data`), so
the task runs with every feature of the classifier (pairs, the run folder's
config.json, exports that need no task flag). The examples of each split are read once.
"""

import contextvars
import csv
import importlib
import importlib.util
import os
import sys

from bert_tf.io import fileio
from bert_tf.runs import text_files
from bert_tf.tasks.classification import data as classification_data
from bert_tf.runs.text_files import InputExample

# What the run's predictions are written as (no GLUE submission file).
PREDICTIONS_FILE = "predictions.tsv"
SPLIT_METHODS = {"train": "get_train_examples", "dev": "get_dev_examples",
                 "test": "get_test_examples"}
_REGISTRY = {}  # task name (lower case) -> processor class (or factory)
_FILE_MODULES = {}  # absolute path -> the module a processor_module file made
# The files `DataProcessor._read_tsv` reads while a split's examples are made.
_FILES_READ = contextvars.ContextVar("files_read", default=None)


class DataProcessor:
    """The original's base class for data converters of sequence classification sets.

    Subclasses implement the four `get_*` methods; `_read_tsv` reads a TSV file.
    """

    def get_train_examples(self, data_dir):
        """The `InputExample`s of the train set."""
        raise NotImplementedError()

    def get_dev_examples(self, data_dir):
        """The `InputExample`s of the dev set."""
        raise NotImplementedError()

    def get_test_examples(self, data_dir):
        """The `InputExample`s of the test set (for prediction)."""
        raise NotImplementedError()

    def get_labels(self):
        """The list of labels of this data set."""
        raise NotImplementedError()

    @classmethod
    def _read_tsv(cls, input_file, quotechar=None):
        """Every row of a tab-separated file (header included) as a list of str.

        Unlike the original, a row with another column count than the first line is an
        error naming the file and line, and empty lines are skipped.
        """
        recorder = _FILES_READ.get()
        if recorder is not None:
            recorder.append(os.fspath(input_file))
        if quotechar is None:
            return [row for _, row in text_files.read_tsv(os.fspath(input_file), header=False)]
        lines = (line for _, line in fileio.iter_text_lines(os.fspath(input_file)))
        return list(csv.reader(lines, delimiter="\t", quotechar=quotechar))


def register_processor(name, processor):
    """Makes `name` (case-insensitive) a `--task_name` of bert-run-classifier.

    Args:
        name: The task name; not one of the built-in tasks'.
        processor: A `DataProcessor` subclass (or anything that makes one when called
            without arguments).

    Raises:
        ValueError: for a built-in task's name; TypeError when `processor` is not callable.
    """
    key = str(name).strip().lower()
    if not key:
        raise ValueError("register_processor: the task name is empty")
    if _is_built_in(key):
        raise ValueError(f"register_processor: {name!r} is a built-in task's name; give "
                         "your processor another name")
    if not callable(processor):
        raise TypeError(f"register_processor({name!r}, ...): expected a DataProcessor "
                        f"class, got {type(processor).__name__}")
    _REGISTRY[key] = processor


def _is_built_in(name):
    """Whether `name` (or an alias of it, `sst2`) is a built-in task's."""
    try:
        classification_data.get_processor(name)
    except ValueError:
        return False
    return True


def is_registered(name):
    """Whether `name` is a task name a `register_processor` call added."""
    return str(name).strip().lower() in _REGISTRY


def registered_names():
    """The task names added by `register_processor`, sorted."""
    return sorted(_REGISTRY)


def load_processor_module(spec):
    """Imports `spec` (a .py file, or a module name) and registers its `processors` dict.

    Raises:
        ValueError: naming the module when it cannot be found or its `processors` is not
            a dict of names to processor classes.
    """
    if spec.endswith(".py") or os.sep in spec:
        path = os.path.abspath(fileio.existing_file(spec, "processor module"))
        module = _FILE_MODULES.get(path)
        if module is None:  # a file is run once a process, as an import is
            name = os.path.splitext(os.path.basename(path))[0]
            module_spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[name] = module
            module_spec.loader.exec_module(module)
            _FILE_MODULES[path] = module
    else:
        if os.getcwd() not in sys.path and "" not in sys.path:
            sys.path.append(os.getcwd())  # as `python -m`: the current folder's modules
        try:
            module = importlib.import_module(spec)
        except ModuleNotFoundError as error:
            if error.name != spec.split(".")[0]:
                raise
            raise ValueError(f"processor_module {spec!r}: no such module in the current "
                             "folder or sys.path; pass the path of its .py file") from None
    processors = getattr(module, "processors", None)
    if processors is None:
        return module
    if not isinstance(processors, dict):
        raise ValueError(f"processor_module {spec!r}: `processors` must be a dict of task "
                         f"name -> DataProcessor class, got {type(processors).__name__}")
    for task_name, processor in processors.items():
        register_processor(task_name, processor)
    return module


def find(options):
    """The processor of `options.task_name` when `register_processor` (or the
    `processors` dict of `options.processor_module`, imported here) added it, else None.

    Args:
        options: A run's `ClassifierOptions` (task_name, processor_module, data_dir and
            the do_train / do_eval / do_predict steps).
    """
    if options.processor_module:
        load_processor_module(options.processor_module)
    if not is_registered(options.task_name):
        return None
    splits = [split for flag, split in (("do_train", "train"), ("do_eval", "dev"),
                                        ("do_predict", "test")) if getattr(options, flag)]
    return get_processor(options.task_name, options.data_dir, splits)


def get_processor(name, data_dir, splits):
    """The registered processor of `name`, as bert_tf's processors are.

    Args:
        name: A registered task name.
        data_dir: The run's data folder.
        splits: The splits the run reads ("train", "dev", "test"), in that order; the
            first one's examples tell whether the task reads sentence pairs.
    """
    key = str(name).strip().lower()
    return OriginalStyleProcessor(key, _REGISTRY[key](), data_dir, splits)


class OriginalStyleProcessor:
    """bert_tf's processor interface (`bert_tf.tasks.classification.data`) over a
    processor in the original's style.

    Examples are checked where they are made: a guid without its split (`"train-3"`)
    gets it, labels (and the label list) are compared as str, and every example's
    label must be one of `get_labels()` (the test set's too, as in the original).
    """

    is_regression = False
    metric_names = ("accuracy",)
    submission_name = PREDICTIONS_FILE

    def __init__(self, name, processor, data_dir, splits):
        self.name = name
        self.processor = processor
        self.data_dir = data_dir
        self.splits = tuple(splits)
        self._read = {}  # (data_dir, split) -> (examples, files)

    @property
    def text_pair_column(self):
        """"text_b" when the run's examples are sentence pairs, else None (the first
        split of the run decides; what the task reads for windows and exports)."""
        for split in self.splits:
            examples, _ = self._examples(self.data_dir, split)
            return "text_b" if any(e.text_b is not None for e in examples) else None
        return None

    def get_labels(self, data_dir=None):
        """The processor's labels, as str, in id order.

        Raises:
            ValueError: for fewer than two labels, or one given twice.
        """
        del data_dir
        labels = [str(label) for label in self.processor.get_labels()]
        if len(set(labels)) < 2 or len(set(labels)) != len(labels):
            raise ValueError(f"task {self.name}: {type(self.processor).__name__}.get_labels() "
                             f"returned {labels}; classification needs at least two "
                             "different labels, each given once")
        return labels

    def data_files(self, data_dir, split):
        """The files the split's examples were read from (by `_read_tsv`), else every
        file of data_dir: what the cached features are keyed by."""
        return self._examples(data_dir, split)[1]

    def get_examples(self, data_dir, split):
        """The split's examples, checked (see the class)."""
        return self._examples(data_dir, split)[0]

    def _examples(self, data_dir, split):
        key = (data_dir, split)
        if key not in self._read:
            method = SPLIT_METHODS[split]
            files = []
            token = _FILES_READ.set(files)
            try:
                examples = getattr(self.processor, method)(data_dir)
            except NotImplementedError:
                raise ValueError(f"task {self.name}: {type(self.processor).__name__}."
                                 f"{method} is not implemented; the run reads the {split} "
                                 "set") from None
            finally:
                _FILES_READ.reset(token)
            self._read[key] = ([self._checked(e, split, i) for i, e in enumerate(examples)],
                               sorted(set(files)) or _folder_files(data_dir, self.name))
        return self._read[key]

    def _checked(self, example, split, index):
        """bert_tf's `InputExample` of one of the processor's examples."""
        source = f"task {self.name}: {split} example {index}"
        try:
            guid, text_a = example.guid, example.text_a
            text_b, label = example.text_b, example.label
        except AttributeError:
            raise ValueError(f"{source} is a {type(example).__name__}; expected an "
                             "InputExample(guid, text_a, text_b, label)") from None
        guid = str(guid)
        if "-" not in guid:
            guid = f"{split}-{guid}"
        return InputExample(guid, text_a, text_b, None if label is None else str(label),
                            f"{source} ({guid})")


def _folder_files(data_dir, name):
    """The files of `data_dir` (what the features are keyed by when the processor read
    its data without `_read_tsv`)."""
    if os.path.isdir(data_dir):
        files = sorted(os.path.join(data_dir, entry) for entry in os.listdir(data_dir))
        files = [path for path in files if os.path.isfile(path)]
        if files:
            return files
    raise ValueError(f"task {name}: data_dir {data_dir!r} holds no file; pass the folder "
                     "your processor reads")
