"""Multiple-choice data: SWAG's CSV files and JSONL questions, their features and records.

Two file formats (by extension):

- `.csv`, SWAG's layout: columns `sent1`, `sent2`, `ending0` ... `ending<C-1>` and
  `label` (the index of the right ending; the test file has none); other columns
  (`video-id`, `fold-ind`, `startphrase`, `gold-source`) are ignored. Choice i is the
  pair (`sent1`, `sent2 + " " + ending<i>`), as Hugging Face's run_swag.py builds it.
- `.jsonl` (or `.json`, one object a line): `{"context": ..., "question": ...,
  "choices": [...], "label": <index>}`, `context` optional. Choice i is the pair
  (`context + " " + question`, `choices[i]`).

`choice_segments` lays a choice out as `[CLS] context question [SEP] choice [SEP]`, cut
longest-first to max_seq_length; what the first segment loses comes off the end of the
context, the question is kept whole while any context is left (the exported model does
the same in the graph: `bert_tf.tasks.multiple_choice.serving.encode_choices`).

Every row of a file has the same number of choices C (a row with another count names
file and line); a label outside 0 .. C-1 names file, line and value; a file without the
columns of its format names the columns expected. A file's rows are all labelled, or
(test files only) all unlabelled.
"""

import dataclasses
import os
import re
from typing import Optional

import numpy as np
import tensorflow as tf

from bert_tf.io import fileio
from bert_tf.runs import text_files
from bert_tf.tasks.classification import data as classification_data
from bert_tf.text import input_layout, input_layout_graph
from bert_tf.train import records

SWAG_COLUMNS = ("sent1", "sent2", "ending0", "ending1")  # and ending2, ..., label
JSONL_KEYS = ("question", "choices")  # and label; context optional
_ENDING = re.compile(r"ending(\d+)$")
FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids")


@dataclasses.dataclass(frozen=True)
class ChoiceExample:
    """One question and its choices.

    Attributes:
      guid: "<split>-<index>" (index: the example's place in its file, from 0).
      context: The start of the first segment (SWAG's `sent1`; may be "").
      question: The end of the first segment ("" for SWAG).
      choices: The second segment of each choice.
      label: The index of the right choice, or None (unlabelled test data).
      source: "file:line", for messages.
    """
    guid: str
    context: str
    question: str
    choices: tuple
    label: Optional[int]
    source: str


def read_examples(path: str, split: str, labelled: bool = True) -> list:
    """The examples of a SWAG CSV or a JSONL file (see the module docstring).

    Args:
      path: A `.csv`, `.jsonl` or `.json` file.
      split: "train", "eval" or "predict" (the guid prefix).
      labelled: Every row needs a label (train and eval files); otherwise labels are
        optional, but present on every row or on none.

    Raises:
      ValueError: naming file and line (and the columns, count or value at fault).
    """
    reader = _swag_rows if path.endswith(".csv") else _jsonl_rows
    examples, first = [], None
    for line_number, (context, question, choices, label) in reader(path):
        source = f"{path}:{line_number}"
        first = first or (source, len(choices), label is not None)
        if len(choices) != first[1]:
            raise ValueError(f"{source}: {len(choices)} choices, but {first[0]} has "
                             f"{first[1]}; every row of a file needs the same number of "
                             "choices")
        if label is None and (labelled or first[2]):
            raise ValueError(f"{source}: no label" + (
                f", but {first[0]} has one; label every row or none" if first[2] else
                "; the train and eval files need the index of the right choice on every "
                "row"))
        if label is not None and not first[2]:
            raise ValueError(f"{source}: a label, but {first[0]} has none; label every "
                             "row or none")
        examples.append(ChoiceExample(f"{split}-{len(examples)}", context, question,
                                      tuple(choices), label, source))
    return examples


