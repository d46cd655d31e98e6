"""A whole task in one file: does a sentence mention a number? (docs/writing_a_task.md)

    python has_number_task.py --task=has_number --input_file=corpus.txt \
      --init_checkpoint=uncased_L-12_H-768_A-12 --output_dir=/tmp/has_number \
      --do_train --do_eval --num_train_epochs=1

Each line of `--input_file` is an example, labelled "yes" when it holds a digit (the
digits are then masked out of the text, so the model must learn it from the words:
"in the year", "founded in"); every fifth line is dev data. The model, its loss, the
features and the SavedModel are the classifier's; this file adds the data and the
metric, registers the task, and runs the generic command.
"""

import dataclasses
import os
import re

import numpy as np

from bert_tf.cli import train
from bert_tf.models import BertClassifier, BertEncoder
from bert_tf.options import OptionGroup, compose, option
from bert_tf.runs import registry
from bert_tf.tasks.classification import data as classification_data
from bert_tf.tasks.classification.task import classifier_loss_fn
from bert_tf.runs.options import FinetuneOptions
from bert_tf.runs.task import Task, TrainData, cached_features
from bert_tf.runs.text_files import InputExample

LABELS = ["no", "yes"]


@dataclasses.dataclass(kw_only=True)
class SentenceFile(OptionGroup):
    """The task's own option: one file of sentences."""
    input_file: str = option("", "Text file, one sentence a line.")

    def check(self) -> None:
        if not os.path.isfile(self.input_file):
            raise ValueError(f"--input_file={self.input_file!r}: no such file; expected a "
                             "text file of one sentence a line")


HasNumberOptions = compose("HasNumberOptions", FinetuneOptions, SentenceFile,
                           doc="The fine-tuning options plus the sentence file.")


def read_examples(path, split):
    """(text with its digits masked, "yes"/"no") of every fifth line (dev) or the rest."""
    with open(path, encoding="utf-8") as file:
        lines = [line.strip() for line in file if line.strip()]
    keep = (lambda index: index % 5 == 4) if split == "dev" else (lambda i: i % 5 != 4)
    return [InputExample(f"{split}-{index}", re.sub(r"\d+", "#", line), None,
                         LABELS[bool(re.search(r"\d", line))])
            for index, line in enumerate(lines) if keep(index)]


class HasNumberTask(Task):
    """Sentence classification on one file; scored by accuracy."""
    name = command = "has_number"
    model_type = "classifier"  # a registered model type: checkpoints and exports know it
    labels = LABELS

    def _dataset_fn(self, split, batch_size, is_training):
        options = self.options
        examples = read_examples(options.input_file, split)
        path = os.path.join(options.output_dir, f"{split}.tf_record")
        count, _ = cached_features(path, {"split": split, "file": options.input_file,
                                          "max_seq_length": options.max_seq_length},
                                   lambda target: classification_data.write_example_features(
                                       examples, LABELS, options.max_seq_length,
                                       self.context.tokenizer, target))
        return count, lambda context: classification_data.classifier_dataset(
            path, options.max_seq_length, batch_size, is_training, False,
            seed=options.seed, input_context=context)

    def build_model(self):
        return BertClassifier(BertEncoder(self.context.config), len(LABELS),
                              dropout_rate=self.options.dropout_rate)

    def loss(self, features, outputs):
        return classifier_loss_fn(is_regression=False)(features, outputs)

    def train_data(self):
        count, dataset_fn = self._dataset_fn("train", self.options.train_batch_size, True)
        return TrainData(dataset_fn, count, self.options.train_batch_size)

    def evaluate(self, split, runner):
        _, dataset_fn = self._dataset_fn("dev", self.options.eval_batch_size, False)
        outputs = runner.predict(dataset_fn, "logits", ("label_ids",))
        predicted = np.argmax(outputs["logits"], axis=-1)
        return {"eval_accuracy": float(np.mean(predicted == outputs["label_ids"]))}

    def metric_names(self):
        return ["eval_accuracy"]

    def export_options(self):  # what the SavedModel's serving_default takes and names
        return {"label_names": LABELS, "is_regression": False, "text_pair": False}


registry.register(registry.TaskEntry(
    "has_number", HasNumberOptions, HasNumberTask, ("input_file", "output_dir"),
    "does a sentence mention a number? (docs/examples/has_number_task.py)"))

if __name__ == "__main__":
    train.run_main()
