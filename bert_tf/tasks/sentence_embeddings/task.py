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
import os
from typing import Optional

import numpy as np
from absl import logging

from bert_tf.models import BertEncoder
from bert_tf.runs import driver
from bert_tf.runs import text_files
from bert_tf.tasks.sentence_embeddings import data as pair_data
from bert_tf.tasks.sentence_embeddings import evaluation, losses, serving
from bert_tf.tasks.sentence_embeddings.model import SentenceEncoder
from bert_tf.tasks.sentence_embeddings.options import (
    IN_BATCH_LOSSES, check_in_batch_negatives)
from bert_tf.runs.task import Task, TrainData

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