def _swag_rows(path):
    """(line, (sent1, "", [sent2 + " " + ending_i], label or None)) of a SWAG CSV."""
    for line_number, record in text_files.read_records(path):
        endings = sorted((int(match.group(1)), name) for name in record
                         for match in [_ENDING.match(name)] if match)
        gaps = [f"ending{index}" for index in range(len(endings))
                if f"ending{index}" not in record]
        missing = [name for name in SWAG_COLUMNS if name not in record] + gaps[:1]
        if missing:
            raise ValueError(
                f"{path}: no column {', '.join(dict.fromkeys(missing))} (columns: "
                f"{', '.join(record)}); a SWAG CSV needs the columns sent1, sent2, "
                "ending0, ending1, ... (numbered from 0 without a gap) and label (the "
                "test file may leave it out)")
        texts = [record[name].strip() for _, name in endings]
        empty = [name for (_, name), text in zip(endings, texts) if not text]
        if empty:
            raise ValueError(f"{path}:{line_number}: {', '.join(empty)} empty; every "
                             "choice needs its text (a row with fewer choices than the "
                             "others has a different number of choices)")
        header = record["sent2"].strip()
        choices = [f"{header} {text}" if header else text for text in texts]
        yield line_number, (record["sent1"].strip(), "", choices,
                            _label(record.get("label"), len(choices), path, line_number))


def _jsonl_rows(path):
    """(line, (context, question, choices, label or None)) of a JSONL file."""
    for line_number, record in text_files.read_records(path):
        source = f"{path}:{line_number}"
        missing = [key for key in JSONL_KEYS if key not in record]
        if missing:
            raise ValueError(f"{source}: no {', '.join(missing)}; each line needs "
                             '"question", "choices" (a list of strings) and "label" (the '
                             'index of the right choice; not needed in the test file), '
                             f'"context" optional; found keys {sorted(record)}')
        context = "" if record.get("context") is None else record["context"]
        question = record["question"]
        choices = record["choices"]
        for key, value in (("context", context), ("question", question)):
            if not isinstance(value, str):
                raise ValueError(f"{source}: {key} holds {text_files.json_type(value)}; "
                                 "expected a string")
        if not isinstance(choices, list) or len(choices) < 2 or not all(
                isinstance(choice, str) and choice.strip() for choice in choices):
            raise ValueError(f"{source}: choices must be a list of at least two non-empty "
                             f"strings, got {_short(choices)}")
        label = record.get("label")
        if isinstance(label, str) and re.fullmatch(r"[0-9]+", label.strip()):
            label = int(label)  # ("²".isdigit() is true; int("²") fails without a line)
        if label is not None and (isinstance(label, bool) or not isinstance(label, int)):
            raise ValueError(f"{source}: label {_short(label)} is "
                             f"{text_files.json_type(label)}; expected the index of the "
                             "right choice (0, 1, ...)")
        yield line_number, (context.strip(), question.strip(), [c.strip() for c in choices],
                            _label(label, len(choices), path, line_number))


def _label(value, num_choices, path, line_number) -> Optional[int]:
    """A choice index in 0 .. num_choices - 1, or None for a missing / empty label."""
    if value is None or isinstance(value, str) and not value.strip():
        return None
    text = str(value).strip()
    if not re.fullmatch(r"-?\d+", text):
        raise ValueError(f"{path}:{line_number}: label {text!r} is not a choice index; "
                         f"expected 0 .. {num_choices - 1}")
    label = int(text)
    if not 0 <= label < num_choices:
        raise ValueError(f"{path}:{line_number}: label {label} is out of range: the row "
                         f"has {num_choices} choices, so the label must be 0 .. "
                         f"{num_choices - 1}")
    return label


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def choice_segments(context_ids, question_ids, choice_ids, max_seq_length) -> list:
    """[first segment, choice] of one choice, cut to fit `max_seq_length`.

    The pair (context + question, choice) is cut longest-first (`input_layout`); the
    first segment keeps the question whole (while it fits) and the start of the context.
    """
    first, choice = input_layout.truncate_segments(list(context_ids) + list(question_ids),
                                                   choice_ids, max_seq_length)
    keep_question = min(len(question_ids), len(first))
    return [list(context_ids[:len(first) - keep_question]) +
            list(question_ids[:keep_question]), choice]


