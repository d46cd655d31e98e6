"""Fine-tune, evaluate and predict a sentence(-pair) classifier: what run_classifier runs.

    results = classification_task.run(ClassifierOptions(
        task_name="mrpc", data_dir="glue/MRPC", init_checkpoint="uncased_L-12_H-768_A-12",
        output_dir="out", do_train=True, do_eval=True))

Writes to output_dir: `label_list.txt`, cached features (`train.tf_record`, ...),
training checkpoints (a rerun resumes), `eval_results.txt` / `.json`,
`test_results.tsv` (class probabilities or the score per example) and the
GLUE-submission file (e.g. `MRPC.tsv`). With `multi_label` (your own files): sigmoid
outputs and binary cross-entropy, eval_results with micro / macro F1, subset accuracy
and each label's precision / recall / F1, `predictions.tsv` with each example's predicted
label set and label probabilities (see `bert_tf.tasks.classification.multi_label`).
`class_weights` weighs the loss (`bert_tf.runs.class_weights`).
"""

import collections
import functools
import os

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf.models import BertClassifier, BertEncoder
from bert_tf.runs import class_weights as weights_lib
from bert_tf.runs import driver, run_config, run_context
from bert_tf.tasks.classification import data as classification_data
from bert_tf.tasks.classification import long_documents
from bert_tf.tasks.classification import metrics, multi_label, user_processors
# ClassifierOptions is also imported from here by docs/experiment_configs.md ("From Python").
from bert_tf.tasks.classification.options import ClassifierOptions
from bert_tf.runs.task import Task, TrainData, cached_features, plan_packing
from bert_tf.train import finetune_packing


# Every predicted split's table: a header, each example's id and prediction.
PREDICTIONS_FILE = "predictions.tsv"

def make_processor(options: ClassifierOptions):
    """The task's processor; a generic task without labels that does not train uses
    those of its trained run: output_dir's, else init_checkpoint's (a run's folder or
    checkpoint). `processor_module` is imported first: its task names are found too."""
    name = options.task_name.strip().lower()
    if options.multi_label and name not in ("generic", "csv", "tsv", "jsonl"):
        raise ValueError(f"multi_label needs task_name=generic (your own files); task "
                         f"{options.task_name!r} has one label per example")
    processor = user_processors.find(options)  # your own, in the original's style
    if processor is not None:
        return processor
    if name in ("generic", "csv", "tsv", "jsonl"):
        labels, origin = options.labels, None
        if not labels and not options.is_regression and not options.do_train:
            labels, origin = _trained_labels(options)
        columns = dict(text_column=options.text_column, labels=labels,
                       text_pair_column=options.text_pair_column,
                       label_column=options.label_column, id_column=options.id_column,
                       is_regression=options.is_regression, labels_origin=origin)
        if options.multi_label:
            return multi_label.MultiLabelProcessor(options.label_separator, **columns)
        return classification_data.get_processor(name, **columns)
    if name == "xnli":
        return classification_data.get_processor(name, language=options.xnli_language)
    return classification_data.get_processor(name)


def _trained_labels(options):
    """(labels, where from) of the run a predict- or eval-only run uses; (None, None)."""
    if os.path.isfile(os.path.join(options.output_dir, run_context.LABEL_LIST_FILE)):
        return (run_context.read_label_list(options.output_dir),
                f"the labels of the trained run in {options.output_dir}")
    saved = run_config.read(options.init_checkpoint)
    if saved.get("labels"):
        return saved["labels"], f"the labels of the run in {saved['path']}"
    return None, None


def classifier_loss_fn(is_regression, class_weights=None):
    """Mean loss over the batch's examples (packed rows: over their real examples);
    with `class_weights` [C], sum(w_i * ce_i) / sum(w_i) (`class_weights` module)."""
    def loss_fn(features, outputs):
        logits = tf.cast(outputs["logits"], tf.float32)  # [B, C] or packed [B, K, C]
        if class_weights is not None:
            real = (features["sequence_weights"] if finetune_packing.is_packed(features)
                    else tf.ones_like(features["label_ids"], tf.float32))
            return weights_lib.weighted_cross_entropy(features["label_ids"], logits,
                                                      class_weights, real)
        if is_regression:  # score vs float label
            labels = tf.cast(features["label_ids"], tf.float32)
            per_example = tf.square(logits[..., 0] - labels)
        else:
            per_example = keras.losses.sparse_categorical_crossentropy(
                features["label_ids"], logits, from_logits=True)
        if finetune_packing.is_packed(features):
            return finetune_packing.weighted_mean(per_example, features["sequence_weights"])
        return tf.reduce_mean(per_example)
    return loss_fn


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=-1, keepdims=True)


