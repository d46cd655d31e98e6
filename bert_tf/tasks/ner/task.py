"""Fine-tune, evaluate and predict a BERT token tagger (NER): what run_ner runs.

    results = ner_task.run(NerOptions(
        data_dir="conll2003", init_checkpoint="cased_L-12_H-768_A-12", do_lower_case=False,
        output_dir="out", do_train=True, do_eval=True, do_predict=True))

Files: `train_file` / `eval_file` / `predict_file`, or found in `data_dir` under the
CoNLL-2003 names (`eng.train`, `eng.testa`, `eng.testb`) or `train.txt`, `valid.txt` /
`dev.txt`, `test.txt`. Writes to output_dir: `label_list.txt` (from the training data;
eval and predict runs read it back), checkpoints (a rerun resumes), `eval_results.txt` / `.json`
(conlleval's figures), `eval_predictions.txt` and
`test_predictions.txt` (`word gold predicted` lines, conlleval's input, predicted tags in
the gold file's IOB scheme) and, when the predict file has gold tags, `test_results.txt`.
`class_weights` weighs each scored token's loss by its tag (`bert_tf.runs.class_weights`;
balanced: counted over the train file's words, IOB2 tags).
"""

import collections
import os

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf.io import fileio
from bert_tf.models import BertTokenClassifier, BertEncoder
from bert_tf.models.encoder import INPUT_NAMES
from bert_tf.runs import class_weights as weights_lib
from bert_tf.runs import column_roles, driver, run_context
from bert_tf.tasks.ner import conlleval
from bert_tf.tasks.ner import data as ner_data
from bert_tf.tasks.ner.options import NerOptions
from bert_tf.runs.task import Task, TrainData, plan_packing
from bert_tf.text import input_layout_graph
from bert_tf.train import finetune_packing

DEFAULT_FILES = {"train": ("eng.train", "train.txt"),
                 "eval": ("eng.testa", "valid.txt", "dev.txt"),
                 "predict": ("eng.testb", "test.txt")}


_PHASE_NAMES = {"eval": "evaluation", "predict": "prediction"}  # in progress lines
# The per-position training features beside the model inputs, [B, S] each.
TOKEN_FEATURES = ("label_ids", "label_weights")


def data_file(options: NerOptions, split: str) -> str:
    """The file of `split` ("train", "eval", "predict"): the flag, else found in data_dir."""
    explicit = getattr(options, f"{split}_file")
    if explicit:
        if not os.path.isfile(explicit):
            raise FileNotFoundError(f"{split}_file not found: {explicit}")
        return explicit
    if not options.data_dir:
        raise ValueError(f"set {split}_file or data_dir for do_{split}")
    candidates = [os.path.join(options.data_dir, name) for name in DEFAULT_FILES[split]]
    for path in candidates:
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(f"no {split} file: expected one of {', '.join(candidates)} "
                            f"(or pass {split}_file)")


def file_has_tags(path: str) -> bool:
    """True when the first token line has a second column (a tag).

    Raises:
      ValueError: naming file, line and byte, for a file that is not UTF-8 text.
    """
    for _, line in fileio.iter_text_lines(path):
        fields = line.split()
        if fields and fields[0] != ner_data.DOCSTART:
            return len(fields) > 1
    return False


def token_loss_fn(features, outputs, class_weights=None):
    """Mean cross-entropy over the scored tokens (each word's first sub-token); with
    `class_weights` [C], sum(w_t * ce_t) / sum(w_t) over them."""
    logits = tf.cast(outputs["logits"], tf.float32)  # [B, S, C]
    if class_weights is not None:
        return weights_lib.weighted_cross_entropy(features["label_ids"], logits,
                                                  class_weights, features["label_weights"])
    losses = keras.losses.sparse_categorical_crossentropy(
        features["label_ids"], logits, from_logits=True)  # [B, S]
    return finetune_packing.weighted_mean(losses, features["label_weights"])


