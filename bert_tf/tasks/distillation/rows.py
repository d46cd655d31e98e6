"""The teacher task's training rows and a transfer set's rows, as fixed-length
`tf.train.Example`s that the teacher's cached outputs join (`data.write_distill_record`).

    rows = TEACHER_ROWS["ner"]
    key = rows.train_key(task)                  # what the training rows depend on
    texts = rows.read_transfer(task, "texts.txt")
    examples = rows.train_rows(task) + rows.transfer_rows(task, texts)

A teacher task not here (SQuAD: windows of a question and a context) runs the teacher on
every batch and takes no transfer set.
"""

import os

import numpy as np
import tensorflow as tf

from bert_tf.io import fileio
from bert_tf.runs.text_files import InputExample
from bert_tf.tasks.classification import data as classification_data
from bert_tf.tasks.distillation import data as distill_data
from bert_tf.tasks.ner import data as ner_data
from bert_tf.tasks.ner import task as ner_task


def _train_record(task) -> str:
    return os.path.join(task.options.output_dir, "train.tf_record")


class ClassificationRows:
    """A classifier's rows: its cached `train.tf_record`; transfer texts as its features
    with a placeholder label (never trained on)."""
    token_features = ()

    @staticmethod
    def train_key(task) -> dict:
        task.train_data()  # writes train.tf_record, or finds it current
        return fileio.read_json(_train_record(task) + ".json", "train features key")

    @staticmethod
    def train_rows(task) -> list:
        return distill_data.feature_rows(_train_record(task))

    @staticmethod
    def read_transfer(task, path: str) -> list:
        # No label: id 0 (or an empty label set), which the soft loss never reads.
        label = () if task.multi_label else None
        return [InputExample(f"transfer-{index}", text_a, text_b, label,
                             source=f"{path}:{number}")
                for index, (number, text_a, text_b) in enumerate(
                    distill_data.read_transfer_lines(path, bool(task.text_pair)))]

    @staticmethod
    def transfer_rows(task, examples) -> list:
        record = os.path.join(task.options.output_dir, distill_data.TRANSFER_RECORD_NAME)
        classification_data.write_example_features(
            examples, task.labels, task.options.max_seq_length, task.context.tokenizer,
            record)
        return distill_data.feature_rows(record, labelled=False)


class NerRows:
    """A tagger's rows: its training windows; transfer lines as sentences of words
    (split at whitespace, as the training file's words are), each word's first piece
    scored (soft loss only)."""
    token_features = ner_task.TOKEN_FEATURES

    @staticmethod
    def train_key(task) -> dict:
        options, tokenizer = task.options, task.context.tokenizer
        return {"train_file": fileio.file_digest(ner_task.data_file(options, "train")),
                "vocab_file": tokenizer.vocab_sha256,
                "do_lower_case": tokenizer.do_lower_case, "labels": task.labels,
                "max_seq_length": options.max_seq_length, "doc_stride": options.doc_stride,
                "columns": [options.word_column, options.tag_column]}

    @staticmethod
    def train_rows(task) -> list:
        return _ner_rows(task, task.train_sentences, "training", labelled=True)

    @staticmethod
    def read_transfer(task, path: str) -> list:
        sentences = []
        for number, text, _ in distill_data.read_transfer_lines(path, pairs=False):
            words = text.split()
            sentences.append(ner_data.Sentence(words, None, path, [number] * len(words)))
        return sentences

    @staticmethod
    def transfer_rows(task, sentences) -> list:
        return _ner_rows(task, sentences, "transfer", labelled=False)


def _ner_rows(task, sentences, phase: str, labelled: bool) -> list:
    """The windows of `sentences` as rows; unlabelled ones weigh each scored word."""
    options = task.options
    features = ner_data.convert_sentences_to_features(
        sentences, task.labels, options.max_seq_length, task.context.tokenizer,
        options.doc_stride, phase=f"Building {phase} features")
    arrays = dict(features.model_inputs(), label_ids=features.label_ids,
                  label_weights=features.label_weights)
    if not labelled:  # no tags: the positions a gold tag would be scored at
        arrays["label_weights"] = (features.word_ids >= 0).astype(np.int32)
    return distill_data.int_rows(arrays, labelled)


# The teacher tasks (config.json "command") whose rows a cached teacher and a transfer
# set join.
TEACHER_ROWS = {"classification": ClassificationRows, "ner": NerRows}
