"""Fine-tune and predict SQuAD v1.1 / v2.0: what run_squad runs.

    results = squad_task.run(SquadOptions(
        train_file="train-v1.1.json", predict_file="dev-v1.1.json",
        init_checkpoint="uncased_L-12_H-768_A-12", output_dir="out",
        do_train=True, do_predict=True))

Writes to output_dir: `train.tf_record` (the training features in the original's
record layout, reused when the inputs are unchanged), training checkpoints (a rerun
resumes), `predictions.json`, `nbest_predictions.json`, `null_odds.json` (v2.0), and,
when every question of the predict file carries answers, `eval_results.json` (and
`.txt`, as every task) with the figures of the official evaluation script for that
file's version.

Training: examples shuffled with seed 12345 as the original does, loss = mean of the start
and end cross-entropies over the window's positions. An epoch is a pass over the training
features (doc-stride windows): `num_train_steps = features / train_batch_size *
num_train_epochs`, as Hugging Face transformers counts (the original counts questions,
which runs fewer steps than the epochs asked for when contexts need several windows).
"""

import collections
import json
import os
import random
import time

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf.io import fileio
from bert_tf.models import BertSpanLabeler, BertEncoder
from bert_tf.runs import driver, run_context
from bert_tf.tasks.squad import data as squad_data
from bert_tf.tasks.squad import evaluate as squad_evaluate
from bert_tf.tasks.squad import features as squad_features
from bert_tf.tasks.squad.options import SquadOptions
from bert_tf.tasks.squad import postprocess as squad_postprocess
from bert_tf.runs.task import Task, TrainData, cached_features
from bert_tf.train import records

TRAIN_RECORD = "train.tf_record"
EXAMPLE_SHUFFLE_SEED = 12345


def check_squad_options(options: SquadOptions) -> None:
    """Refuses a train_file or predict_file that the run needs and that is missing."""
    for name in ("train_file", "predict_file"):
        path = getattr(options, name)
        if path and (options.do_train if name == "train_file" else options.do_predict) \
                and not os.path.isfile(path):
            raise FileNotFoundError(f"{name} not found: {path}")


def span_loss(features, outputs):
    """Mean of the start and end cross-entropies (the original's compute_loss)."""
    def cross_entropy(logits, positions):
        logits = tf.cast(logits, tf.float32)  # [B, S]
        log_probs = tf.nn.log_softmax(logits, axis=-1)
        one_hot = tf.one_hot(positions, depth=tf.shape(logits)[1], dtype=tf.float32)
        return -tf.reduce_mean(tf.reduce_sum(one_hot * log_probs, axis=-1))

    start_loss = cross_entropy(outputs["start_logits"], features["start_positions"])
    end_loss = cross_entropy(outputs["end_logits"], features["end_positions"])
    return {"total_loss": (start_loss + end_loss) / 2.0, "start_loss": start_loss,
            "end_loss": end_loss}


def record_spec(max_seq_length):
    """Feature spec of train.tf_record (names as the original's FeatureWriter)."""
    spec = {name: tf.io.FixedLenFeature([max_seq_length], tf.int64)
            for name in ("input_ids", "input_mask", "segment_ids")}
    for name in ("unique_ids", "start_positions", "end_positions", "is_impossible"):
        spec[name] = tf.io.FixedLenFeature([], tf.int64)
    return spec


def write_train_record(features, path):
    """Writes training features as tf.Examples (temporary name, then renamed)."""
    with fileio.atomic_output(path) as temporary, tf.io.TFRecordWriter(temporary) as writer:
        for feature in features:
            example = tf.train.Example(features=tf.train.Features(feature={
                "unique_ids": records.int_feature([feature.unique_id]),
                "input_ids": records.int_feature(feature.input_ids),
                "input_mask": records.int_feature(feature.input_mask),
                "segment_ids": records.int_feature(feature.segment_ids),
                "start_positions": records.int_feature([feature.start_position]),
                "end_positions": records.int_feature([feature.end_position]),
                "is_impossible": records.int_feature([int(feature.is_impossible)]),
            }))
            writer.write(example.SerializeToString())


def read_train_examples(options):
    """The usable training questions of train_file and the reader's counts.

    Raises:
      SquadFormatError / ValueError: for JSON that is not SQuAD-shaped, or a file
        without one usable question.
    """
    stats = collections.Counter()
    examples = squad_data.read_squad_examples(options.train_file, True,
                                              options.version_2_with_negative, stats)
    if not examples:
        raise ValueError(f"train_file {options.train_file}: no usable training question")
    return examples, stats


