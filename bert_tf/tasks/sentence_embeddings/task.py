"""Train and evaluate a sentence encoder (a bi-encoder): `bert-train --task=sentence_embeddings`.

    results = registry.run("sentence_embeddings", SentenceEmbeddingOptions(
        data_dir="glue/STS-B", init_checkpoint="uncased_L-6_H-384_A-12",
        output_dir="out", do_train=True, do_eval=True))

Data (`bert_tf.tasks.sentence_embeddings.data`): `train_file` / `eval_file` /
`predict_file`, or found in `data_dir` as `train`, `dev` and `test` `.tsv/.csv/.jsonl`
(GLUE STS-B's folder reads as it is: columns `sentence1`, `sentence2`, `score` 0 .. 5).
The loss (`losses`): CoSENT or cosine-similarity MSE for scored pairs, in-batch
negatives (MultipleNegativesRanking, optionally symmetric, with hard negatives from
`negative_column`) for pairs and triplets; by default CoSENT when the train file has
the score column, else MultipleNegativesRanking.

Evaluation (`evaluation`): the dev pairs' Pearson and Spearman correlation of cosine
similarity with the gold scores (`eval_pearson`, `eval_spearman`), and with
`retrieval_dir` (a BEIR folder) MRR@10, Recall@k and nDCG@10 of its queries over its
corpus (`eval_mrr_at_10`, `eval_recall_at_10`, `eval_ndcg_at_10`, ...). Writes to
output_dir: checkpoints (a rerun resumes), `eval_results.txt` / `.json`,
`eval_predictions.tsv` (each dev pair's cosine and score), and with do_predict
`test_predictions.tsv` (and `test_results.*` when the predict file has scores).
"""

import dataclasses
import math
import os
from typing import Optional

import numpy as np
from absl import logging

from bert_tf.models import BertEncoder
from bert_tf.options import OptionGroup, compose, option
from bert_tf.tasks import column_roles, driver
from bert_tf.tasks import option_groups as groups
from bert_tf.tasks import text_files
from bert_tf.tasks.options import (RUN, TRAINING_LOOP, EpochSchedule, EvalStep, Packing,
                                  PredictStep, TrainingEvaluation, TrainStep, TrimPadding,
                                  check_micro_batches)
from bert_tf.tasks.sentence_embeddings import data as pair_data
from bert_tf.tasks.sentence_embeddings import evaluation, losses, serving
from bert_tf.tasks.sentence_embeddings.model import POOLING_MODES, SentenceEncoder
from bert_tf.tasks.task import Task, TrainData

IN_BATCH_LOSSES = tuple(name for name in losses.LOSSES if name not in losses.SCORED_LOSSES)


@dataclasses.dataclass(kw_only=True)
class SentenceModel(OptionGroup):
    """How token outputs become the sentence vector."""
    pooling: Optional[str] = option(
        None, "How the token outputs become one vector: mean or max over the real "
        "tokens, or cls (the first token's output). Default: as the run being continued "
        "or the init_checkpoint (a sentence-embeddings run or sentence-transformers "
        "folder) says; else mean.", choices=POOLING_MODES)
    normalize: Optional[bool] = option(
        None, "L2-normalize the vector (cosine similarity is then a dot product). "
        "Default: as the run being continued or the init_checkpoint says; else false.")


@dataclasses.dataclass(kw_only=True)
class SentenceLoss(OptionGroup):
    """The training objective."""
    loss: Optional[str] = option(
        None, "cosent or cosine_mse (pairs with scores), multiple_negatives_ranking or "
        "multiple_negatives_symmetric_ranking (in-batch negatives: pairs, or triplets "
        "with --negative_column as hard negatives). Default: cosent when the train file "
        "has --score_column, else multiple_negatives_ranking.", choices=losses.LOSSES)
    similarity_scale: float = option(
        losses.DEFAULT_SCALE, "cosent and in-batch negatives: the cosine similarities "
        "are multiplied by this (sentence-transformers' scale, 20).")

    def check(self) -> None:
        if not (isinstance(self.similarity_scale, (int, float))
                and 0 < self.similarity_scale < math.inf):
            raise ValueError(f"similarity_scale must be a positive number, got "
                             f"{self.similarity_scale}")


