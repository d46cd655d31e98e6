"""Reading labelled text files for classification: TSV rows, CSV/JSONL with named columns.

Every file is read through `bert_tf.io.fileio.iter_text_lines` (UTF-8; a line that is not,
or a binary file, is an error naming file, line and byte). `read_tsv` yields (line
number, fields) and rejects a row whose column count differs from the first row's,
naming file and line; `read_records` yields (line number, {column: value}) of a `.tsv`
or `.csv` file with a header, or of a `.jsonl` file's objects. `GenericProcessor` reads
your own `train` / `dev` / `test` files (`.tsv`, `.csv`, `.jsonl`) with named text,
optional text-pair, optional id and label columns, and checks every value's type and
emptiness where it reads it (a JSON `null` or list is not trained as the text "null").
`check_unique_ids` refuses two examples with one id.
"""

import csv
import dataclasses
import json
import math
import os
from typing import Optional, Sequence

from bert_tf.io import fileio

DATA_EXTENSIONS = (".tsv", ".csv", ".jsonl", ".json")


@dataclasses.dataclass(frozen=True)
class InputExample:
    """One example: `label` is a class name (str), a float (regression) or None (test)."""
    guid: str
    text_a: str
    text_b: Optional[str] = None
    label: object = None
    source: str = ""  # "file:line", for error messages


def check_label(label, labels: Sequence[str], source: str,
                origin: str = "the task's labels") -> None:
    """Raises ValueError naming `source` when `label` is not one of `labels`.

    Args:
      origin: where `labels` come from, for the message ("the labels of the train file
        train.tsv").
    """
    if label in labels:
        return
    if not str(label).strip():
        raise ValueError(f"{source}: empty label; expected one of {origin} {list(labels)}")
    raise ValueError(f"{source}: label {label!r} is not one of {origin} {list(labels)}")


def require_file(path: str, split: str, task_name: str) -> str:
    """Returns `path`, or raises FileNotFoundError saying which file was expected."""
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"task {task_name}: the {split} file was expected at {path} (not found)")
    return path


def read_tsv(path: str, header: bool = True):
    """Yields (line_number, fields) of the data rows of a tab-separated file.

    No quoting (as GLUE's files need); a UTF-8 byte-order mark and CR are removed, empty
    lines skipped. Every row must have as many columns as the first line.
    """
    expected = None
    for line_number, line in fileio.iter_text_lines(path):
        line = line.rstrip("\n").rstrip("\r")
        if not line.strip():
            continue
        fields = line.split("\t")
        if expected is None:
            expected = len(fields)
            if header:
                continue
        elif len(fields) != expected:
            raise ValueError(f"{path}:{line_number}: {len(fields)} tab-separated columns, "
                             f"expected {expected} as in the first line")
        yield line_number, fields


def column(row: list, index: int, path: str, line_number: int, field: str) -> str:
    """`row[index]`, or a ValueError naming file, line and the missing field."""
    try:
        return row[index]
    except IndexError:
        raise ValueError(f"{path}:{line_number}: no column {index} ({field}) in a row of "
                         f"{len(row)} columns") from None


def parse_float(value: str, path: str, line_number: int, field: str) -> float:
    """float(value), or a ValueError naming file, line and field (also for nan, inf)."""
    try:
        number = float(value)
    except ValueError:
        if not value.strip():
            raise ValueError(f"{path}:{line_number}: empty {field}; expected a number "
                             "on every labelled row") from None
        raise ValueError(f"{path}:{line_number}: {field} {value!r} is not a number") from None
    if not math.isfinite(number):
        raise ValueError(f"{path}:{line_number}: {field} {value!r} is not a finite number "
                         "(it would make the loss nan)")
    return number


def read_records(path: str):
    """Yields (line_number, dict of column -> value) from a .tsv, .csv or .jsonl file."""
    if path.endswith((".jsonl", ".json")):
        for line_number, line in fileio.iter_text_lines(path):
            if not line.strip():
                continue
            try:
                record = json.loads(line, object_pairs_hook=lambda pairs: _unique_keys(
                    pairs, f"{path}:{line_number}"))
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{line_number}: not a JSON object: {error}") from None
            if not isinstance(record, dict):
                raise ValueError(f"{path}:{line_number}: expected a JSON object per line")
            yield line_number, record
        return
    if path.endswith(".tsv"):
        rows = read_tsv(path, header=False)
    else:
        rows = _read_csv_rows(path)
    names = None
    for line_number, fields in rows:
        if names is None:
            names = fields
            _refuse_repeated([name.strip() for name in names], f"{path}:{line_number}",
                             "the header names column")
            continue
        yield line_number, dict(zip(names, fields))


