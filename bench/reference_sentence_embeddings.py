"""The reference side of sentence_embeddings_check.py: sentence-transformers (PyTorch,
CPU) evaluating, and training, the same weights with the same recipe.

The model is built from a plain Hugging Face BERT folder (what `bert-export-model
--export_format=huggingface --model_type=encoder` writes from the shared google-research
checkpoint) as all-MiniLM-L6-v2 is: `models.Transformer(path, max_seq_length)`, mean
`models.Pooling`, `models.Normalize()`. Evaluation: `EmbeddingSimilarityEvaluator` on
the dev pairs (its `spearman_cosine` / `pearson_cosine`) and, with `--retrieval_dir`,
`InformationRetrievalEvaluator` on a BEIR folder (cosine MRR@10, nDCG@10, Recall@k).
Training: sentence-transformers' own loop, `SentenceTransformer.old_fit` (the pre-v3
`fit`, still shipped: the v3+ `fit` / `SentenceTransformerTrainer` need the `datasets`
and `accelerate` packages, which this venv does not have): a shuffled `DataLoader` of
`InputExample`s, `losses.CoSENTLoss` or `losses.MultipleNegativesRankingLoss` (scale
`--scale`), torch AdamW with weight decay on all but bias and LayerNorm, linear warm-up
then linear decay to 0, gradient clipping at 1.0.

Run with a Python that has sentence-transformers (a bench dependency, never a package
one):

    .venv/bin/python bench/reference_sentence_embeddings.py --model_dir=WORK/hf \
        --dev_file=WORK/dev.jsonl --train_file=WORK/stsb_train.jsonl --loss=cosent \
        --seed=1 --output=WORK/reference_cosent_1.json

Files are JSONL with `sentence1`, `sentence2` and (scored pairs) `score`, already
normalized to 0 .. 1 for training. Writes one JSON object to `--output`.
"""

import argparse
import json
import os
import time

import torch
import transformers
from sentence_transformers import InputExample, SentenceTransformer
from sentence_transformers.sentence_transformer import losses
from sentence_transformers.sentence_transformer import modules as models
from sentence_transformers.sentence_transformer.evaluation import (
    EmbeddingSimilarityEvaluator, InformationRetrievalEvaluator)
from torch.utils.data import DataLoader


def read_jsonl(path):
    with open(path, encoding="utf-8") as file:
        return [json.loads(line) for line in file if line.strip()]


def build_model(model_dir, max_seq_length):
    transformer = models.Transformer(model_dir, max_seq_length=max_seq_length)
    pooling = models.Pooling(transformer.get_embedding_dimension(), "mean")
    return SentenceTransformer(modules=[transformer, pooling, models.Normalize()],
                               device="cpu")


def evaluate(model, args):
    """EmbeddingSimilarityEvaluator's {spearman, pearson} (cosine) on the dev pairs, and
    with `--cosines` each pair's cosine."""
    dev = read_jsonl(args.dev_file)
    evaluator = EmbeddingSimilarityEvaluator(
        [row["sentence1"] for row in dev], [row["sentence2"] for row in dev],
        [float(row["score"]) for row in dev], batch_size=args.eval_batch_size,
        name="dev", write_csv=False)
    scores = evaluator(model)
    result = {"spearman": float(scores["dev_spearman_cosine"]),
              "pearson": float(scores["dev_pearson_cosine"])}
    if not args.cosines:
        return result
    first = model.encode([row["sentence1"] for row in dev], batch_size=args.eval_batch_size,
                         convert_to_tensor=True)
    second = model.encode([row["sentence2"] for row in dev], batch_size=args.eval_batch_size,
                          convert_to_tensor=True)
    result["cosines"] = torch.nn.functional.cosine_similarity(first, second).tolist()
    return result