@dataclasses.dataclass(kw_only=True)
class SentencePairData(OptionGroup):
    """The columns of the pair files and the range of their scores."""
    sentence1_column: str = option("sentence1", "Column (JSONL key) of the first text "
                                   "(the anchor of in-batch negatives).")
    sentence2_column: str = option("sentence2", "Column of the second text (the positive).")
    negative_column: Optional[str] = option(
        None, "Column of a hard negative (triplets; in-batch-negative losses only).")
    score_column: str = option("score", "Column of the gold similarity score of a pair.")
    min_score: float = option(0.0, "Lowest score a file may hold (STS-B: 0).")
    max_score: float = option(5.0, "Highest score a file may hold (STS-B: 5); the losses "
                                   "see (score - min_score) / (max_score - min_score).")

    def check(self) -> None:
        for name in ("sentence1_column", "sentence2_column", "score_column"):
            if not getattr(self, name):
                raise ValueError(f"{name} must name a column")
        if not (math.isfinite(self.min_score) and math.isfinite(self.max_score)
                and self.min_score < self.max_score):
            raise ValueError(f"max_score={self.max_score} must be a number above "
                             f"min_score={self.min_score}")


@dataclasses.dataclass(kw_only=True)
class RetrievalData(OptionGroup):
    """A retrieval set scored with the dev data."""
    retrieval_dir: Optional[str] = option(
        None, "do_eval: also score retrieval on this BEIR-layout folder (corpus.jsonl, "
        "queries.jsonl, qrels/<split>.tsv): MRR@10, Recall@k, nDCG@10.")
    retrieval_split: str = option("test", "The qrels file of --retrieval_dir: "
                                          "qrels/<split>.tsv.")


def check_in_batch_negatives(options) -> None:
    """Refuses in-batch negatives on batches of one pair (each anchor's only candidate
    would be its own positive: nothing to learn)."""
    micro_batch = options.train_batch_size // max(1, options.gradient_accumulation_steps)
    if options.do_train and options.loss in IN_BATCH_LOSSES and micro_batch < 2:
        raise ValueError(f"train_batch_size={options.train_batch_size} (micro-batches of "
                         f"{micro_batch}): --loss={options.loss} ranks each anchor against "
                         "the other pairs of its batch; use batches of at least 2 pairs")


def check_packing(options) -> None:
    """Refuses --pack_sequences where a batch's varying number of packed rows cannot go:
    static shapes (TPU, XLA) and micro-batches (a batch splits by rows)."""
    if not (options.do_train and options.pack_sequences):
        return
    if options.distribution_strategy == "tpu" or options.use_xla:
        raise ValueError("--pack_sequences packs each batch into as many rows as its texts "
                         "need, a shape that changes from batch to batch: leave it out "
                         "with --use_xla or --distribution_strategy=tpu (static shapes)")
    if options.gradient_accumulation_steps > 1:
        raise ValueError(f"--pack_sequences with gradient_accumulation_steps="
                         f"{options.gradient_accumulation_steps}: a packed batch cannot "
                         "split into micro-batches; leave one of them out")


SentenceEmbeddingOptions = compose(
    "SentenceEmbeddingOptions", RUN, TrainStep, EvalStep, TRAINING_LOOP, groups.TOKENIZER,
    PredictStep, EpochSchedule, groups.ExportDir, TrainingEvaluation, TrimPadding,
    SentenceModel, SentenceLoss, SentencePairData, groups.DataDir, groups.SplitFiles,
    groups.EvalFile, RetrievalData, Packing,
    defaults={"max_sequences_per_row": 8, "train_batch_size": 16, "learning_rate": 2e-5, "num_train_epochs": 4.0,
              "eval_batch_size": 32, "predict_batch_size": 32},
    helps={"data_dir": "Folder with train / dev / test .tsv, .csv or .jsonl files (GLUE "
                       "STS-B's folder as it is).",
           "train_file": "Training pairs or triplets (overrides data_dir).",
           "eval_file": "Dev pairs with scores (overrides data_dir).",
           "predict_file": "Pairs whose cosine similarity to write (overrides data_dir); "
                           "with scores, scored too.",
           "max_seq_length": "Sub-tokens of each text's row, [CLS] text [SEP].",
           "pack_sequences": "Pack each training batch's texts into rows of up to "
                             "--max_sequences_per_row texts (best fit; each text attends "
                             "only to itself): the same texts, loss and steps, less "
                             "padding. Not with --use_xla / TPU or gradient accumulation. "
                             "Evaluation and encoding stay unpacked.",
           "max_sequences_per_row": "With --pack_sequences: at most this many texts share "
                                    "a row (>= 1)."},
    checks=(check_micro_batches, check_in_batch_negatives, check_packing,
            column_roles.check_columns_apart),
    doc="Fine-tuning options plus the sentence model, the loss and the pair files.")