def _refuse_repeated(names, source, what) -> None:
    """Refuses a name given twice (a header's columns, a JSON object's keys): the row
    would silently keep the last of the two values."""
    seen = set()
    for name in names:
        if name in seen:
            raise ValueError(f"{source}: {what} {name!r} twice; each needs its own name "
                             "(the second would silently replace the first)")
        seen.add(name)


def _unique_keys(pairs, source):
    """`json.loads(object_pairs_hook=...)`: the object, a key given twice refused."""
    _refuse_repeated([key for key, _ in pairs], source, "the JSON object has key")
    return dict(pairs)


def _read_csv_rows(path: str):
    """Yields (line_number, fields) of each non-empty row, refusing ragged rows and
    what the csv module cannot parse (naming file and line)."""
    reader = csv.reader(line for _, line in fileio.iter_text_lines(path))
    try:
        yield from _checked_rows(path, reader)
    except csv.Error as error:
        raise ValueError(f"{path}:{reader.line_num}: not readable as CSV ({error}); "
                         "quote fields that hold line breaks, and save a file whose lines "
                         "end in CR only (old Mac) with LF or CRLF line ends") from None


def _checked_rows(path, reader):
    expected = None
    for fields in reader:
        if not fields:
            continue
        if expected is None:
            expected = len(fields)
        elif len(fields) != expected:
            raise ValueError(f"{path}:{reader.line_num}: {len(fields)} comma-separated "
                             f"columns, expected {expected} as in the header")
        yield reader.line_num, fields


def json_type(value) -> str:
    """How a message names the JSON type of `value` ("a string", "null", "a list")."""
    if value is None:
        return "null"
    for kind, name in ((bool, "a boolean"), (int, "an integer"), (float, "a number"),
                       (str, "a string"), (list, "a list")):
        if isinstance(value, kind):
            return name
    return "an object"


def check_unique_ids(examples: Sequence[InputExample]) -> None:
    """Refuses two examples with one id (the predictions are written by id).

    Raises:
      ValueError: naming the id and the two lines (`file:line`) that hold it.
    """
    first = {}
    for example in examples:
        if example.guid in first:
            raise ValueError(
                f"{example.source}: id {example.guid.split('-', 1)[1]!r} is also the id of "
                f"{first[example.guid]}; the predictions are written by id, so each example "
                "needs its own")
        first[example.guid] = example.source


