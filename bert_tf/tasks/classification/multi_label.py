"""Multi-label classification of your own files: a label column holding several labels.

    processor = MultiLabelProcessor(label_separator=",", text_column="text")
    labels = processor.get_labels(data_dir)          # the union of the train file's labels
    examples = processor.get_examples(data_dir, "train")   # label: a tuple of names

A row's labels are a string of names separated by `label_separator` in TSV/CSV (an empty
cell: no label) or a JSON list in JSONL (`[]`: no label). The model is the usual
`BertClassifier` with one logit per label: sigmoid outputs, binary cross-entropy averaged
over labels and examples (as torch's `BCEWithLogitsLoss` and transformers'
`problem_type="multi_label_classification"`), a label is predicted when its probability
is at least the threshold. Features hold the labels as a multi-hot float vector [C].
"""

import numpy as np
import tensorflow as tf

from bert_tf.io import fileio
from bert_tf.runs import text_files
from bert_tf.train import finetune_packing

NAME = "generic-multi-label"


class MultiLabelProcessor(text_files.GenericProcessor):
    """`GenericProcessor` whose label column holds a set of labels (see the module).

    Args:
      label_separator: what separates the labels of a TSV/CSV cell (or a JSON string).
      **kwargs: the arguments of `text_files.GenericProcessor` (not `is_regression`).
    """

    name = NAME

    def __init__(self, label_separator=",", **kwargs):
        if kwargs.get("is_regression"):
            raise ValueError("multi_label and is_regression exclude each other: a "
                             "multi-label row holds class names, not a number")
        if not label_separator:
            raise ValueError("label_separator is empty; multi-label cells need a "
                             "separator between their labels (default ',')")
        super().__init__(**kwargs)
        self.label_separator = label_separator
        self.metric_names = ("multi_label",)

    def get_labels(self, data_dir: str = None) -> list:
        """The labels in id order: given, else the sorted union of the train file's."""
        labels = super().get_labels(data_dir)
        self.metric_names = ("multi_label",)
        return labels

    def _label_names(self, record, path, line_number, kinds) -> tuple:
        """The labels of a row, each once, in the row's order (empty: no label)."""
        value = self._value(record, self.label_column, path, line_number, "label")
        if isinstance(value, str):
            items = value.split(self.label_separator) if value.strip() else []
        elif isinstance(value, list) or (isinstance(value, int)
                                         and not isinstance(value, bool)):
            items = value if isinstance(value, list) else [value]
        else:
            raise ValueError(f"{path}:{line_number}: label column {self.label_column!r} "
                             f"holds {text_files.json_type(value)}; expected a list of "
                             f"labels (or a string of labels separated by "
                             f"{self.label_separator!r})")
        names = []
        for item in items:
            if isinstance(item, str):
                if not item.strip():
                    raise ValueError(
                        f"{path}:{line_number}: empty label in {value!r} (column "
                        f"{self.label_column!r}); remove the doubled or trailing "
                        f"separator {self.label_separator!r}, or leave the cell empty "
                        "for no label")
                item = item.strip()
            names.append(self._class_label({self.label_column: item}, path, line_number,
                                           kinds))
        return tuple(dict.fromkeys(names))

    def _label(self, record, split, path, line_number, kinds) -> tuple:
        value = record.get(self.label_column)
        if split == "test" and (value is None or isinstance(value, str) and not value.strip()):
            return ()  # labels are not needed to predict
        return self._label_names(record, path, line_number, kinds)

    def _check_label(self, label, labels, source) -> None:
        for name in label:
            text_files.check_label(name, labels, source, self._labels_origin)

    @property
    def feature_key(self) -> dict:
        """What the cached features depend on beyond the files and labels."""
        return {"label_separator": self.label_separator}


def multi_hot(names, label_list) -> list:
    """[C] floats: 1.0 for each label of `names` (a tuple), in `label_list` order."""
    present = set(names)
    return [1.0 if label in present else 0.0 for label in label_list]


def split_label_columns(batch, num_labels):
    """`label_ids` [N, C] as C features `label_ids/<c>` [N] (packing moves scalars)."""
    batch = dict(batch)
    labels = batch.pop("label_ids")
    batch.update({f"label_ids/{index}": labels[:, index] for index in range(num_labels)})
    return batch


def stack_label_columns(batch, num_labels):
    """The inverse of `split_label_columns` on packed rows: `label_ids` [B, K, C]."""
    batch = dict(batch)
    columns = [batch.pop(f"label_ids/{index}") for index in range(num_labels)]
    batch["label_ids"] = tf.stack(columns, axis=-1)
    return batch


def loss_fn(pos_weights=None):
    """Binary cross-entropy of each label's logit, averaged over the labels and the
    batch's examples (packed rows: their real examples); `pos_weights` [C] scale each
    label's positive term (torch's pos_weight)."""
    def compute(features, outputs):
        logits = tf.cast(outputs["logits"], tf.float32)  # [B, C] or packed [B, K, C]
        labels = tf.cast(features["label_ids"], tf.float32)  # as logits
        weights = 1.0 if pos_weights is None else tf.constant(pos_weights, tf.float32)
        per_label = tf.nn.weighted_cross_entropy_with_logits(labels, logits, weights)
        per_example = tf.reduce_mean(per_label, axis=-1)  # [B] or [B, K]
        if finetune_packing.is_packed(features):
            return finetune_packing.weighted_mean(per_example, features["sequence_weights"])
        return tf.reduce_mean(per_example)
    return compute


def sigmoid(logits: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.asarray(logits, np.float64)))


def mean_loss(logits, labels, pos_weights=None) -> float:
    """numpy `loss_fn`: mean binary cross-entropy over [N, C] (float64)."""
    logits, labels = np.asarray(logits, np.float64), np.asarray(labels, np.float64)
    pos = np.ones(logits.shape[-1]) if pos_weights is None else np.asarray(pos_weights)
    log_sigmoid = -np.logaddexp(0.0, -logits)  # log p, stable
    log_not = -np.logaddexp(0.0, logits)  # log (1 - p)
    return float(-np.mean(pos * labels * log_sigmoid + (1.0 - labels) * log_not))


def predicted_sets(probabilities, label_list, threshold) -> list:
    """The labels at or above `threshold` of each row, in label-id order."""
    return [[label for label, p in zip(label_list, row) if p >= threshold]
            for row in np.asarray(probabilities)]


def write_predictions(path, examples, probabilities, label_list, threshold,
                      separator) -> None:
    """`predictions.tsv`: a header `index prediction <label>...`, then per example its
    id, its predicted labels joined by `separator` (empty: none) and the probability
    of every label."""
    lines = ["\t".join(["index", "prediction"] + list(label_list)) + "\n"]
    predicted = predicted_sets(probabilities, label_list, threshold)
    for example, labels, row in zip(examples, predicted, np.asarray(probabilities)):
        lines.append("\t".join([example.guid.split("-", 1)[1], separator.join(labels)]
                               + [f"{p:.6f}" for p in row]) + "\n")
    fileio.write_text_atomic(path, "".join(lines))