def resolve_model(options):
    """`options` with `pooling` and `normalize` set: where not given, as the run being
    continued in output_dir says, else the init_checkpoint (a sentence-embeddings run or
    a sentence-transformers folder), else mean pooling, not normalized. Fine-tuning may
    change either (unlike bert-encode, which serves a model as trained)."""
    if options.pooling is not None and options.normalize is not None:
        return options
    said = serving.ModelSettings(weights="")
    for path in (options.output_dir, options.init_checkpoint):
        said = serving.model_settings(path) if path else said
        if said.pooling is not None or said.normalize is not None:
            break
    values = {"pooling": options.pooling or said.pooling or serving.DEFAULT_POOLING,
              "normalize": bool(said.normalize if options.normalize is None
                                else options.normalize)}
    if said.pooling is not None or said.normalize is not None:
        logging.info("Sentence model as %s says: %s pooling%s", said.source,
                     values["pooling"], ", normalized" if values["normalize"] else "")
    return dataclasses.replace(options, **values)


def split_file(options, split: str, required: bool = True) -> Optional[str]:
    """The file of `split`: its flag, else found in data_dir (None when not `required`
    and there is none)."""
    explicit = getattr(options, f"{split}_file")
    if explicit:
        if not os.path.isfile(explicit):
            raise FileNotFoundError(f"{split}_file not found: {explicit}")
        return explicit
    if not required and not options.data_dir:
        return None
    try:
        return pair_data.find_file(options.data_dir, split)
    except FileNotFoundError:
        if required:
            raise
        return None


def has_column(path: str, column: Optional[str]) -> bool:
    """Whether the first row of `path` holds `column`."""
    for _, record in text_files.read_records(path):
        return bool(column) and column in record
    return False