def windows_dataset_fn(features: ner_data.NerFeatures, batch_size, is_training, seed,
                       trim=False, packing_plan=None, max_sequences_per_row=None):
    """Batches of the windows; with a `packing_plan` (training), of packed rows."""
    arrays = dict(features.model_inputs(), label_ids=features.label_ids,
                  label_weights=features.label_weights)

    def dataset_fn(input_context):
        dataset = tf.data.Dataset.from_tensor_slices(arrays)
        per_replica, replicas = batch_size, 1
        if input_context is not None:
            per_replica = input_context.get_per_replica_batch_size(batch_size)
            replicas = input_context.num_replicas_in_sync
            if input_context.num_input_pipelines > 1:
                dataset = dataset.shard(input_context.num_input_pipelines,
                                        input_context.input_pipeline_id)
        if is_training:
            dataset = dataset.shuffle(len(features.input_ids), seed=seed).repeat()
        if packing_plan is not None:
            windows = dataset.batch(finetune_packing.PACKING_WINDOW)
            return finetune_packing.packed_batches(
                windows, packing_plan.rows_per_batch // replicas,
                features.input_ids.shape[1], max_sequences_per_row,
                token_features={name: tf.int32 for name in TOKEN_FEATURES},
                seed=seed)
        dataset = dataset.batch(per_replica, drop_remainder=is_training)
        if trim:
            dataset = dataset.map(lambda batch: input_layout_graph.trim_to_longest(
                batch, INPUT_NAMES + TOKEN_FEATURES))
        return dataset.prefetch(tf.data.AUTOTUNE)
    return dataset_fn


def _read(options, split, has_tags=True):
    path = data_file(options, split)
    sentences = ner_data.read_tagged_file(path, options.tag_column, options.word_column, has_tags)
    if not sentences:
        raise ValueError(f"{path}: no sentences (the file is empty or holds only "
                         f"{ner_data.DOCSTART} and blank lines); the {split} file needs at "
                         "least one")
    return path, sentences


def check_label_list(label_list, path) -> None:
    """Refuses a tag set of fewer than two tags (a one-tag head learns nothing)."""
    if len(label_list) < 2:
        raise ValueError(f"{path}: the train file holds only tag {label_list[0]!r}; "
                         "tagging needs at least two different tags (e.g. O and B-PER)")
    ner_data.has_chunk_prefixes(label_list, f"{path}: the train file's tags")


def _score(sentences, predicted, path, scheme):
    text = ner_data.format_predictions(sentences, predicted, scheme)
    fileio.write_text_atomic(path, text)
    # Plain tags (PER, not B-PER) are scored token by token: conlleval's raw mode.
    gold = {tag for sentence in sentences for tag in sentence.tags or ()}
    raw = not ner_data.has_chunk_prefixes(gold | {t for tags in predicted for t in tags},
                                          path)
    if raw:
        logging.info("%s: the tags have no B-/I- prefixes: each token is scored as its "
                     "own chunk (conlleval -r)", path)
    counts = conlleval.evaluate_lines(text.splitlines(), raw=raw)
    logging.info("conlleval on %s:\n%s", path, conlleval.format_report(counts))
    score = counts.overall()
    results = {"precision": score.precision, "recall": score.recall, "f1": score.f1,
               "accuracy": counts.accuracy, "tokens": counts.token_count,
               "phrases": counts.found_correct}
    for chunk_type in counts.sorted_types():
        results[f"f1_{chunk_type}"] = counts.by_type(chunk_type).f1
    return results


