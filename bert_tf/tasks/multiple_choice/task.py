"""Fine-tune, evaluate and predict multiple choice (SWAG): what run_multiple_choice runs.

    results = multiple_choice_task.run(MultipleChoiceOptions(
        data_dir="swag", init_checkpoint="uncased_L-12_H-768_A-12", output_dir="out",
        do_train=True, do_eval=True, do_predict=True))

Files: `train_file` / `eval_file` / `predict_file`, or found in `data_dir` under SWAG's
names (`train.csv`, `val.csv`, `test.csv`) or `train`, `dev` / `val`, `test` `.jsonl`
(formats: `bert_tf.tasks.multiple_choice.data`). Every choice is its own row through
the encoder; one score per choice (pooled output, dropout, dense to 1), softmax
cross-entropy over the choices of an example.

Writes to output_dir: cached features (`train.tf_record`, `eval.tf_record`,
`predict.tf_record`, reused while data, vocabulary and settings are unchanged),
checkpoints (a rerun resumes), `eval_results.txt` / `.json` (`eval_accuracy`,
`eval_loss`, `eval_examples`), `eval_predictions.tsv` and `test_predictions.tsv`
(`index`, `prediction`, `label` when known, `probability_0` ... per example) and, when
the predict file has labels, `test_results.txt` / `.json`.
"""

import os

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf.io import fileio
from bert_tf.models import BertEncoder
from bert_tf.runs import driver
from bert_tf.tasks.classification.metrics import accuracy
from bert_tf.tasks.classification.task import softmax
from bert_tf.tasks.multiple_choice import data as choice_data
from bert_tf.tasks.multiple_choice import serving  # noqa: F401  (registers the model type)
from bert_tf.tasks.multiple_choice.model import BertMultipleChoice
from bert_tf.tasks.multiple_choice.options import MultipleChoiceOptions
from bert_tf.runs.task import Task, TrainData, cached_features

SPLITS = ("train", "eval", "predict")
DEFAULT_FILES = {"train": ("train.csv", "train.jsonl"),
                 "eval": ("val.csv", "dev.csv", "val.jsonl", "dev.jsonl"),
                 "predict": ("test.csv", "test.jsonl")}

def data_file(options: MultipleChoiceOptions, split: str) -> str:
    """The file of `split` ("train", "eval", "predict"): the flag, else found in data_dir.

    Raises:
      FileNotFoundError / ValueError: naming the path or the flags expected.
    """
    explicit = getattr(options, f"{split}_file")
    if explicit:
        if not os.path.isfile(explicit):
            raise FileNotFoundError(f"{split}_file not found: {explicit}")
        return explicit
    return choice_data.find_data_file(options.data_dir, split, DEFAULT_FILES[split])


def choice_loss(features, outputs):
    """Mean softmax cross-entropy of the right choice over the batch's examples."""
    logits = tf.cast(outputs["logits"], tf.float32)  # [B, C]
    return tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(
        features["label_ids"], logits, from_logits=True))


def write_predictions(path, examples, probabilities) -> None:
    """`index prediction [label] probability_0 ...` tab-separated, one line an example."""
    labelled = examples[0].label is not None
    header = ["index", "prediction"] + (["label"] if labelled else []) + [
        f"probability_{choice}" for choice in range(probabilities.shape[1])]
    lines = ["\t".join(header) + "\n"]
    for example, row in zip(examples, probabilities):
        fields = [example.guid.split("-", 1)[1], str(int(np.argmax(row)))]
        fields += [str(example.label)] if labelled else []
        lines.append("\t".join(fields + [f"{p:.6f}" for p in row]) + "\n")
    fileio.write_text_atomic(path, "".join(lines))


class MultipleChoiceTask(Task):
    """Multiple choice: SWAG's CSV files or questions with choices in JSONL."""
    name = "multiple_choice"
    command = "multiple_choice"
    model_type = "multiple_choice"

    def __init__(self, options: MultipleChoiceOptions):
        super().__init__(options)
        self.data = {}  # split -> (path, examples)

    def check_inputs(self):
        """Refuses a missing data file, before any work."""
        for split in SPLITS:
            if getattr(self.options, f"do_{split}"):
                data_file(self.options, split)

    def setup(self, context):
        """Reads and checks every file the run will use before any work: columns, choice
        counts, labels; an empty file is refused."""
        super().setup(context)
        for split in SPLITS:
            if getattr(self.options, f"do_{split}"):
                path = data_file(self.options, split)
                examples = choice_data.read_examples(path, split, split != "predict")
                if not examples:
                    raise ValueError(f"{path}: no examples (the file is empty or holds "
                                     f"only a header); the {split} file needs at least one")
                logging.info("%s: %d examples of %d choices from %s", split, len(examples),
                             len(examples[0].choices), path)
                self.data[split] = (path, examples)

    def build_model(self):
        encoder = BertEncoder(self.context.config)
        return BertMultipleChoice(encoder, dropout_rate=self.options.dropout_rate,
                                  head_initializer=self.options.head_initializer)

    def loss(self, features, outputs):
        return choice_loss(features, outputs)

    def _dataset_fn(self, split, batch_size, is_training):
        """Batches of `split`'s cached features (written on first use)."""
        options = self.options
        path, examples = self.data[split]
        record = os.path.join(options.output_dir, f"{split}.tf_record")
        tokenizer = self.context.tokenizer
        _, reused = cached_features(
            record, choice_data.feature_cache_key(examples, options.max_seq_length,
                                                  tokenizer, path),
            lambda target: choice_data.write_features(examples, options.max_seq_length,
                                                      tokenizer, target))
        logging.info("%s: features %s %s", split, "reused from" if reused else "written to",
                     record)
        num_choices = len(examples[0].choices)

        def dataset_fn(input_context):
            return choice_data.choices_dataset(
                record, num_choices, options.max_seq_length, batch_size, is_training,
                seed=options.seed, input_context=input_context,
                trim_padding=options.use_trim_padding)
        return dataset_fn

    def train_data(self):
        options = self.options
        return TrainData(self._dataset_fn("train", options.train_batch_size, True),
                         len(self.data["train"][1]), options.train_batch_size)

    def metric_names(self):
        """What `evaluate("eval", ...)` scores (what `best_metric` may name)."""
        return [f"{self.result_names['eval']}_{name}" for name in ("accuracy", "loss")]

    def evaluate(self, split, runner):
        """Predicts `split`; writes `<name>_predictions.tsv`; scores it when labelled."""
        _, examples = self.data[split]
        batch_size = (self.options.eval_batch_size if split == "eval"
                      else self.options.predict_batch_size)
        logits = runner.predict(self._dataset_fn(split, batch_size, False),
                                num_examples=len(examples))["logits"].astype(np.float64)
        probabilities = softmax(logits)  # [N, C]
        name = self.result_names[split]
        path = os.path.join(self.options.output_dir, f"{name}_predictions.tsv")
        write_predictions(path, examples, probabilities)
        logging.info("Wrote %s (%d examples)", path, len(examples))
        if examples[0].label is None:
            return {}
        labels = np.array([example.label for example in examples])
        chosen = np.clip(probabilities[np.arange(len(labels)), labels], 1e-30, None)
        return {f"{name}_accuracy": accuracy(np.argmax(logits, axis=-1), labels),
                f"{name}_loss": float(-np.mean(np.log(chosen))),
                f"{name}_examples": len(examples)}


def run(options: MultipleChoiceOptions, strategy=None) -> dict:
    """Runs do_train / do_eval / do_predict (and the export); returns the scores."""
    return driver.run(MultipleChoiceTask(options), strategy)