def prepare_train_record(options, tokenizer, examples=None, stats=None):
    """Shuffles the training examples (read here unless given, with their `stats`),
    writes their features unless an up-to-date `train.tf_record` exists.

    Returns:
      (number of features, record path).
    """
    if examples is None:
        examples, stats = read_train_examples(options)
    examples = list(examples)
    random.Random(EXAMPLE_SHUFFLE_SEED).shuffle(examples)
    path = os.path.join(options.output_dir, TRAIN_RECORD)
    key = {"train_file": fileio.file_digest(options.train_file),
           "vocab_file": tokenizer.vocab_sha256,
           "do_lower_case": options.do_lower_case, "max_seq_length": options.max_seq_length,
           "doc_stride": options.doc_stride, "max_query_length": options.max_query_length,
           "version_2_with_negative": options.version_2_with_negative,
           "num_examples": len(examples)}
    started = time.time()

    def write_fn(record_path):
        features = squad_features.convert_examples_to_features(
            examples, tokenizer, options.max_seq_length, options.doc_stride,
            options.max_query_length, is_training=True)
        write_train_record(features, record_path)
        return len(features)

    num_features, reused = cached_features(path, key, write_fn)
    logging.info("train_file: %d questions, %d used (%d skipped: answer not at "
                 "answer_start; %d with several answers used the first); %d features "
                 "%s in %.1f s -> %s", stats["questions"], len(examples),
                 stats["skipped_answer_not_found"], stats["first_of_several_answers"],
                 num_features, "reused" if reused else "written", time.time() - started,
                 path)
    return num_features, path


def features_to_arrays(features, is_training):
    """Stacks features into int32 numpy arrays keyed like the model inputs.

    Returns:
      dict with `unique_ids`, `input_ids`, `input_mask`, `segment_ids` ([N, S]) and,
      for training, `start_positions` / `end_positions` ([N]).
    """
    arrays = {
        "unique_ids": np.array([f.unique_id for f in features], dtype=np.int32),
        "input_ids": np.array([f.input_ids for f in features], dtype=np.int32),
        "input_mask": np.array([f.input_mask for f in features], dtype=np.int32),
        "segment_ids": np.array([f.segment_ids for f in features], dtype=np.int32),
    }
    if is_training:
        arrays["start_positions"] = np.array([f.start_position for f in features],
                                             dtype=np.int32)
        arrays["end_positions"] = np.array([f.end_position for f in features],
                                           dtype=np.int32)
    return arrays


def predict_dataset_fn(arrays, batch_size):
    """dataset_fn over in-memory prediction features (in order, last batch partial)."""
    def dataset_fn(input_context):
        per_replica = input_context.get_per_replica_batch_size(batch_size)
        dataset = tf.data.Dataset.from_tensor_slices(
            {name: arrays[name] for name in ("unique_ids", "input_ids", "input_mask",
                                             "segment_ids")})
        if input_context.num_input_pipelines > 1:
            dataset = dataset.shard(input_context.num_input_pipelines,
                                    input_context.input_pipeline_id)
        return dataset.batch(per_replica).prefetch(tf.data.AUTOTUNE)
    return dataset_fn


def predict_logits(runner, features, batch_size):
    """RawResults (unique_id, start_logits, end_logits) for every feature."""
    arrays = features_to_arrays(features, is_training=False)
    results = []
    for batch in runner.batches(predict_dataset_fn(arrays, batch_size),
                                passthrough_keys=("unique_ids",), num_examples=len(features)):
        start_logits = batch["start_logits"].astype(np.float32)
        end_logits = batch["end_logits"].astype(np.float32)
        for i, unique_id in enumerate(batch["unique_ids"]):
            results.append(squad_postprocess.RawResult(int(unique_id), start_logits[i],
                                                       end_logits[i]))
    return results


def read_gold(predict_file):
    """(SQuAD JSON, whether it is v2.0) of a predict file that every question has answers
    in, else None: v1.1 scores need a gold answer for every question; v2.0 takes [] as
    "no answer"."""
    data_json = json.loads("".join(line for _, line in fileio.iter_text_lines(predict_file)))
    version_2 = squad_evaluate.is_version_2(data_json)
    if not all(isinstance(qa.get("answers"), list) and (version_2 or qa["answers"])
               for qa in _questions(data_json)):
        return None
    return data_json, version_2


def _questions(data_json):
    return [qa for entry in data_json["data"] for paragraph in entry["paragraphs"]
            for qa in paragraph["qas"]]


def evaluate_predictions(predict_file, predictions, null_odds):
    """The official script's dict for the predict file's version, or None without
    answers in the file."""
    gold = read_gold(predict_file)
    if gold is None:
        logging.info("%s has questions without answers: not evaluated", predict_file)
        return None
    data_json, version_2 = gold
    if version_2:
        return squad_evaluate.evaluate_v2(data_json["data"], predictions,
                                          null_odds if null_odds else None)
    return squad_evaluate.evaluate_v1(data_json["data"], predictions)