class SentenceEmbeddingTask(Task):
    """A sentence encoder trained on pairs (scored, or with in-batch negatives)."""
    name = "sentence_embeddings"
    command = "sentence_embeddings"
    model_type = "sentence_encoder"

    def __init__(self, options):
        super().__init__(resolve_model(options))
        self.data = {}  # split -> PairData
        self.retrieval = None  # evaluation.RetrievalSet
        self.loss_name = options.loss

    @property
    def columns(self) -> pair_data.Columns:
        options = self.options
        return pair_data.Columns(options.sentence1_column, options.sentence2_column,
                                 options.negative_column, options.score_column,
                                 options.min_score, options.max_score)

    def check_inputs(self):
        """Refuses missing files before any work."""
        options = self.options
        if options.do_train:
            split_file(options, "train")
        if options.do_eval:
            if split_file(options, "eval", required=not options.retrieval_dir) is None \
                    and not options.retrieval_dir:
                raise ValueError("do_eval needs dev pairs with scores (--eval_file or "
                                 "--data_dir) or --retrieval_dir")
        if options.do_predict:
            split_file(options, "predict")

    def setup(self, context):
        """Reads and checks every file the run uses, before any work."""
        super().setup(context)
        options = self.options
        if options.do_train:
            self._read_train()
        if options.do_eval:
            path = split_file(options, "eval", required=not options.retrieval_dir)
            if path:
                self.data["eval"] = pair_data.read_pairs(path, self.columns, True)
            if options.retrieval_dir:
                self.retrieval = evaluation.read_beir(options.retrieval_dir,
                                                      options.retrieval_split)
                logging.info("retrieval: %d queries over %d documents from %s",
                             len(self.retrieval.query_ids), len(self.retrieval.corpus_ids),
                             options.retrieval_dir)
        if options.do_predict:
            path = split_file(options, "predict")
            self.data["predict"] = pair_data.read_pairs(
                path, self.columns, has_column(path, options.score_column))
        for split, rows in self.data.items():
            logging.info("%s: %d rows of %d texts from %s", split, len(rows.texts),
                         rows.texts_per_row, rows.path)

    def _read_train(self):
        """The training rows, and the loss they take (refusing rows it cannot)."""
        options = self.options
        path = split_file(options, "train")
        scored = has_column(path, options.score_column)
        if self.loss_name is None:
            self.loss_name = ("cosent" if scored and not options.negative_column
                              else "multiple_negatives_ranking")
        in_batch = self.loss_name in IN_BATCH_LOSSES
        if options.negative_column and not in_batch:
            raise ValueError(f"--negative_column={options.negative_column}: hard negatives "
                             f"are for in-batch-negative losses, not --loss={self.loss_name}")
        check_in_batch_negatives(dataclasses.replace(options, loss=self.loss_name))
        self.data["train"] = pair_data.read_pairs(
            path, self.columns, with_scores=not in_batch,
            with_negatives=bool(options.negative_column))
        logging.info("Training loss: %s", self.loss_name)

    def build_model(self):
        return SentenceEncoder(BertEncoder(self.context.config), pooling=self.options.pooling,
                               normalize=self.options.normalize)

    def loss(self, features, outputs):
        return losses.sentence_loss(self.loss_name, outputs["embedding"],
                                    self.data["train"].texts_per_row, features.get("scores"),
                                    self.options.similarity_scale)

    def train_data(self):
        options = self.options
        rows = self.data["train"]
        arrays = pair_data.encode_rows(rows, self.context.tokenizer, options.max_seq_length)

        def dataset_fn(input_context):
            return pair_data.pairs_dataset(
                arrays, options.train_batch_size, True, seed=options.seed,
                input_context=input_context, trim_padding=options.use_trim_padding,
                max_sequences_per_row=(options.max_sequences_per_row
                                       if options.pack_sequences else None))
        return TrainData(dataset_fn, len(rows.texts), options.train_batch_size)

    def metric_names(self):
        """What `evaluate("eval", ...)` scores (what `best_metric` may name)."""
        names = ["spearman", "pearson"] if "eval" in self.data else []
        if self.retrieval is not None:
            names += ["mrr_at_10", "ndcg_at_10"] + [
                f"recall_at_{k}" for k in self.retrieval.recall_ks()]
        return [f"{self.result_names['eval']}_{name}" for name in names]

    def embed(self, texts, batch_size, runner) -> np.ndarray:
        """float32 [N, H] embeddings of `texts` (each distinct text encoded once, in
        batches of similar lengths)."""
        unique = list(dict.fromkeys(texts))
        arrays = pair_data.text_features(unique, self.context.tokenizer,
                                        self.options.max_seq_length)
        order = np.argsort(arrays["input_mask"].sum(axis=1), kind="stable")
        arrays = {name: values[order] for name, values in arrays.items()}

        def dataset_fn(input_context):
            return pair_data.texts_dataset(arrays, batch_size, input_context,
                                           trim_padding=self.options.use_trim_padding)
        # Its rows are texts, not the split's examples (pairs, queries): said so.
        outputs = runner.predict(dataset_fn, output_key="embedding", keys=("text_index",),
                                 num_examples=len(unique), unit="distinct texts")
        vectors = np.zeros((len(unique), outputs["embedding"].shape[-1]), np.float32)
        real = outputs["text_index"] >= 0  # not the padding of whole steps
        vectors[order[outputs["text_index"][real]]] = outputs["embedding"][real]
        index = {text: position for position, text in enumerate(unique)}
        return vectors[[index[text] for text in texts]]

    def evaluate(self, split, runner):
        """Scores `split`'s pairs (and, for eval, the retrieval set); writes
        `<name>_predictions.tsv`."""
        name = self.result_names[split]
        batch_size = (self.options.eval_batch_size if split == "eval"
                      else self.options.predict_batch_size)
        results = {}
        rows = self.data.get(split)
        if rows is not None:
            logging.info("%s: %d pairs of %s", runner.phase, len(rows.texts), rows.path)
            vectors = self.embed([text for row in rows.texts for text in row[:2]],
                                 batch_size, runner)
            cosines = evaluation.cosine_similarities(vectors[0::2], vectors[1::2])
            path = os.path.join(self.options.output_dir, f"{name}_predictions.tsv")
            evaluation.write_similarities(path, rows, cosines)
            logging.info("Wrote %s (%d pairs)", path, len(cosines))
            if rows.raw_scores is not None:
                results.update({f"{name}_{key}": value for key, value in
                                evaluation.similarity_scores(vectors[0::2], vectors[1::2],
                                                             rows.raw_scores).items()})
                results[f"{name}_examples"] = len(cosines)
        if split == "eval" and self.retrieval is not None:
            retrieval = self.retrieval
            queries = self.embed(retrieval.query_texts, batch_size, runner)
            corpus = self.embed(retrieval.corpus_texts, batch_size, runner)
            results.update({f"{name}_{key}": value for key, value in
                            evaluation.retrieval_scores(retrieval, queries, corpus).items()})
        return results


def run(options, strategy=None) -> dict:
    """Runs do_train / do_eval / do_predict; returns the scores."""
    return driver.run(SentenceEmbeddingTask(options), strategy)
