"""Sentence(-pair) classification data: GLUE/XNLI processors, your own CSV/TSV/JSONL files.

A processor turns a data folder into `InputExample`s (guid, text_a, optional text_b,
label) and knows the task's labels and metrics. `get_processor(task_name, ...)` returns
one by name; `TASK_NAMES` lists the names. `convert_examples_to_features` tokenizes
(`[CLS] a [SEP] b [SEP]`, pairs truncated longest-first; or, with `doc_stride`, every
window of a long document, each with the document's `example_index`) and
`write_example_features` writes them as a TFRecord (the task caches it in the output
folder under `feature_cache_key`: reused while data, vocabulary and settings are equal).
`classifier_dataset` reads it back.

GLUE files are read as GLUE's download script lays them out (`train.tsv`, `dev.tsv`,
`test.tsv`; MNLI `dev_matched.tsv` / `dev_mismatched.tsv`); a row with another column
count than the header, a label the task does not have, or a missing file is an error
that names the file (and line).
"""

import dataclasses
import os
from typing import Optional, Sequence

import numpy as np
import tensorflow as tf

from bert_tf.io import fileio
from bert_tf.text import input_layout, input_layout_graph
from bert_tf.text.windows import window_segments
from bert_tf.train import finetune_packing
from bert_tf.train import records
from bert_tf.runs import text_files
from bert_tf.tasks.classification import multi_label
from bert_tf.tasks.classification.options import TASK_NAMES
from bert_tf.runs.text_files import InputExample, check_label


@dataclasses.dataclass(frozen=True)
class Layout:
    """Columns of one TSV file; negative indices count from the end of the row."""
    text_a: int
    text_b: Optional[int] = None
    label: Optional[int] = None
    guid: Optional[int] = None
    header: bool = True


@dataclasses.dataclass(frozen=True)
class GlueTask:
    """How one GLUE-style task lays out its files and what it reports."""
    name: str
    labels: Optional[tuple]  # None: regression
    metric_names: tuple
    files: dict  # split -> file name relative to data_dir
    layouts: dict  # split -> Layout
    submission_name: str

    @property
    def is_regression(self) -> bool:
        return self.labels is None