def convert_examples(examples, max_seq_length, tokenizer) -> dict:
    """Model inputs of `examples`: int32 `input_ids`, `input_mask`, `segment_ids`
    [N, C, max_seq_length] and `label_ids` [N] (0 for unlabelled examples)."""
    if not examples:
        raise ValueError("no examples to convert")
    texts = [text for example in examples
             for text in (example.context, example.question, *example.choices)]
    ids = iter(tokenizer.convert_texts_to_ids(texts))
    cls_id, sep_id = tokenizer.vocab[input_layout.CLS], tokenizer.vocab[input_layout.SEP]
    shape = (len(examples), len(examples[0].choices), max_seq_length)
    arrays = {name: np.zeros(shape, np.int32) for name in FEATURE_NAMES}
    for index, example in enumerate(examples):
        context_ids, question_ids = next(ids), next(ids)
        for choice in range(len(example.choices)):
            segments = choice_segments(context_ids, question_ids, next(ids), max_seq_length)
            packed = input_layout.pack_segments(segments, cls_id, sep_id, max_seq_length)
            for name, values in zip(FEATURE_NAMES, packed):
                arrays[name][index, choice] = values
    arrays["label_ids"] = np.array([example.label or 0 for example in examples], np.int32)
    return arrays


def feature_spec(num_choices: int, max_seq_length: int) -> dict:
    """TFRecord features of the cached examples: each input C * S values, the label."""
    spec = {name: tf.io.FixedLenFeature([num_choices, max_seq_length], tf.int64)
            for name in FEATURE_NAMES}
    spec["label_ids"] = tf.io.FixedLenFeature([], tf.int64)
    return spec


def write_features(examples, max_seq_length, tokenizer, path) -> int:
    """Converts `examples` and writes them as tf.Examples (temporary name, renamed);
    returns their number."""
    arrays = convert_examples(examples, max_seq_length, tokenizer)
    with fileio.atomic_output(path) as temporary, tf.io.TFRecordWriter(temporary) as writer:
        for index in range(len(examples)):
            feature = {name: records.int_feature(arrays[name][index].reshape(-1))
                       for name in FEATURE_NAMES}
            feature["label_ids"] = records.int_feature([arrays["label_ids"][index]])
            writer.write(tf.train.Example(features=tf.train.Features(
                feature=feature)).SerializeToString())
    return len(examples)


def feature_cache_key(examples, max_seq_length, tokenizer, path) -> dict:
    """What the cached features of `examples` (read from `path`) depend on."""
    return classification_data.feature_cache_key(
        examples, None, max_seq_length, tokenizer, [path],
        {"task": "multiple_choice", "num_choices": len(examples[0].choices),
         "layout": "context question | choice"})


def choices_dataset(record_path, num_choices, max_seq_length, batch_size, is_training,
                    seed=None, input_context=None, trim_padding=False):
    """Batches of int32 inputs [B, C, S] and `label_ids` [B] from a cached record.

    Training batches are shuffled, repeated and full; evaluation reads once, in order.
    With `trim_padding` each batch is cut to its longest row (not for TPU / XLA).
    """
    dataset = records.tfrecord_dataset(
        record_path, feature_spec(num_choices, max_seq_length), batch_size, is_training,
        input_context=input_context, compression="none", seed=seed,
        shuffle_buffer_size=10000, drop_remainder=is_training)
    return dataset.map(input_layout_graph.trim_to_longest) if trim_padding else dataset


def find_data_file(data_dir: Optional[str], split: str, names) -> str:
    """The first of `names` that exists in `data_dir`.

    Raises:
      FileNotFoundError: listing the paths tried, and the flag that names a file.
    """
    if not data_dir:
        raise ValueError(f"set {split}_file or data_dir for do_{split}")
    candidates = [os.path.join(data_dir, name) for name in names]
    for path in candidates:
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(f"no {split} file: expected one of {', '.join(candidates)} "
                            f"(or pass {split}_file)")
