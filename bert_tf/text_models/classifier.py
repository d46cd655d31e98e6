"""`TextClassifier`: a sentence(-pair) classifier or regressor that takes text.

    model = TextClassifier.from_pretrained("uncased_L-12_H-768_A-12", labels=["0", "1"])
    model.fit((texts_a, texts_b), labels, epochs=3)      # Keras's progress bar
    model.predict((["A cat sat."], ["A cat was sitting."]))
    # {"labels": ["1"], "probabilities": array([[0.08, 0.92]], dtype=float32)}
    model.save("mrpc_run")          # bert-export-model --init_checkpoint=mrpc_run
    TextClassifier.from_pretrained("mrpc_run")   # or any bert-run-classifier output_dir

The recipe is `bert-run-classifier`'s (its option defaults: bias-corrected AdamW at 5e-5,
10% linear warm-up then linear decay, weight decay 0.01, batches of 32, 3 epochs, head
dropout 0.1), each batch cut to its longest row.
"""

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf.models import BertClassifier
from bert_tf.runs import run_config
from bert_tf.text.preprocessor import Preprocessor
from bert_tf.text_models import inputs, run_folder
from bert_tf.text_models.training import TextModel, given

MODEL_TYPE = "classifier"


@keras.saving.register_keras_serializable(package="bert_tf")
class TextClassifier(TextModel):
    """A `BertClassifier` and its `Preprocessor`; `call` takes their token dicts and
    gives the logits [B, C] (C == 1: a regression score).

    Args:
      classifier: A `bert_tf.models.BertClassifier`.
      preprocessor: A `bert_tf.text.preprocessor.Preprocessor`.
      labels: Class names in id order (None for a regressor).
      trained_from: What the head was trained on, a run folder; None: a new head, which
        `predict` and `evaluate` refuse until `fit` trains it.
    """

    model_type = MODEL_TYPE
    task_model_argument = "classifier"

    def __init__(self, classifier, preprocessor, labels=None, trained_from=None, **kwargs):
        kwargs.setdefault("name", "text_classifier")
        super().__init__(classifier, preprocessor, trained_from=trained_from, **kwargs)
        self.labels = None if labels is None else [str(label) for label in labels]
        expected = 1 if self.labels is None else len(self.labels)
        if classifier.num_classes != expected:
            raise ValueError(f"labels {self.labels} name {expected} classes but the "
                             f"classifier has {classifier.num_classes}")

    @property
    def is_regression(self):
        return self.labels is None

    def call(self, inputs, training=None):
        return self.task_model(inputs, training=training)["logits"]  # [B, C]

    def get_config(self):
        config = super().get_config()
        config.update(labels=self.labels)
        return config

    # ------------------------------------------------------------------ loading
    @classmethod
    def from_pretrained(cls, path, labels=None, num_classes=None, regression=False,
                        max_seq_length=None, text_pair=None, dropout_rate=0.1, seed=None):
        """A classifier from a released BERT (a new head) or a fine-tuned run (its head).

        Args:
          path: A google-research, Hugging Face or sentence-transformers folder, a
            bert_tf run folder (a command's output_dir or a saved model), or a checkpoint.
          labels: The class names in id order (a new head; a run has its own).
          num_classes: Instead of `labels`: classes named "0", "1", ...
          regression: One score per text (mean squared error), as STS-B.
          max_seq_length: Longest row (default: the folder's, else 128).
          text_pair: Whether texts come in pairs (default: the run's; else set by the
            first `fit`).
          dropout_rate: Dropout on the pooled output (a new head).
          seed: Seeds the new head, dropout and shuffling (`keras.utils.set_random_seed`).
        """
        saved = run_config.read(path)
        trained = saved.get("model_type") == MODEL_TYPE
        if trained:
            labels = _trained_labels(saved, path, labels, num_classes, regression)
            regression = labels is None
            text_pair = (saved.get("export") or {}).get("text_pair", text_pair)
        else:
            labels = _new_labels(labels, num_classes, regression)
        preprocessor = Preprocessor.from_pretrained(
            path, **given(max_seq_length=max_seq_length, text_pair=text_pair))
        head = {"num_classes": 1 if regression else len(labels), "dropout_rate": dropout_rate}
        model = cls.build_task_model(BertClassifier, path, saved if trained else None,
                                     seed, head)
        return cls(model, preprocessor, labels=labels,
                   trained_from=saved.get("path") if trained else None)

    # ------------------------------------------------------------------ data
    def targets(self, y, num_texts):
        if self.is_regression:
            return inputs.scores(y, num_texts)
        return inputs.label_ids(y, self.labels, num_texts)

    def default_loss_and_metrics(self):
        if self.is_regression:
            return keras.losses.MeanSquaredError(), []
        return (keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                [keras.metrics.SparseCategoricalAccuracy(name="accuracy")])

    def outputs_of(self, logits):
        """`predict`'s answer for raw text: labels and probabilities, or scores."""
        logits = np.asarray(logits, np.float32)
        if self.is_regression:
            return {"scores": logits[:, 0]}
        probabilities = tf.nn.softmax(logits).numpy()
        return {"labels": [self.labels[i] for i in probabilities.argmax(axis=-1)],
                "probabilities": probabilities}

    def run_description(self):
        """config.json's task, labels and serving settings (as bert-run-classifier's)."""
        return {"task": "classification/python", "labels": self.labels,
                "export": {"label_names": self.labels, "is_regression": self.is_regression,
                           "text_pair": bool(self.preprocessor.text_pair)}}


def _new_labels(labels, num_classes, regression):
    """The class names of a new head (None: regression)."""
    if regression:
        if labels is not None or num_classes not in (None, 1):
            raise ValueError("regression=True gives one score per text: leave labels and "
                             "num_classes out")
        return None
    if labels is not None:
        labels = [str(label) for label in labels]
        if len(labels) < 2 or len(set(labels)) != len(labels):
            raise ValueError(f"labels={labels}: expected two or more distinct class names")
        if num_classes is not None and num_classes != len(labels):
            raise ValueError(f"num_classes={num_classes} but labels names {len(labels)}")
        return labels
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
        raise ValueError("a new classifier head needs its classes: pass labels=[...] (the "
                         "class names) or num_classes=N (N >= 2), or regression=True; got "
                         f"num_classes={num_classes!r}")
    return [str(i) for i in range(num_classes)]


def _trained_labels(saved, path, labels, num_classes, regression):
    """A fine-tuned run's labels; asking for other ones is refused."""
    trained = saved.get("labels") or None
    if regression and trained is not None or labels is not None and labels != trained \
            or num_classes is not None and num_classes != len(trained or [0]):
        raise ValueError(f"{path} is a classifier run with labels {trained}: load it "
                         "without labels/num_classes/regression (or train a new head from "
                         "its encoder with a released checkpoint)")
    if trained is None:
        logging.info("%s: a regression run", path)
    return trained