def evaluate_retrieval(model, args):
    """{mrr_at_10, ndcg_at_10, recall_at_1, recall_at_10} of InformationRetrievalEvaluator."""
    result = {}
    if args.retrieval_dir:
        corpus = {row["_id"]: row["text"] for row in
                  read_jsonl(os.path.join(args.retrieval_dir, "corpus.jsonl"))}
        queries = {row["_id"]: row["text"] for row in
                   read_jsonl(os.path.join(args.retrieval_dir, "queries.jsonl"))}
        relevant = {}
        with open(os.path.join(args.retrieval_dir, "qrels", "test.tsv"),
                  encoding="utf-8") as file:
            next(file)
            for line in file:
                query, document, score = line.rstrip("\n").split("\t")
                if int(score) > 0:
                    relevant.setdefault(query, set()).add(document)
        queries = {key: text for key, text in queries.items() if key in relevant}
        retrieval = InformationRetrievalEvaluator(
            queries, corpus, relevant, mrr_at_k=[10], ndcg_at_k=[10], accuracy_at_k=[1],
            precision_recall_at_k=[1, 10], map_at_k=[10], batch_size=args.eval_batch_size,
            name="ir", write_csv=False)
        scores = retrieval(model)
        result.update(mrr_at_10=float(scores["ir_cosine_mrr@10"]),
                      ndcg_at_10=float(scores["ir_cosine_ndcg@10"]),
                      recall_at_1=float(scores["ir_cosine_recall@1"]),
                      recall_at_10=float(scores["ir_cosine_recall@10"]))
    return result


def train(model, args):
    """Trains `model` in place with sentence-transformers' loop; returns the step count."""
    rows = read_jsonl(args.train_file)
    if args.loss == "cosent":
        examples = [InputExample(texts=[row["sentence1"], row["sentence2"]],
                                 label=float(row["score"])) for row in rows]
        loss = losses.CoSENTLoss(model, scale=args.scale)
    else:
        examples = [InputExample(texts=[row["sentence1"], row["sentence2"]]) for row in rows]
        loss = losses.MultipleNegativesRankingLoss(model, scale=args.scale)
    loader = DataLoader(examples, shuffle=True, batch_size=args.batch_size, drop_last=True)
    # Steps and warm-up counted as ours (bert_tf.runs.task.Task.schedule): int(N / B *
    # epochs) steps (full batches only, as our input pipeline), int(10%) warm-up steps.
    total = max(1, int(len(examples) / args.batch_size * args.epochs))
    if args.epochs > 1 and args.epochs != int(args.epochs):
        raise SystemExit("--epochs: a whole number, or at most 1")
    epochs = max(1, int(args.epochs))
    model.old_fit(train_objectives=[(loader, loss)], epochs=epochs,
                  steps_per_epoch=total // epochs, scheduler="WarmupLinear",
                  warmup_steps=int(args.warmup_proportion * total),
                  optimizer_params={"lr": args.learning_rate, "eps": args.adam_epsilon},
                  weight_decay=args.weight_decay, max_grad_norm=1.0,
                  show_progress_bar=False)
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--model_dir", required=True, help="a Hugging Face BERT folder")
    parser.add_argument("--dev_file", required=True, help="JSONL dev pairs with score")
    parser.add_argument("--retrieval_dir", default=None, help="a BEIR folder (qrels/test)")
    parser.add_argument("--train_file", default=None, help="JSONL training pairs")
    parser.add_argument("--loss", default="none", choices=["none", "cosent", "mnrl"])
    parser.add_argument("--output", required=True, help="JSON file to write")
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--learning_rate", type=float, default=2e-5)
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--warmup_proportion", type=float, default=0.1)
    parser.add_argument("--weight_decay", type=float, default=0.01)
    parser.add_argument("--adam_epsilon", type=float, default=1e-6)
    parser.add_argument("--scale", type=float, default=20.0)
    parser.add_argument("--eval_batch_size", type=int, default=64)
    parser.add_argument("--cosines", action="store_true",
                        help="also return each dev pair's cosine (one more encoding)")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    transformers.set_seed(args.seed)
    model = build_model(args.model_dir, args.max_seq_length)
    result = {"max_seq_length": model.max_seq_length, "seed": args.seed, "loss": args.loss,
              "sentence_transformers": __import__("sentence_transformers").__version__,
              "torch": torch.__version__}
    started = time.time()
    if args.loss != "none":
        result["steps"] = train(model, args)
    result["train_seconds"] = time.time() - started
    result.update(evaluate(model, args))
    result.update(evaluate_retrieval(model, args))
    result["seconds"] = time.time() - started
    with open(args.output, "w", encoding="utf-8") as file:
        json.dump(result, file)


if __name__ == "__main__":
    main()
