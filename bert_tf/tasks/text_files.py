"""Reading labelled text files for classification: TSV rows, CSV/JSONL with named columns.

Every file is read through `bert_tf.fileio.iter_text_lines` (UTF-8; a line that is not,
or a binary file, is an error naming file, line and byte). `read_tsv` yields (line
number, fields) and rejects a row whose column count differs from the first row's,
naming file and line. `GenericProcessor` reads your own
`train` / `dev` / `test` files (`.tsv`, `.csv`, `.jsonl`) with named text, optional
text-pair, optional id and label columns.
"""

import csv
import dataclasses
import json
import os
from typing import Optional, Sequence

from bert_tf import fileio

DATA_EXTENSIONS = (".tsv", ".csv", ".jsonl", ".json")


@dataclasses.dataclass(frozen=True)
class InputExample:
    """One example: `label` is a class name (str), a float (regression) or None (test)."""
    guid: str
    text_a: str
    text_b: Optional[str] = None
    label: object = None
    source: str = ""  # "file:line", for error messages


def check_label(label, labels: Sequence[str], source: str) -> None:
    """Raises ValueError naming `source` when `label` is not one of `labels`."""
    if label not in labels:
        raise ValueError(f"{source}: label {label!r} is not one of the task's labels "
                         f"{list(labels)}")


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
    """float(value), or a ValueError naming file, line and field."""
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"{path}:{line_number}: {field} {value!r} is not a number") from None


def _read_records(path: str):
    """Yields (line_number, dict of column -> value) from a .tsv, .csv or .jsonl file."""
    if path.endswith((".jsonl", ".json")):
        for line_number, line in fileio.iter_text_lines(path):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
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
            continue
        yield line_number, dict(zip(names, fields))


def _read_csv_rows(path: str):
    reader = csv.reader(line for _, line in fileio.iter_text_lines(path))
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


class GenericProcessor:
    """Your own data: `train`, `dev`, `test` files in data_dir with named columns.

    Args:
      text_column: column (or JSON key) of the first text.
      label_column: column of the label (optional in the test file).
      text_pair_column: column of the second text, for sentence pairs.
      id_column: column of an example id written to the submission file (default: row).
      labels: class names in id order; None: the sorted labels of the train file.
      is_regression: labels are numbers (one output; Pearson/Spearman).
    """

    name = "generic"
    submission_name = "predictions.tsv"

    def __init__(self, text_column="text", label_column="label", text_pair_column=None,
                 id_column=None, labels=None, is_regression=False):
        self.text_column, self.label_column = text_column, label_column
        self.text_pair_column, self.id_column = text_pair_column, id_column
        self.is_regression = bool(is_regression)
        self._labels = list(labels) if labels else None
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
        """Class names in id order (inferred from the train file when not given)."""
        if self.is_regression:
            return None
        if self._labels is None:
            if data_dir is None:
                raise ValueError("generic task: pass labels or a data_dir with a train file")
            path = self.data_files(data_dir, "train")[0]
            found = {self._field(record, self.label_column, path, line, "label")
                     for line, record in _read_records(path)}
            self._labels = sorted(found)
            if len(self._labels) == 2:
                self.metric_names = ("accuracy", "f1")
        return list(self._labels)

    def _field(self, record, name, path, line_number, what):
        if name not in record:
            raise ValueError(f"{path}:{line_number}: no {what} column {name!r}; columns: "
                             f"{sorted(record)}")
        value = record[name]
        return value if isinstance(value, str) else json.dumps(value)

    def get_examples(self, data_dir: str, split: str) -> list:
        """Examples of `split`; the test file may lack the label column."""
        path = self.data_files(data_dir, split)[0]
        examples = []
        for line_number, record in _read_records(path):
            source = f"{path}:{line_number}"
            text_a = self._field(record, self.text_column, path, line_number, "text")
            text_b = (self._field(record, self.text_pair_column, path, line_number, "text pair")
                      if self.text_pair_column else None)
            label = None
            if split != "test" or self.label_column in record:
                label = self._field(record, self.label_column, path, line_number, "label")
                if self.is_regression:
                    label = parse_float(label, path, line_number, "label")
                else:
                    check_label(label, self.get_labels(data_dir), source)
            guid = (self._field(record, self.id_column, path, line_number, "id")
                    if self.id_column else str(len(examples)))
            examples.append(InputExample(f"{split}-{guid}", text_a, text_b, label, source))
        return examples
