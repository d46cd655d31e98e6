"""Issue 49, class 3: a column flag names the column of its own role.

Every command whose options name columns (`--tag_column` and `--word_column` of NER,
`--text_column` / `--label_column` / `--id_column` of classification, the pair columns of
sentence embeddings, `bert-encode`'s) refuses two flags naming one column, and a task
whose labels come from a column refuses a label set that looks like the words:

    column_roles.check_columns_apart(options)       # compose(..., checks=(this,))
    column_roles.check_labels_not_words(words, tags, "--tag_column=0", "train.txt")

Before, `bert-run-ner --tag_column=0` (the word column) trained the words as tags and
exited 0.
"""

import collections
from typing import Iterable, Optional

# A label set this small is a real one, whatever its counts (CoNLL-2003: 9 tags).
MIN_WORD_LIKE_LABELS = 20


def column_options(options) -> dict:
    """{field: value} of the options' column flags (`*_column`) that are set."""
    return {name: value for name, value in vars(options).items()
            if name.endswith("_column") and value is not None and value != ""}


def check_columns_apart(options) -> None:
    """Refuses two column flags of `options` naming one column (`--tag_column=0`
    beside `--word_column=0`): each column has one role. The rule of every options
    class with two or more `*_column` fields (`compose(..., checks=(this,))`).

    Raises:
      ValueError: naming both flags and the column.
    """
    check_distinct(column_options(options))


def check_distinct(columns: dict, width: Optional[int] = None, where: str = "") -> None:
    """Refuses two entries of `columns` ({flag name: column}) naming one column.

    Args:
      columns: {option name without dashes: column index (negative: from the end) or
        name}.
      width: The number of columns of a line, to compare integer columns counted from the
        end (-1) with ones counted from the start (None: as given).
      where: A file and line (`train.txt:7: `) to name.

    Raises:
      ValueError: naming both flags and the column.
    """
    seen = {}
    for name, value in columns.items():
        key = value
        if width and isinstance(value, int) and not isinstance(value, bool):
            key = value % width if -width <= value < width else value
        if key in seen:
            other = seen[key]
            raise ValueError(
                f"{where}--{other}={columns[other]} and --{name}={value} name one column: "
                f"a column has one role; pass --{other} and --{name} each the column "
                "that holds its values")
        seen[key] = name


def check_labels_not_words(words: Iterable[str], labels: Iterable[str], flag: str,
                           source: str) -> None:
    """Refuses labels that look like the words: about as many labels as distinct words
    (at least half as many, and `MIN_WORD_LIKE_LABELS`), most of them seen once. A label
    column holds a few labels, each many times; a column of words does not.

    Args:
      words: The words (or texts) of the training file, one per labelled item.
      labels: Their labels, as read from the column.
      flag: The flag that chose the label column, with its value (`--tag_column=0`).
      source: The file read.

    Raises:
      ValueError: naming the flag, the file and the counts.
    """
    counts = collections.Counter(labels)
    distinct_words = len(set(words))
    once = sum(1 for count in counts.values() if count == 1)
    if (len(counts) >= MIN_WORD_LIKE_LABELS and 2 * len(counts) >= distinct_words
            and 2 * once > len(counts)):
        shown = ", ".join(repr(label) for label, _ in counts.most_common(5))
        raise ValueError(
            f"{source}: {flag} reads {len(counts)} different labels for "
            f"{distinct_words} different words, {once} of them seen once ({shown}, ...): "
            f"that column holds words, not labels; pass {flag.split('=')[0]} the column "
            "of the labels")