class SquadTask(Task):
    """SQuAD v1.1 / v2.0: answer spans, scored with the official evaluation scripts."""
    command = "squad"
    model_type = "span_labeler"
    output_patterns = Task.output_patterns + ("null_odds.json",)
    # predict_file is the dev set: its scores are the run's evaluation (as the original,
    # run_squad has no do_eval), also while training.
    result_names = {"eval": "eval", "predict": "eval"}
    train_eval_split = "predict"

    @property
    def name(self):
        return "squad2" if self.options.version_2_with_negative else "squad"

    def __init__(self, options):
        super().__init__(options)
        self.train_examples, self.train_stats, self.predict_examples = None, None, None

    def check_inputs(self):
        """The options, and no input file that the run writes into output_dir."""
        check_squad_options(self.options)
        options = self.options
        run_context.check_inputs_apart(
            options.output_dir or ".", [TRAIN_RECORD, "predictions.json",
                                        "nbest_predictions.json", "null_odds.json",
                                        "eval_results.txt", "eval_results.json"],
            {"train_file": options.train_file if options.do_train else None,
             "predict_file": options.predict_file if options.do_predict else None})

    def setup(self, context):
        """Reads and checks train_file and predict_file before any work: JSON shape,
        empty or repeated ids, empty questions, a predict_file without questions."""
        super().setup(context)
        options = self.options
        if options.do_train:
            self.train_examples, self.train_stats = read_train_examples(options)
        if options.do_predict:
            self.predict_examples = squad_data.read_squad_examples(
                options.predict_file, False, options.version_2_with_negative)
            if not self.predict_examples:
                raise ValueError(f"predict_file {options.predict_file}: no questions; "
                                 "there is nothing to predict")

    def build_model(self):
        encoder = BertEncoder(self.context.config)
        return BertSpanLabeler(encoder, head_initializer=self.options.head_initializer)

    def loss(self, features, outputs):
        return span_loss(features, outputs)

    def train_data(self):
        options = self.options
        num_features, path = prepare_train_record(options, self.context.tokenizer,
                                                  self.train_examples, self.train_stats)

        def dataset_fn(input_context):
            return records.tfrecord_dataset(
                path, record_spec(options.max_seq_length), options.train_batch_size, True,
                input_context=input_context, compression="none", seed=options.seed,
                shuffle_buffer_size=10000, drop_remainder=True)
        return TrainData(dataset_fn, num_features, options.train_batch_size)

    def evaluate(self, split, runner):
        """Predicts predict_file, writes the prediction files; its scores when it has
        answers (else {})."""
        options = self.options
        examples = self.predict_examples
        features = squad_features.convert_examples_to_features(
            examples, self.context.tokenizer, options.max_seq_length, options.doc_stride,
            options.max_query_length, is_training=False)
        logging.info("predict_file: %d questions, %d features", len(examples), len(features))
        results = predict_logits(runner, features, options.predict_batch_size)
        predictions, null_odds, _ = squad_postprocess.write_predictions(
            examples, features, results, options.output_dir,
            version_2_with_negative=options.version_2_with_negative,
            n_best_size=options.n_best_size, max_answer_length=options.max_answer_length,
            do_lower_case=options.do_lower_case,
            null_score_diff_threshold=options.null_score_diff_threshold,
            verbose_logging=options.verbose_logging)
        evaluation = evaluate_predictions(options.predict_file, predictions, null_odds)
        if evaluation is None:
            return {}
        logging.info("Evaluation of %s: %s", options.predict_file, json.dumps(evaluation))
        return dict(evaluation)

    def metric_names(self):
        """The official script's scores of predict_file ([] when it lacks answers)."""
        gold = read_gold(self.options.predict_file) if self.options.do_predict else None
        if gold is None:
            return []
        data_json, version_2 = gold
        if not version_2:
            return ["exact_match", "f1"]
        answered = {bool(qa["answers"]) for qa in _questions(data_json)}
        return (["exact", "f1"] + ["HasAns_exact", "HasAns_f1"] * (True in answered)
                + ["NoAns_exact", "NoAns_f1"] * (False in answered)
                + ["best_exact", "best_f1"] * self.options.version_2_with_negative)

    def export_options(self):
        return {"max_query_length": self.options.max_query_length,
                "max_answer_length": self.options.max_answer_length}


def run(options: SquadOptions, strategy=None) -> dict:
    """Runs do_train / do_predict; returns the evaluation of predict_file (or {})."""
    return driver.run(SquadTask(options), strategy)