def _pair_task(name, labels, metrics, submission, train, test, text_a, text_b, label=-1,
               files=None):
    files = files or {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"}
    labelled = Layout(text_a, text_b, label, None)
    return GlueTask(name, labels, metrics, files,
                    {"train": train or labelled, "dev": train or labelled, "test": test},
                    submission)


_NLI = ("contradiction", "entailment", "neutral")
_ENTAIL = ("entailment", "not_entailment")
_GLUE_TASKS = [
    GlueTask("cola", ("0", "1"), ("matthews_corrcoef", "accuracy"),
             {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
             {"train": Layout(3, None, 1, None, header=False),
              "dev": Layout(3, None, 1, None, header=False),
              "test": Layout(1, None, None, 0)}, "CoLA.tsv"),
    GlueTask("sst-2", ("0", "1"), ("accuracy",),
             {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
             {"train": Layout(0, None, 1), "dev": Layout(0, None, 1),
              "test": Layout(1, None, None, 0)}, "SST-2.tsv"),
    _pair_task("mrpc", ("0", "1"), ("acc_and_f1",), "MRPC.tsv",
               Layout(3, 4, 0), Layout(3, 4, None, 0), 3, 4),
    _pair_task("sts-b", None, ("pearson_and_spearman",), "STS-B.tsv",
               None, Layout(7, 8, None, 0), 7, 8, label=9),
    _pair_task("qqp", ("0", "1"), ("acc_and_f1",), "QQP.tsv",
               Layout(3, 4, 5), Layout(1, 2, None, 0), 3, 4),
    _pair_task("mnli", _NLI, ("accuracy",), "MNLI-m.tsv", None, Layout(8, 9, None, 0), 8, 9,
               files={"train": "train.tsv", "dev": "dev_matched.tsv",
                      "test": "test_matched.tsv"}),
    _pair_task("mnli-mm", _NLI, ("accuracy",), "MNLI-mm.tsv", None, Layout(8, 9, None, 0),
               8, 9, files={"train": "train.tsv", "dev": "dev_mismatched.tsv",
                            "test": "test_mismatched.tsv"}),
    _pair_task("qnli", _ENTAIL, ("accuracy",), "QNLI.tsv", None, Layout(1, 2, None, 0), 1, 2),
    _pair_task("rte", _ENTAIL, ("accuracy",), "RTE.tsv", None, Layout(1, 2, None, 0), 1, 2),
    _pair_task("wnli", ("0", "1"), ("accuracy",), "WNLI.tsv", None, Layout(1, 2, None, 0),
               1, 2),
]
GLUE_TASKS = {task.name: task for task in _GLUE_TASKS}
_ALIASES = {"sst2": "sst-2", "stsb": "sts-b", "mnli-m": "mnli", "mnli_matched": "mnli",
            "mnli-matched": "mnli", "mnli_mismatched": "mnli-mm", "mnli-mismatched": "mnli-mm",
            "mnli_mm": "mnli-mm", "csv": "generic", "tsv": "generic", "jsonl": "generic"}


class GlueProcessor:
    """Reads the TSV files of one GLUE task (see `GLUE_TASKS`)."""

    def __init__(self, task: GlueTask):
        self.task = task
        self.name = task.name
        self.is_regression = task.is_regression
        self.metric_names = task.metric_names
        self.submission_name = task.submission_name

    def data_files(self, data_dir: str, split: str) -> list:
        """Paths this split is read from."""
        return [os.path.join(data_dir, self.task.files[split])]

    def get_labels(self, data_dir: str = None) -> Optional[list]:
        """Class names in id order; None for regression."""
        del data_dir
        return None if self.is_regression else list(self.task.labels)

    def get_examples(self, data_dir: str, split: str) -> list:
        """Examples of `split` ("train", "dev" or "test")."""
        path = text_files.require_file(self.data_files(data_dir, split)[0], split, self.name)
        layout = self.task.layouts[split]
        examples = []
        for line_number, row in text_files.read_tsv(path, header=layout.header):
            def column(index, field):
                return text_files.column(row, index, path, line_number, field)
            label = None
            if layout.label is not None:
                label = self._parse_label(column(layout.label, "label"), path, line_number)
            guid = column(layout.guid, "id") if layout.guid is not None else str(len(examples))
            text_b = column(layout.text_b, "text_b") if layout.text_b is not None else None
            examples.append(InputExample(f"{split}-{guid}", column(layout.text_a, "text_a"),
                                         text_b, label, f"{path}:{line_number}"))
        return examples

    def _parse_label(self, value, path, line_number):
        if self.is_regression:
            return text_files.parse_float(value, path, line_number, "score")
        check_label(value, self.task.labels, f"{path}:{line_number}")
        return value


class XnliProcessor(GlueProcessor):
    """XNLI: MultiNLI machine-translated train file, XNLI dev/test filtered by language."""

    def __init__(self, language: str = "zh"):
        super().__init__(GlueTask("xnli", _NLI, ("accuracy",), {}, {}, "XNLI.tsv"))
        self.language = language

    def data_files(self, data_dir, split):
        if split == "train":
            return [os.path.join(data_dir, "multinli", f"multinli.train.{self.language}.tsv")]
        return [os.path.join(data_dir, f"xnli.{split}.tsv")]

    def get_examples(self, data_dir, split):
        path = text_files.require_file(self.data_files(data_dir, split)[0], split, self.name)
        examples = []
        for line_number, row in text_files.read_tsv(path, header=True):
            def column(index, field):
                return text_files.column(row, index, path, line_number, field)
            if split == "train":
                text_a, text_b, label = column(0, "premise"), column(1, "hypo"), column(2, "label")
                label = "contradiction" if label == "contradictory" else label
            else:
                if column(0, "language") != self.language:
                    continue
                text_a, text_b, label = (column(6, "sentence1"), column(7, "sentence2"),
                                         column(1, "gold_label"))
            check_label(label, self.task.labels, f"{path}:{line_number}")
            examples.append(InputExample(f"{split}-{len(examples)}", text_a, text_b, label,
                                         f"{path}:{line_number}"))
        return examples


def get_processor(task_name: str, **generic_options):
    """The processor for `task_name` (case-insensitive; see `TASK_NAMES`).

    Args:
      task_name: a GLUE task, "xnli" or "generic" (your own CSV/TSV/JSONL files).
      **generic_options: for "xnli": `language`; for "generic": the arguments of
        `text_files.GenericProcessor`.

    Raises:
      ValueError: listing the known names when `task_name` is unknown.
    """
    name = task_name.strip().lower()
    name = _ALIASES.get(name, name)
    if name in GLUE_TASKS:
        return GlueProcessor(GLUE_TASKS[name])
    if name == "xnli":
        return XnliProcessor(**generic_options)
    if name == "generic":
        return text_files.GenericProcessor(**generic_options)
    raise ValueError(f"unknown task_name {task_name!r}; known tasks: {', '.join(TASK_NAMES)} "
                     "(your own DataProcessor: --processor_module)")


@dataclasses.dataclass
class InputFeatures:
    input_ids: list
    input_mask: list
    segment_ids: list
    label_id: object  # int class id, float score, multi-hot list, or 0 when unlabelled
    example_index: int = 0  # the example this feature (one of its windows) comes from


def convert_examples_to_features(examples, label_list, max_seq_length, tokenizer,
                                 doc_stride=None):
    """Tokenizes examples into `[CLS] a [SEP] (b [SEP])` features padded to max_seq_length.

    Args:
      examples: `InputExample`s.
      label_list: class names in id order, or None for regression.
      max_seq_length: total length including `[CLS]`/`[SEP]` (at least 3 for pairs).
      tokenizer: a `tokenization.FullTokenizer`.
      doc_stride: long documents: each window of an example (`bert_tf.text.windows`,
        consecutive windows `doc_stride` tokens apart) is a feature with the example's
        label and `example_index`, in example order. None: one feature per example,
        truncated.
    """
    if max_seq_length < 3:
        raise ValueError(f"max_seq_length must be at least 3, got {max_seq_length}")
    label_map = {label: index for index, label in enumerate(label_list or [])}
    tokens_a_all = tokenizer.tokenize_batch([example.text_a for example in examples])
    pair_indices = [i for i, example in enumerate(examples) if example.text_b is not None]
    tokens_b_all = dict(zip(pair_indices, tokenizer.tokenize_batch(
        [examples[i].text_b for i in pair_indices])))
    features = []
    for index, example in enumerate(examples):
        tokens_a, tokens_b = tokens_a_all[index], tokens_b_all.get(index)
        label_id = _label_id(example, label_map, label_list)
        for segments in ([input_layout.truncate_segments(tokens_a, tokens_b, max_seq_length)]
                         if doc_stride is None else
                         window_segments(tokens_a, tokens_b, max_seq_length, doc_stride)):
            _, packed = input_layout.pack_tokens(segments, tokenizer.convert_tokens_to_ids,
                                                 max_seq_length)
            features.append(InputFeatures(*packed, label_id, index))
    return features


def _label_id(example, label_map, label_list):
    if isinstance(example.label, tuple):  # multi-label: the set of its labels
        return multi_label.multi_hot(example.label, label_list)
    if example.label is None:
        return 0.0 if label_list is None else 0
    if label_list is None:
        return float(example.label)
    if example.label not in label_map:
        check_label(example.label, label_list, example.source or example.guid)
    return label_map[example.label]


def feature_spec(max_seq_length: int, is_regression: bool,
                 num_multi_labels: int = 0) -> dict:
    """TFRecord feature spec of the cached features (names as the original); multi-label
    features (`num_multi_labels` > 0) hold `label_ids` as a multi-hot float [C]."""
    if num_multi_labels:
        return dict(feature_spec(max_seq_length, False), label_ids=tf.io.FixedLenFeature(
            [num_multi_labels], tf.float32))
    return {
        "input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "label_ids": tf.io.FixedLenFeature([], tf.float32 if is_regression else tf.int64),
        "is_real_example": tf.io.FixedLenFeature([], tf.int64),
    }


def write_features(features: Sequence[InputFeatures], path: str, is_regression: bool) -> None:
    """Writes features as tf.Examples to `path` (temporary name, then renamed)."""
    with fileio.atomic_output(path) as temporary, tf.io.TFRecordWriter(temporary) as writer:
        for feature in features:
            if isinstance(feature.label_id, list):  # multi-hot
                label = tf.train.Feature(float_list=tf.train.FloatList(value=feature.label_id))
            else:
                label = (tf.train.Feature(float_list=tf.train.FloatList(
                    value=[feature.label_id])) if is_regression
                         else records.int_feature([feature.label_id]))
            example = tf.train.Example(features=tf.train.Features(feature={
                "input_ids": records.int_feature(feature.input_ids),
                "input_mask": records.int_feature(feature.input_mask),
                "segment_ids": records.int_feature(feature.segment_ids),
                "label_ids": label,
                "is_real_example": records.int_feature([1]),
                "example_index": records.int_feature([feature.example_index]),
            }))
            writer.write(example.SerializeToString())


def feature_cache_key(examples, label_list, max_seq_length, tokenizer,
                      data_files: Sequence[str], extra_key: dict = None) -> dict:
    """What the features of `examples` depend on: the SHA-256 of the data files and of
    the vocabulary, lower-casing, max_seq_length, labels and the example count."""
    return {"data_files": [fileio.file_digest(p) for p in data_files],
            "vocab_file": tokenizer.vocab_sha256,
            "do_lower_case": tokenizer.do_lower_case, "max_seq_length": max_seq_length,
            "labels": label_list, "num_examples": len(examples), **(extra_key or {})}


def write_example_features(examples, label_list, max_seq_length, tokenizer, path,
                           doc_stride=None) -> int:
    """Converts and writes the features of `examples` (with `doc_stride`: of their
    windows, see `convert_examples_to_features`); returns their number."""
    features = convert_examples_to_features(examples, label_list, max_seq_length, tokenizer,
                                            doc_stride)
    write_features(features, path, is_regression=label_list is None)
    return len(features)


def record_lengths(record_path, max_seq_length, is_regression,
                   num_multi_labels=0) -> np.ndarray:
    """Real tokens [N] of each example of a cached record, in order."""
    dataset = records.tfrecord_dataset(
        record_path, feature_spec(max_seq_length, is_regression, num_multi_labels), 4096,
        is_training=False,
        compression="none", drop_remainder=False)
    return np.concatenate([tf.reduce_sum(batch["input_mask"], axis=1).numpy()
                           for batch in dataset])


def classifier_dataset(record_path, max_seq_length, batch_size, is_training, is_regression,
                       seed=None, input_context=None, drop_remainder=None,
                       shuffle_buffer_size=10000, trim_padding=False,
                       max_sequences_per_row=None, num_multi_labels=0):
    """Batches of feature dicts (int32 [B, S] inputs, `label_ids` [B]) from a cached record.

    Training batches are shuffled, repeated and full; evaluation reads once, in order.
    With `trim_padding` each batch is cut to its longest sequence (dynamic shapes: faster
    on CPU/GPU; keep it off for TPU and XLA). With `max_sequences_per_row` (training) a
    batch is `batch_size` rows that pack up to that many examples each (see
    `bert_tf.train.finetune_packing`): `label_ids`, `cls_positions` and
    `sequence_weights` are then [B, K]. Multi-label records (`num_multi_labels` C > 0)
    give `label_ids` float [B, C] (packed: [B, K, C]).
    """
    if max_sequences_per_row is not None:
        return _packed_dataset(record_path, max_seq_length, batch_size, is_regression,
                               seed, input_context, shuffle_buffer_size,
                               max_sequences_per_row, num_multi_labels)
    dataset = records.tfrecord_dataset(
        record_path, feature_spec(max_seq_length, is_regression, num_multi_labels),
        batch_size, is_training,
        input_context=input_context, compression="none", seed=seed,
        shuffle_buffer_size=shuffle_buffer_size,
        drop_remainder=is_training if drop_remainder is None else drop_remainder)
    return dataset.map(input_layout_graph.trim_to_longest) if trim_padding else dataset


def _packed_dataset(record_path, max_seq_length, batch_size, is_regression, seed,
                    input_context, shuffle_buffer_size, max_sequences_per_row,
                    num_multi_labels=0):
    """Training batches of `batch_size` (global) packed rows."""
    replicas = input_context.num_replicas_in_sync if input_context else 1
    windows = records.tfrecord_dataset(
        record_path, feature_spec(max_seq_length, is_regression, num_multi_labels),
        finetune_packing.PACKING_WINDOW * replicas, is_training=True,
        input_context=input_context, compression="none", seed=seed,
        shuffle_buffer_size=shuffle_buffer_size, drop_remainder=True)
    instance_features = {"label_ids": tf.float32 if is_regression else tf.int32}
    if num_multi_labels:  # packing moves one value per example: a feature per label
        windows = windows.map(lambda window: multi_label.split_label_columns(
            window, num_multi_labels))
        instance_features = {f"label_ids/{index}": tf.float32
                             for index in range(num_multi_labels)}
    rows = finetune_packing.packed_batches(
        windows, batch_size // replicas, max_seq_length, max_sequences_per_row,
        instance_features=instance_features, seed=seed)
    if num_multi_labels:
        rows = rows.map(lambda batch: multi_label.stack_label_columns(batch,
                                                                       num_multi_labels))
    return rows


def write_test_results(path: str, outputs: np.ndarray, is_regression: bool) -> None:
    """`test_results.tsv`: per example the class probabilities (or the score), tab-separated."""
    outputs = np.asarray(outputs)
    rows = ([f"{value:.6f}" for value in outputs.reshape(-1)] if is_regression else
            ["\t".join(f"{p:.6f}" for p in row) for row in outputs])
    fileio.write_text_atomic(path, "".join(row + "\n" for row in rows))


def write_predictions(path, examples, outputs, label_list) -> None:
    """`predictions.tsv`: a header, then per example its id and prediction: for labels
    `index prediction <label>...` (the predicted label, then each label's probability),
    for a score `index prediction`."""
    outputs = np.asarray(outputs)
    header = ["index", "prediction"] + (list(label_list) if label_list is not None else [])
    lines = ["\t".join(header) + "\n"]
    for example, output in zip(examples, outputs):
        index = example.guid.split("-", 1)[1]
        if label_list is None:
            row = [index, f"{float(np.reshape(output, -1)[0]):.6f}"]
        else:
            row = [index, label_list[int(np.argmax(output))]] + [f"{p:.6f}" for p in output]
        lines.append("\t".join(row) + "\n")
    fileio.write_text_atomic(path, "".join(lines))


def write_submission(path, examples, outputs, label_list) -> None:
    """A GLUE-submission-style file: `index<TAB>prediction` (class name or score)."""
    outputs = np.asarray(outputs)
    lines = ["index\tprediction\n"]
    for example, output in zip(examples, outputs):
        index = example.guid.split("-", 1)[1]
        if label_list is None:
            prediction = f"{float(np.reshape(output, -1)[0]):.3f}"
        else:
            prediction = label_list[int(np.argmax(output))]
        lines.append(f"{index}\t{prediction}\n")
    fileio.write_text_atomic(path, "".join(lines))
