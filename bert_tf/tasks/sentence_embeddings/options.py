"""The options of sentence embeddings (bert-train --task=sentence_embeddings) and of
bert-encode, without TensorFlow: a command's `--help` reads them alone; the task
(`task.py`) and the encoding (`encode.py`) load when they run.
"""

import dataclasses
import math
from typing import Optional

from bert_tf.options import OptionGroup, compose, option
from bert_tf.runs import column_roles
from bert_tf.runs import option_groups as groups
from bert_tf.runs.options import (RUN, TRAINING_LOOP, EpochSchedule, EvalStep, Packing,
                                  PredictStep, TrainingEvaluation, TrainStep, TrimPadding,
                                  check_micro_batches)

# The losses (`losses`): of scored pairs, and of in-batch negatives.
LOSSES = ("cosent", "cosine_mse", "multiple_negatives_ranking",
          "multiple_negatives_symmetric_ranking")
SCORED_LOSSES = ("cosent", "cosine_mse")  # the losses of pairs with gold scores
DEFAULT_SCALE = 20.0
# How the token outputs become one vector (`model.pool_tokens`): the mean or the max over
# the real tokens (input_mask), or the first token's output ([CLS], without BERT's pooler).
POOLING_MODES = ("mean", "cls", "max")

IN_BATCH_LOSSES = tuple(name for name in LOSSES if name not in SCORED_LOSSES)


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
        "has --score_column, else multiple_negatives_ranking.", choices=LOSSES)
    similarity_scale: float = option(
        DEFAULT_SCALE, "cosent and in-batch negatives: the cosine similarities "
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


LONG_TEXT_MODES = ("truncate", "windows")


@dataclasses.dataclass(kw_only=True)
class LongTexts(OptionGroup):
    """How texts longer than a row become model rows."""
    long_text: str = option(
        "truncate", "A text longer than max_seq_length: truncate (cut to it) or windows "
        "(windows doc_stride tokens apart, their vectors averaged weighted by their token "
        "counts, then normalized when the model normalizes).", choices=LONG_TEXT_MODES)


def check_windows(options) -> None:
    """Refuses --doc_stride without --long_text=windows."""
    if options.doc_stride is not None and options.long_text != "windows":
        raise ValueError(f"--doc_stride={options.doc_stride} spaces the windows of "
                         "--long_text=windows; with --long_text=truncate leave it out")


EncodeOptions = compose(
    "EncodeOptions", groups.InputFile, groups.OutputFile, groups.RecordColumns,
    groups.ModelBatch, LongTexts,
    SentenceModel, groups.MODEL_SOURCE, groups.TOKENIZER, groups.SequenceLength,
    groups.DocStride,
    # None: as the model at init_checkpoint says (its run / sentence-transformers folder).
    defaults={"pooling": None, "normalize": None, "do_lower_case": None,
              "max_seq_length": None},
    helps={"text_column": "A .tsv/.csv file (with a header): the column of the texts; a "
                          ".jsonl file: the field. Other files: one text a line (no column).",
           "id_column": "The column / field of each text's id, written to the .jsonl "
                        "output (default: the text's 0-based position, its row in the .npy).",
           "batch_size": "Rows per model call (sorted by length, each batch padded to its "
                         "longest row).",
           "input_file": "The text file: one text a line, or a .tsv/.csv/.jsonl file "
                         "with --text_column.",
           "output_file": "Where the vectors go: a .npy (float32 [N, H]) and / or a "
                          ".jsonl ({\"id\", \"embedding\"} a line), comma-separated.",
           "init_checkpoint": "The model: a sentence-embeddings run folder, any run's "
                              "encoder, a google-research, Hugging Face or "
                              "sentence-transformers folder.",
           "pooling": "mean, max or cls (default: as the run or sentence-transformers "
                      "folder says; else mean).",
           "normalize": "L2-normalize the vectors (default: as the run or "
                        "sentence-transformers folder says; else false).",
           "do_lower_case": "Lower-case the input and strip accents (default: as the "
                            "model was trained; else true).",
           "max_seq_length": "Tokens per model row, [CLS] and [SEP] included (default: "
                             "the run's or the sentence-transformers folder's; else 128, "
                             "or the model's max_position_embeddings when fewer).",
           "doc_stride": "--long_text=windows: tokens between the starts of a text's "
                         "windows (default: half a window)."},
    checks=(check_windows, column_roles.check_columns_apart),
    doc="What bert-encode reads and writes (see each field's help).")
