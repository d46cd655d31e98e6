"""What `fit`, `evaluate` and `predict` take, checked and turned into batches of model inputs.

Texts come as a str, a list, a numpy array or a pandas column; sentence pairs as a tuple of
two of them; labels as a list, array or column of the class names (or of the ids, when
the names are the ids' own digits). Everything is checked before any work: lengths that
differ, an empty text, a label not in the list, single texts for a pair model.
"""

import numpy as np
import tensorflow as tf


def text_columns(x, text_pair):
    """`x` (texts, or a tuple of two columns of texts) as a list of 1 or 2 lists of str.

    Raises:
      TypeError / ValueError: naming the column, the row and what was expected.
    """
    pair = isinstance(x, tuple)
    if pair and len(x) != 2:
        raise ValueError(f"x is a tuple of {len(x)} items: expected 2 columns (texts_a, "
                         "texts_b) of sentence pairs, or a list of texts")
    if text_pair is not None and pair != text_pair:
        raise ValueError("x holds sentence pairs (a tuple of two columns), but this model "
                         "was trained on single texts" if pair else "x holds single texts, "
                         "but this model takes sentence pairs: pass x=(texts_a, texts_b)")
    names = ("x[0] (texts_a)", "x[1] (texts_b)") if pair else ("x",)
    columns = [text_column(column, name) for column, name in zip(x if pair else (x,), names)]
    if pair and len(columns[0]) != len(columns[1]):
        raise ValueError(f"x[0] has {len(columns[0])} texts but x[1] has "
                         f"{len(columns[1])}: expected one second text per first text")
    return columns


def text_column(column, name):
    """One column (`name` in errors) as a list of non-empty str."""
    if isinstance(column, str):
        column = [column]
    if isinstance(column, (bytes, dict)) or not hasattr(column, "__len__"):
        raise TypeError(f"{name} is a {type(column).__name__}: expected a list, numpy "
                        "array or pandas column of texts")
    texts = np.asarray(column, dtype=object).reshape(-1).tolist()
    if not texts:
        raise ValueError(f"{name} is empty: expected at least one text")
    for row, text in enumerate(texts):
        if isinstance(text, bytes):
            try:
                text = texts[row] = text.decode("utf-8")
            except UnicodeDecodeError:
                raise ValueError(f"{name}[{row}] is not valid UTF-8: {text[:40]!r}") from None
        if not isinstance(text, str):
            raise TypeError(f"{name}[{row}] is {type(text).__name__} {text!r:.60}: "
                            "expected a str")
        if not text.strip():
            raise ValueError(f"{name}[{row}] is an empty text: every row needs text "
                             "(drop the row, or give it its text)")
    return texts


def label_ids(y, labels, num_texts):
    """The class id of each label of `y`, in the order of `labels` (class names).

    A label matches a name equal to it or to its str (1 and "1" both match "1").

    Raises:
      ValueError: `y` is not as long as the texts, or holds a label not in `labels`.
    """
    values = _column_of(y, "y", num_texts)
    index = {name: position for position, name in enumerate(labels)}
    ids = []
    for row, value in enumerate(values):
        key = value if value in index else str(value)
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            key = key if key in index else str(int(value))
        if key not in index:
            raise ValueError(f"y[{row}] is {value!r}, not one of the labels {labels}: "
                             "give each row one of them (or load the model with the labels "
                             "your data has)")
        ids.append(index[key])
    return np.asarray(ids, np.int32)


def scores(y, num_texts):
    """Regression targets of `y` as float32 [N]."""
    values = _column_of(y, "y", num_texts)
    try:
        return np.asarray(values, np.float32)
    except (TypeError, ValueError):
        raise ValueError(f"y holds {values[:3]!r}...: a regression model needs "
                         "numbers") from None


def _column_of(y, name, num_texts):
    if y is None:
        raise ValueError(f"{name} is missing: pass the label of each text")
    if isinstance(y, (str, bytes)) or not hasattr(y, "__len__"):
        raise TypeError(f"{name} is a {type(y).__name__}: expected a list, numpy array or "
                        "pandas column of labels, one per text")
    values = np.asarray(y, dtype=object).reshape(-1).tolist()
    if len(values) != num_texts:
        raise ValueError(f"{name} has {len(values)} labels but x has {num_texts} texts: "
                         "expected one label per text")
    return values


def batches(columns, targets, preprocessor, batch_size, shuffle_seed=None):
    """A dataset of (model inputs [B, L], targets [B]) batches, each cut to its longest
    row; shuffled each epoch when `shuffle_seed` is given (an int) or True."""
    texts = tuple(tf.constant(column, tf.string) for column in columns)
    elements = texts if targets is None else (texts, tf.constant(targets))
    dataset = tf.data.Dataset.from_tensor_slices(elements)
    if shuffle_seed is not None:
        seed = None if shuffle_seed is True else int(shuffle_seed)
        dataset = dataset.shuffle(len(columns[0]), seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.batch(batch_size)

    def preprocess(*element):
        if targets is None:
            return (preprocessor(_as_x(element)),)
        return preprocessor(_as_x(element[0])), element[1]
    return dataset.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE).prefetch(
        tf.data.AUTOTUNE)


def _as_x(texts):
    """One column, or the tuple of a pair (the preprocessor's input)."""
    return tuple(texts) if len(texts) == 2 else texts[0]


def check_batch_size(batch_size):
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
            or batch_size < 1:
        raise ValueError(f"batch_size={batch_size!r}: expected a positive integer")
    return int(batch_size)