class GenericProcessor:
    """Your own data: `train`, `dev`, `test` files in data_dir with named columns.

    Every value is checked where it is read, naming file, line and column: texts must be
    non-empty strings, ids strings or integers without tab, CR or LF, labels non-empty.
    A class label is a string or an integer (written as its digits); one file's labels
    are all strings or all integers (`1` beside `"pos"` is refused, not made a third
    class). Labels inferred from the train file must be at least two. In the test file
    the label column is optional and an empty (or null) label means unlabelled.

    Args:
      text_column: column (or JSON key) of the first text.
      label_column: column of the label (optional in the test file).
      text_pair_column: column of the second text, for sentence pairs.
      id_column: column of an example id written to the submission file (default: row);
        required in the test file only.
      labels: class names in id order; None: the sorted labels of the train file.
      is_regression: labels are numbers (one output; Pearson/Spearman).
      labels_origin: where `labels` come from, for messages ("the given labels").
    """

    name = "generic"
    submission_name = "predictions.tsv"

    def __init__(self, text_column="text", label_column="label", text_pair_column=None,
                 id_column=None, labels=None, is_regression=False, labels_origin=None):
        self.text_column, self.label_column = text_column, label_column
        self.text_pair_column, self.id_column = text_pair_column, id_column
        self.is_regression = bool(is_regression)
        self._labels = [str(label).strip() for label in labels] if labels else None
        self._labels_origin = labels_origin or "the given labels"
        self.metric_names = ("pearson_and_spearman",) if is_regression else ("accuracy",)
        if self._labels and len(self._labels) == 2:
            self.metric_names = ("accuracy", "f1")

    def data_files(self, data_dir: str, split: str) -> list:
        """[the path of `split`.tsv/.csv/.jsonl/.json in data_dir] (first that exists)."""
        candidates = [os.path.join(data_dir, split + ext) for ext in DATA_EXTENSIONS]
        for path in candidates:
            if os.path.isfile(path):
                return [path]
        raise FileNotFoundError(f"task generic: the {split} file was expected at one of "
                                f"{', '.join(candidates)} (none found)")

    def get_labels(self, data_dir: str = None) -> Optional[list]:
        """Class names in id order (inferred from the train file when not given).

        Raises:
          ValueError: for fewer than two classes (a one-class head learns nothing), or a
            train file label that cannot be read (see the class docstring).
        """
        if self.is_regression:
            return None
        if self._labels is None:
            if data_dir is None:
                raise ValueError("generic task: pass labels or a data_dir with a train file")
            path = self.data_files(data_dir, "train")[0]
            kinds = {}
            self._labels = sorted({label for line, record in read_records(path)
                                   for label in self._label_names(record, path, line, kinds)})
            self._labels_origin = f"the labels of the train file {path}"
            if len(self._labels) < 2:
                found = f"only label {self._labels[0]!r}" if self._labels else "no rows"
                raise ValueError(f"{path}: the train file holds {found}; classification "
                                 "needs at least two classes (give the full set with "
                                 "labels, or set is_regression for numbers)")
            if len(self._labels) == 2:
                self.metric_names = ("accuracy", "f1")
        if len(set(self._labels)) < 2 or len(set(self._labels)) != len(self._labels):
            raise ValueError(f"labels {self._labels}: classification needs at least two "
                             "different class names, each given once")
        return list(self._labels)

    def get_examples(self, data_dir: str, split: str) -> list:
        """Examples of `split`; the test file may lack the label column."""
        path = self.data_files(data_dir, split)[0]
        labels = self.get_labels(data_dir)
        examples, kinds = [], {}
        for line_number, record in read_records(path):
            def text(name, what):
                return self._text(record, name, path, line_number, what)
            label = self._label(record, split, path, line_number, kinds)
            if label is not None and labels is not None:
                self._check_label(label, labels, f"{path}:{line_number}")
            guid = (self._id(record, path, line_number) if self.id_column and (
                split == "test" or self.id_column in record) else str(len(examples)))
            text_b = text(self.text_pair_column, "text pair") if self.text_pair_column else None
            examples.append(InputExample(f"{split}-{guid}", text(self.text_column, "text"),
                                         text_b, label, f"{path}:{line_number}"))
        return examples

    @staticmethod
    def _value(record, name, path, line_number, what):
        if name not in record:
            raise ValueError(f"{path}:{line_number}: no {what} column {name!r}; columns: "
                             f"{sorted(record)}")
        return record[name]

    def _text(self, record, name, path, line_number, what):
        value = self._value(record, name, path, line_number, what)
        if not isinstance(value, str):
            raise ValueError(f"{path}:{line_number}: {what} column {name!r} holds "
                             f"{json_type(value)}; expected a string")
        if not value.strip():
            raise ValueError(f"{path}:{line_number}: {what} column {name!r} is empty; "
                             "every row needs its text")
        return value

    def _id(self, record, path, line_number):
        value = self._value(record, self.id_column, path, line_number, "id")
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise ValueError(f"{path}:{line_number}: id column {self.id_column!r} holds "
                             f"{json_type(value)}; expected a string or an integer")
        value = str(value)
        if not value.strip() or any(char in value for char in "\t\r\n"):
            raise ValueError(f"{path}:{line_number}: id {value!r} is empty or holds a tab, "
                             "CR or LF; ids are written into the tab-separated predictions")
        return value

    def _label(self, record, split, path, line_number, kinds):
        """The row's label: a class name, a float (regression) or None (unlabelled test)."""
        value = record.get(self.label_column)
        if split == "test" and (value is None or isinstance(value, str) and not value.strip()):
            return None  # labels are not needed to predict
        if self.is_regression:
            value = self._value(record, self.label_column, path, line_number, "label")
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                raise ValueError(f"{path}:{line_number}: label column {self.label_column!r} "
                                 f"holds {json_type(value)}; expected a number")
            return parse_float(value, path, line_number, "label")
        return self._class_label(record, path, line_number, kinds)

    def _label_names(self, record, path, line_number, kinds) -> tuple:
        """The class names a train file row holds (the label set is their union)."""
        return (self._class_label(record, path, line_number, kinds),)

    def _check_label(self, label, labels, source) -> None:
        """Refuses a row's label outside `labels`, naming `source` (file:line)."""
        check_label(label, labels, source, self._labels_origin)

    def _class_label(self, record, path, line_number, kinds) -> str:
        """A class label as a string without surrounding white space (`'pos '` is class
        `'pos'`, in every file and in `labels`); `kinds` remembers the file's first
        label type."""
        value = self._value(record, self.label_column, path, line_number, "label")
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise ValueError(f"{path}:{line_number}: label column {self.label_column!r} "
                             f"holds {json_type(value)}; expected a string or an integer")
        if isinstance(value, str) and not value.strip():
            raise ValueError(f"{path}:{line_number}: empty label (column "
                             f"{self.label_column!r}); every labelled row needs one")
        first_line, first = kinds.setdefault("first", (line_number, value))
        if type(value) is not type(first):
            raise ValueError(
                f"{path}:{line_number}: label {value!r} is {json_type(value)}, but the label "
                f"of line {first_line} ({first!r}) is {json_type(first)}; one file's labels "
                "must be all strings or all integers")
        return str(value).strip()