def _has_pairs(processor) -> bool:
    """True when the task's examples are sentence pairs."""
    if isinstance(processor, classification_data.GlueProcessor) and processor.task.layouts:
        return processor.task.layouts["train"].text_b is not None
    return getattr(processor, "text_pair_column", True) is not None


class ClassificationTask(Task):
    """Sentence(-pair) classification or regression: GLUE, XNLI or your own files."""
    command = "classification"
    model_type = "classifier"

    def __init__(self, options: ClassifierOptions):
        super().__init__(options)
        self.processor = make_processor(options)
        self.name = f"classification/{self.processor.name}"
        self.text_pair = _has_pairs(self.processor)
        self.label_list, self.examples = None, {}
        self.window_counts = {}  # split -> windows [N] of each example (long documents)
        self.multi_label = options.multi_label
        self.class_weights = None  # [C] of the training loss (multi-label: pos_weight)

    @property
    def labels(self):
        return self.label_list

    @property
    def is_regression(self) -> bool:
        return self.label_list is None

    def check_inputs(self):
        """A missing data file, windows or class_weights the task's examples cannot take
        stop the run before any work (the options' own values: `options.check()`)."""
        options = self.options
        long_documents.check_options(options, _has_pairs(self.processor))
        if weights_lib.parse_class_weights(options.class_weights) is not None and \
                self.processor.is_regression:
            raise ValueError("class_weights needs classes; a regression task has none")
        for flag, split in (("do_train", "train"), ("do_eval", "dev"), ("do_predict", "test")):
            if getattr(self.options, flag):
                for path in self.processor.data_files(self.options.data_dir, split):
                    classification_data.text_files.require_file(path, split,
                                                                self.processor.name)

    def setup(self, context):
        """Reads and checks every file the run will use before any work: labels, types,
        empty files, dev labels outside the train labels, repeated test ids."""
        super().setup(context)
        options = self.options
        self.label_list = self.processor.get_labels(options.data_dir)
        self.examples = {split: self._read_examples(split)
                         for flag, split in (("do_train", "train"), ("do_eval", "dev"),
                                             ("do_predict", "test"))
                         if getattr(options, flag)}
        self.class_weights = self._class_weights()
        if options.do_train and self.label_list is not None:
            run_context.write_label_list(options.output_dir, self.label_list)

    def _class_weights(self):
        """The weights of the training loss (None: unweighted; see `class_weights`)."""
        labels = self.label_list

        def count():  # the train examples of each label, and their number
            examples = self.examples["train"]
            if self.multi_label:
                counts = np.sum([multi_label.multi_hot(e.label, labels) for e in examples], 0)
            else:
                found = collections.Counter(example.label for example in examples)
                counts = [found[label] for label in labels]
            return counts, len(examples)
        options = self.options
        origin = (f"the train file {self.processor.data_files(options.data_dir, 'train')[0]}"
                  if options.do_train else "")
        return weights_lib.training_weights(options.class_weights, labels, options.do_train,
                                            count, origin, pos_weight=self.multi_label)

    @property
    def _weight_key(self) -> str:
        """How results name the weights: a label's class weight, or its pos_weight."""
        return "pos_weight" if self.multi_label else "class_weight"

    def _read_examples(self, split):
        """The examples of `split`; none at all, or a repeated test id, is refused."""
        examples = self.processor.get_examples(self.options.data_dir, split)
        if not examples:
            raise ValueError(
                f"{self.processor.data_files(self.options.data_dir, split)[0]}: no examples "
                f"(the file is empty or holds only a header); the {split} file needs at "
                "least one row")
        if split == "test":
            classification_data.text_files.check_unique_ids(examples)
        return examples

    def build_model(self):
        encoder = BertEncoder(self.context.config)
        return BertClassifier(encoder, 1 if self.is_regression else len(self.label_list),
                              dropout_rate=self.options.dropout_rate,
                              head_initializer=self.options.head_initializer)

    def loss(self, features, outputs):
        if self.multi_label:
            return multi_label.loss_fn(self.class_weights)(features, outputs)
        return classifier_loss_fn(self.is_regression, self.class_weights)(features, outputs)

    @property
    def _num_multi_labels(self) -> int:
        """C for multi-label features ([C] multi-hot labels), else 0."""
        return len(self.label_list) if self.multi_label else 0

    def _cached_record(self, split):
        options, processor = self.options, self.processor
        examples = self.examples[split]
        path = os.path.join(options.output_dir, f"{split}.tf_record")
        tokenizer = self.context.tokenizer
        key = classification_data.feature_cache_key(
            examples, self.label_list, options.max_seq_length, tokenizer,
            processor.data_files(options.data_dir, split),
            {"task": processor.name,
             **(processor.feature_key if self.multi_label else {}),
             **long_documents.cache_key(options, _has_pairs(processor))})
        stride = long_documents.doc_stride(options, _has_pairs(processor))
        _, reused = cached_features(path, key, functools.partial(
            classification_data.write_example_features, examples, self.label_list,
            options.max_seq_length, tokenizer, doc_stride=stride))
        logging.info("%s: %d examples, features %s %s", split, len(examples),
                     "reused from" if reused else "written to", path)
        if stride is not None:
            self.window_counts[split] = long_documents.windows_per_example(path,
                                                                           len(examples))
            long_documents.log_windows(split, self.window_counts[split], stride)
        return examples, path

    def _num_features(self, split) -> int:
        """Features of `split`: its examples, or their windows (long documents)."""
        counts = self.window_counts.get(split)
        return len(self.examples[split]) if counts is None else int(counts.sum())

    def _dataset_fn(self, path, batch_size, is_training, rows_per_batch=None):
        """Batches of `path`; with `rows_per_batch` (packed training), of packed rows."""
        options = self.options

        def dataset_fn(input_context):
            if rows_per_batch is not None:
                return classification_data.classifier_dataset(
                    path, options.max_seq_length, rows_per_batch, True, self.is_regression,
                    seed=options.seed, input_context=input_context,
                    max_sequences_per_row=options.max_sequences_per_row,
                    num_multi_labels=self._num_multi_labels)
            return classification_data.classifier_dataset(
                path, options.max_seq_length, batch_size, is_training, self.is_regression,
                seed=options.seed, input_context=input_context,
                trim_padding=options.use_trim_padding,
                num_multi_labels=self._num_multi_labels)
        return dataset_fn

    def train_data(self):
        _, path = self._cached_record("train")
        if not self.options.pack_sequences:
            return TrainData(self._dataset_fn(path, self.options.train_batch_size, True),
                             self._num_features("train"), self.options.train_batch_size)
        plan = plan_packing(self.options, self.context.strategy,
                            classification_data.record_lengths(
                                path, self.options.max_seq_length, self.is_regression,
                                self._num_multi_labels))
        return TrainData(self._dataset_fn(path, None, True, plan.rows_per_batch),
                         self._num_features("train"), plan.rows_per_batch,
                         plan.examples_per_row)

    def _predict(self, split, runner):
        examples, path = self._cached_record(split)
        batch_size = (self.options.eval_batch_size if split == "dev"
                      else self.options.predict_batch_size)
        outputs = runner.predict(self._dataset_fn(path, batch_size, False), "logits",
                                 ("label_ids",), num_examples=self._num_features(split))
        # Long documents: each example's logits pooled from its windows'.
        return (examples, *long_documents.per_document(
            outputs["logits"].astype(np.float32), outputs["label_ids"],
            self.window_counts.get(split), long_documents.window_pooling(self.options)))

    def evaluate(self, split, runner):
        if split == "eval":
            examples, logits, label_ids = self._predict("dev", runner)
            results, loss = self._score(logits, label_ids)
            results.update(eval_loss=loss, eval_examples=len(examples))
            results.update(weights_lib.results(self.class_weights, self.label_list,
                                               self._weight_key))
            return results
        examples, logits, _ = self._predict("test", runner)
        self._write_predictions(examples, logits)
        return {}

    def metric_names(self):
        """eval_<name> of what compute_metrics returns for the task (combined metrics
        add their parts; they are read off a two-example call), and eval_loss."""
        if self.multi_label:  # read off a one-example call too
            ones = np.ones([1, len(self.label_list)])
            names = metrics.multi_label_metrics(ones, ones, self.label_list)
        else:
            names = metrics.compute_metrics(self.processor.metric_names, [0, 1], [0, 1])
        return [f"eval_{name}" for name in names] + ["eval_loss"]

    def baseline_scores(self):
        """The best score of a constant prediction on the dev data, per metric: one
        class for every example (the majority class's accuracy), a constant score for
        regression (correlation 0), no labels or every label for multi-label."""
        examples = self.examples.get("dev")
        if not examples:
            return {}
        if self.multi_label:
            labels = np.array([multi_label.multi_hot(e.label, self.label_list)
                               for e in examples])
            candidates = [np.zeros_like(labels), np.ones_like(labels)]
            score = lambda predicted: metrics.multi_label_metrics(  # noqa: E731
                predicted, labels, self.label_list)
        else:
            labels = (np.array([float(e.label) for e in examples]) if self.is_regression
                      else np.array([self.label_list.index(e.label) for e in examples]))
            candidates = ([np.full(len(labels), np.mean(labels))] if self.is_regression
                          else [np.full(len(labels), c) for c in range(len(self.label_list))])
            score = lambda predicted: metrics.compute_metrics(  # noqa: E731
                self.processor.metric_names, predicted, labels)
        best = {}
        for predicted in candidates:
            for name, value in score(predicted).items():
                value = 0.0 if np.isnan(value) else value  # a constant's correlation
                best[f"eval_{name}"] = max(best.get(f"eval_{name}", -np.inf), value)
        return best

    def _score(self, logits, label_ids):
        """(eval_<metric> results, the unweighted mean loss) of the dev predictions."""
        if self.multi_label:
            predicted = multi_label.sigmoid(logits) >= self.options.multi_label_threshold
            results = metrics.multi_label_metrics(predicted, label_ids, self.label_list)
            return ({f"eval_{name}": value for name, value in results.items()},
                    multi_label.mean_loss(logits, label_ids))
        if self.is_regression:
            predictions = logits[:, 0]
            loss = float(np.mean(np.square(predictions - label_ids)))
        else:
            predictions = np.argmax(logits, axis=-1)
            log_probs = np.log(np.clip(softmax(logits.astype(np.float64)), 1e-30, None))
            loss = float(-np.mean(log_probs[np.arange(len(label_ids)), label_ids]))
        results = metrics.compute_metrics(self.processor.metric_names, predictions, label_ids)
        return {f"eval_{name}": value for name, value in results.items()}, loss

    def _write_predictions(self, examples, logits):
        """test_results.tsv (the original's: probabilities or the score, no header),
        predictions.tsv (a header, then each example's id, prediction and, for
        labels, their probabilities) and a GLUE task's submission file."""
        options, processor = self.options, self.processor
        written = ["test_results.tsv", PREDICTIONS_FILE]
        predictions = os.path.join(options.output_dir, PREDICTIONS_FILE)
        if self.multi_label:  # sigmoid probabilities; the predicted label sets
            outputs = multi_label.sigmoid(logits)
            multi_label.write_predictions(predictions, examples, outputs, self.label_list,
                                          options.multi_label_threshold,
                                          options.label_separator)
        else:
            outputs = logits[:, 0] if self.is_regression else softmax(logits)
            classification_data.write_predictions(predictions, examples, outputs,
                                                  self.label_list)
            if processor.submission_name != PREDICTIONS_FILE:
                written.append(processor.submission_name)
                classification_data.write_submission(
                    os.path.join(options.output_dir, processor.submission_name), examples,
                    logits if self.is_regression else outputs, self.label_list)
        classification_data.write_test_results(
            os.path.join(options.output_dir, "test_results.tsv"), outputs, self.is_regression)
        logging.info("Wrote %s for %d examples", ", ".join(written), len(examples))

    def export_options(self):
        options = {"label_names": self.label_list, "is_regression": self.is_regression}
        if self.multi_label:
            options.update(multi_label=True,
                           multi_label_threshold=self.options.multi_label_threshold)
        options.update(long_documents.export_options(self.options, _has_pairs(self.processor)))
        return options


def run(options: ClassifierOptions, strategy=None) -> dict:
    """Runs the do_train / do_eval / do_predict steps; returns the eval results (if any)."""
    return driver.run(ClassificationTask(options), strategy)