class NerTask(Task):
    """Token tagging (NER) on CoNLL-2003 or any token-per-line file."""
    name = "ner"
    command = "ner"
    model_type = "token_classifier"

    def __init__(self, options: NerOptions):
        super().__init__(options)
        self.label_list, self.train_sentences = None, None
        self.class_weights = None  # [C] of the training loss
        self.data = {}  # split -> (path, sentences, has_tags) of eval / predict

    @property
    def labels(self):
        return self.label_list

    def check_inputs(self):
        """Refuses a missing data file (the options' own values: `options.check()`),
        and one that is a file the run writes into output_dir (its predictions)."""
        inputs = {f"{split}_file": data_file(self.options, split)
                  for split in ("train", "eval", "predict")
                  if getattr(self.options, f"do_{split}")}
        written = [f"{name}_{kind}" for name in set(self.result_names.values())
                   for kind in ("predictions.txt", "results.txt", "results.json")]
        run_context.check_inputs_apart(self.options.output_dir or ".",
                                       written + [run_context.LABEL_LIST_FILE], inputs)

    def setup(self, context):
        """Reads and checks every file the run will use before any work: a one-tag
        train file, an empty eval or predict file are refused here."""
        super().setup(context)
        options = self.options
        if options.do_train:
            path, self.train_sentences = _read(options, "train")
            column_roles.check_labels_not_words(  # a --tag_column of words (issue 49)
                [word for sentence in self.train_sentences for word in sentence.words],
                [tag for sentence in self.train_sentences for tag in sentence.tags],
                f"--tag_column={options.tag_column}", path)
            self.label_list = ner_data.build_label_list(self.train_sentences)
            check_label_list(self.label_list, path)
        else:
            self.label_list = run_context.read_label_list(options.output_dir)
        for split in ("eval", "predict"):
            if getattr(options, f"do_{split}"):
                path = data_file(options, split)
                has_tags = split == "eval" or file_has_tags(path)
                self.data[split] = (*_read(options, split, has_tags), has_tags)
        self.class_weights = self._class_weights()
        if options.do_train:
            run_context.write_label_list(options.output_dir, self.label_list)
            logging.info("Label list from the training data: %s", self.label_list)

    def _class_weights(self):
        """The tag weights of the training loss (None: unweighted); balanced counts the
        IOB2 tags of the train file's words."""
        def count():
            found = collections.Counter(tag for sentence in self.train_sentences
                                        for tag in ner_data.to_iob2(sentence.tags))
            return [found[tag] for tag in self.label_list], sum(found.values())
        return weights_lib.training_weights(
            self.options.class_weights, self.label_list, self.options.do_train, count,
            f"the train file {data_file(self.options, 'train')}" if self.options.do_train
            else "")

    def build_model(self):
        encoder = BertEncoder(self.context.config)
        return BertTokenClassifier(encoder, len(self.label_list),
                                   dropout_rate=self.options.dropout_rate,
                                   head_initializer=self.options.head_initializer)

    def loss(self, features, outputs):
        return token_loss_fn(features, outputs, self.class_weights)

    def train_data(self):
        options = self.options
        features = ner_data.convert_sentences_to_features(
            self.train_sentences, self.label_list, options.max_seq_length,
            self.context.tokenizer, options.doc_stride, phase="Building training features")
        logging.info("Training: %d sentences in %d windows", len(self.train_sentences),
                     len(features.input_ids))
        if not options.pack_sequences:
            return TrainData(windows_dataset_fn(features, options.train_batch_size, True,
                                                options.seed, options.use_trim_padding),
                             len(features.input_ids), options.train_batch_size)
        plan = plan_packing(options, self.context.strategy, features.input_mask.sum(axis=1))
        return TrainData(windows_dataset_fn(features, options.train_batch_size, True,
                                            options.seed, options.use_trim_padding, plan,
                                            options.max_sequences_per_row),
                         len(features.input_ids), plan.rows_per_batch, plan.examples_per_row)

    def evaluate(self, split, runner):
        """Tags every sentence of `split`; writes `<split>_predictions.txt`; scores."""
        options = self.options
        _, sentences, has_tags = self.data[split]
        features = ner_data.convert_sentences_to_features(
            sentences, self.label_list, options.max_seq_length, self.context.tokenizer,
            options.doc_stride, phase=f"Building {_PHASE_NAMES[split]} features")
        batch_size = options.eval_batch_size if split == "eval" else options.predict_batch_size
        predicted_ids = []
        for batch in runner.batches(windows_dataset_fn(features, batch_size, False, None,
                                                        options.use_trim_padding),
                                    num_examples=len(features.input_ids)):
            ids = np.argmax(batch["logits"], axis=-1)  # [B, S'] with S' <= max_seq_length
            predicted_ids.append(np.pad(ids, [(0, 0),
                                              (0, options.max_seq_length - ids.shape[1])]))
        predicted = ner_data.decode_predictions(features, np.concatenate(predicted_ids),
                                                sentences, self.label_list)
        name = self.result_names[split]
        output = os.path.join(options.output_dir, f"{name}_predictions.txt")
        if not has_tags:
            fileio.write_text_atomic(output, ner_data.format_predictions(sentences, predicted))
            logging.info("Wrote %s (%d sentences)", output, len(sentences))
            return {}
        scores = _score(sentences, predicted, output, ner_data.detect_scheme(sentences))
        return dict({f"{name}_{key}": value for key, value in scores.items()},
                    **weights_lib.results(self.class_weights, self.label_list))

    def baseline_scores(self):
        """A constant prediction's overall scores on the dev data: every token O finds no
        entity (F1 0); its token accuracy is the share of O tags."""
        data = self.data.get("eval")
        if not data or not data[2]:
            return {}
        tags = [tag for sentence in data[1] for tag in sentence.tags]
        name = self.result_names["eval"]
        return {f"{name}_f1": 0.0, f"{name}_precision": 0.0, f"{name}_recall": 0.0,
                f"{name}_accuracy": 100.0 * tags.count("O") / max(1, len(tags))}

    def metric_names(self):
        """conlleval's overall figures (the per-type F1s depend on the tags found)."""
        return [f"{self.result_names['eval']}_{name}"
                for name in ("f1", "precision", "recall", "accuracy")]

    def export_options(self):
        return {"label_names": self.label_list}


def run(options: NerOptions, strategy=None) -> dict:
    """Runs do_train / do_eval / do_predict; returns the eval (and test) results."""
    return driver.run(NerTask(options), strategy)
