"""Fine-tune, evaluate and predict a sentence(-pair) classifier: what run_classifier runs.

    results = classification_task.run(ClassifierOptions(
        task_name="mrpc", data_dir="glue/MRPC", init_checkpoint="uncased_L-12_H-768_A-12",
        output_dir="out", do_train=True, do_eval=True))

Writes to output_dir: `label_list.txt`, cached features (`train.tf_record`, ...),
training checkpoints (a rerun resumes), `eval_results.txt` (`key = value`),
`test_results.tsv` (class probabilities or the score per example) and the
GLUE-submission file (e.g. `MRPC.tsv`).
"""

import dataclasses
import functools
import os
from typing import Optional

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf.models import BertClassifier
from bert_tf.tasks.classification import data as classification_data
from bert_tf.tasks import base, run_files
from bert_tf.tasks.classification import metrics
from bert_tf.tasks.base import FinetuneOptions
from bert_tf.train import finetune_packing


@dataclasses.dataclass
class ClassifierOptions(FinetuneOptions):
    """FinetuneOptions plus the task and, for the generic task, its columns."""
    task_name: str = ""
    data_dir: str = ""
    text_column: str = "text"
    text_pair_column: Optional[str] = None
    label_column: str = "label"
    id_column: Optional[str] = None
    labels: Optional[list] = None
    is_regression: bool = False
    xnli_language: str = "zh"


def make_processor(options: ClassifierOptions):
    """The task's processor; a generic task without labels reuses the saved label list."""
    name = options.task_name.strip().lower()
    if name in ("generic", "csv", "tsv", "jsonl"):
        labels = options.labels
        if not labels and not options.is_regression and not options.do_train and \
                os.path.isfile(os.path.join(options.output_dir, run_files.LABEL_LIST_FILE)):
            labels = run_files.read_label_list(options.output_dir)
        return classification_data.get_processor(
            name, text_column=options.text_column, text_pair_column=options.text_pair_column,
            label_column=options.label_column, id_column=options.id_column, labels=labels,
            is_regression=options.is_regression)
    if name == "xnli":
        return classification_data.get_processor(name, language=options.xnli_language)
    return classification_data.get_processor(name)


def classifier_loss_fn(is_regression):
    """Mean loss over the batch's examples (packed rows: over their real examples)."""
    def loss_fn(features, outputs):
        logits = tf.cast(outputs["logits"], tf.float32)  # [B, C] or packed [B, K, C]
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


def _cached_record(options, processor, split, label_list, tokenizer):
    examples = processor.get_examples(options.data_dir, split)
    if not examples:
        raise ValueError(f"task {processor.name}: no examples in "
                         f"{processor.data_files(options.data_dir, split)[0]}")
    path = os.path.join(options.output_dir, f"{split}.tf_record")
    key = classification_data.feature_cache_key(
        examples, label_list, options.max_seq_length, tokenizer,
        processor.data_files(options.data_dir, split), {"task": processor.name})
    _, reused = base.cached_features(path, key, functools.partial(
        classification_data.write_example_features, examples, label_list,
        options.max_seq_length, tokenizer))
    logging.info("%s: %d examples, features %s %s", split, len(examples),
                 "reused from" if reused else "written to", path)
    return examples, path


def _dataset_fn(options, path, batch_size, is_training, is_regression, packing_plan=None):
    """Batches of `path`; with a `packing_plan` (training), batches of its packed rows."""
    def dataset_fn(input_context):
        if packing_plan is not None:
            return classification_data.classifier_dataset(
                path, options.max_seq_length, packing_plan.rows_per_batch, True,
                is_regression, seed=options.seed, input_context=input_context,
                max_sequences_per_row=options.max_sequences_per_row)
        return classification_data.classifier_dataset(
            path, options.max_seq_length, batch_size, is_training, is_regression,
            seed=options.seed, input_context=input_context,
            trim_padding=options.use_trim_padding)
    return dataset_fn


def _train(options, holder, processor, label_list, tokenizer):
    """Fine-tunes on the train split (packed rows with `pack_sequences`)."""
    is_regression = label_list is None
    examples, path = _cached_record(options, processor, "train", label_list, tokenizer)
    plan = None
    if options.pack_sequences:
        plan = base.plan_packing(options, holder.strategy, classification_data.record_lengths(
            path, options.max_seq_length, is_regression))
    holder.train(classifier_loss_fn(is_regression),
                 _dataset_fn(options, path, options.train_batch_size, True, is_regression,
                             plan),
                 len(examples), plan)


def _score(processor, logits, label_ids, label_list):
    if label_list is None:
        predictions = logits[:, 0]
        loss = float(np.mean(np.square(predictions - label_ids)))
    else:
        predictions = np.argmax(logits, axis=-1)
        log_probs = np.log(np.clip(base.softmax(logits.astype(np.float64)), 1e-30, None))
        loss = float(-np.mean(log_probs[np.arange(len(label_ids)), label_ids]))
    results = metrics.compute_metrics(processor.metric_names, predictions, label_ids)
    return {f"eval_{name}": value for name, value in results.items()}, loss


def _has_pairs(processor) -> bool:
    """True when the task's examples are sentence pairs."""
    if isinstance(processor, classification_data.GlueProcessor) and processor.task.layouts:
        return processor.task.layouts["train"].text_b is not None
    return getattr(processor, "text_pair_column", True) is not None


def _check_files(options, processor):
    """A missing data file stops the run before any work."""
    for flag, split in (("do_train", "train"), ("do_eval", "dev"), ("do_predict", "test")):
        if getattr(options, flag):
            for path in processor.data_files(options.data_dir, split):
                classification_data.text_files.require_file(path, split, processor.name)


def _predict(options, holder, processor, split, label_list, tokenizer):
    examples, path = _cached_record(options, processor, split, label_list, tokenizer)
    batch_size = options.eval_batch_size if split == "dev" else options.predict_batch_size
    outputs = holder.predict(_dataset_fn(options, path, batch_size, False, label_list is None),
                             "logits", ("label_ids",))
    return examples, outputs["logits"].astype(np.float32), outputs["label_ids"]


def _write_predictions(options, processor, examples, logits, label_list):
    is_regression = label_list is None
    outputs = logits[:, 0] if is_regression else base.softmax(logits)
    classification_data.write_test_results(
        os.path.join(options.output_dir, "test_results.tsv"), outputs, is_regression)
    classification_data.write_submission(
        os.path.join(options.output_dir, processor.submission_name), examples,
        logits if is_regression else outputs, label_list)
    logging.info("Wrote test_results.tsv and %s for %d examples",
                 processor.submission_name, len(examples))


def run(options: ClassifierOptions) -> dict:
    """Runs the do_train / do_eval / do_predict steps; returns the eval results (if any)."""
    processor = make_processor(options)
    _check_files(options, processor)
    base.check_options(options)
    base.set_seed(options.seed)
    label_list = processor.get_labels(options.data_dir)
    is_regression = label_list is None
    run_files.check_run_settings(options, "classifier", f"classification/{processor.name}",
                            label_list)
    tokenizer = base.make_tokenizer(options)

    def make_head_model(encoder):
        return BertClassifier(encoder, 1 if is_regression else len(label_list),
                              dropout_rate=options.dropout_rate,
                              head_initializer=options.head_initializer)

    holder = base.ModelHolder(options, base.make_strategy(options),
                              make_head_model)
    results = {}
    if options.do_train:
        if label_list is not None:
            run_files.write_label_list(options.output_dir, label_list)
        _train(options, holder, processor, label_list, tokenizer)
    if options.do_eval:
        examples, logits, label_ids = _predict(options, holder, processor, "dev", label_list,
                                               tokenizer)
        results, loss = _score(processor, logits, label_ids, label_list)
        results.update(eval_loss=loss, global_step=holder.global_step,
                       eval_examples=len(examples))
        base.write_eval_results(os.path.join(options.output_dir, "eval_results.txt"),
                                results)
    if options.do_predict:
        examples, logits, _ = _predict(options, holder, processor, "test", label_list,
                                       tokenizer)
        _write_predictions(options, processor, examples, logits, label_list)
    if options.export_dir and holder.model is not None:
        base.export_model(options, holder.model, "classifier", label_names=label_list,
                          is_regression=is_regression, text_pair=_has_pairs(processor))
    return results
