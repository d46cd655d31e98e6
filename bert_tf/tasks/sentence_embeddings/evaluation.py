"""Scoring sentence embeddings: similarity against gold scores, and retrieval.

- `similarity_scores(first, second, gold)`: Pearson and Spearman correlation of the
  cosine similarity of each pair with its gold score (as sentence-transformers'
  EmbeddingSimilarityEvaluator, its "cosine" rows). Spearman is the Pearson correlation
  of the ranks, tied values getting the mean of their ranks (as scipy.stats.spearmanr).
- `read_beir(folder, split)` reads a retrieval set in the BEIR layout: `corpus.jsonl`
  (`_id`, `title`, `text`), `queries.jsonl` (`_id`, `text`), `qrels/<split>.tsv` (a
  header, then `query-id`, `corpus-id`, `score` per line). A document's text is its title
  and text joined by a space. A judgement with score > 0 is relevant.
- `retrieval_scores(...)`: every query ranks the whole corpus by cosine similarity;
  MRR@10 (1 / the rank of the first relevant document within 10, else 0), Recall@k
  (relevant documents within k / relevant documents) for k = 1, 5, 10, 100 up to the
  corpus size, and nDCG@10 (gain = the judgement's score, discount log2(rank + 1),
  divided by the ideal ordering's), each averaged over the queries that have a relevant
  document (as BEIR and sentence-transformers' InformationRetrievalEvaluator count).
"""

import dataclasses
import json
import os

import numpy as np

from bert_tf.io import fileio
from bert_tf.runs import text_files

RECALL_KS = (1, 5, 10, 100)
MRR_K = NDCG_K = 10


def average_ranks(values) -> np.ndarray:
    """1-based ranks of `values` [N], ties sharing the mean of their ranks."""
    values = np.asarray(values, np.float64)
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), np.float64)
    sorted_values = values[order]
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        ranks[order[start:end + 1]] = (start + end) / 2.0 + 1.0
        start = end + 1
    return ranks


def pearson(x, y) -> float:
    """Pearson correlation of two [N] arrays (0 when either is constant)."""
    x = np.asarray(x, np.float64) - np.mean(x)
    y = np.asarray(y, np.float64) - np.mean(y)
    denominator = np.sqrt(np.sum(x * x) * np.sum(y * y))
    return float(np.sum(x * y) / denominator) if denominator > 0 else 0.0


def spearman(x, y) -> float:
    """Spearman rank correlation (ties: average ranks)."""
    return pearson(average_ranks(x), average_ranks(y))


def cosine_similarities(first, second) -> np.ndarray:
    """Cosine similarity of row i of `first` with row i of `second`: float64 [N]."""
    first = np.asarray(first, np.float64)
    second = np.asarray(second, np.float64)
    norms = np.linalg.norm(first, axis=1) * np.linalg.norm(second, axis=1)
    return np.sum(first * second, axis=1) / np.maximum(norms, 1e-12)


def similarity_scores(first, second, gold) -> dict:
    """{"pearson", "spearman"} of the pairs' cosine similarities against `gold` [N]."""
    cosines = cosine_similarities(first, second)
    return {"pearson": pearson(cosines, gold), "spearman": spearman(cosines, gold)}


@dataclasses.dataclass
class RetrievalSet:
    """A BEIR-layout set: documents and queries (ids and texts), and the relevance
    judgements {query id: {document id: score}} of the queries that have a relevant
    document."""
    corpus_ids: list
    corpus_texts: list
    query_ids: list
    query_texts: list
    qrels: dict

    def recall_ks(self) -> list:
        """The k of Recall@k: those of `RECALL_KS` up to the corpus size (1 at least)."""
        return [k for k in RECALL_KS if k <= len(self.corpus_ids)] or [1]


def _jsonl_texts(path, fields):
    """(ids, texts) of a BEIR jsonl file: `_id` and `fields` joined by a space."""
    ids, texts, seen = [], [], {}
    for line_number, record in text_files.read_records(path):
        source = f"{path}:{line_number}"
        identifier = record.get("_id")
        if isinstance(identifier, bool) or not isinstance(identifier, (str, int)) or \
                not str(identifier).strip():
            raise ValueError(f"{source}: no \"_id\" (a string); every line needs one")
        identifier = str(identifier)
        if identifier in seen:
            raise ValueError(f"{source}: _id {identifier!r} is also the id of line "
                             f"{seen[identifier]}")
        parts = []
        for field in fields:
            value = record.get(field)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{source}: {field!r} holds {text_files.json_type(value)}; "
                                 "expected a string")
            parts.append((value or "").strip())
        text = " ".join(part for part in parts if part)
        if not text:
            raise ValueError(f"{source}: empty text (keys {', '.join(fields)}); every line "
                             "needs one")
        seen[identifier] = line_number
        ids.append(identifier)
        texts.append(text)
    if not ids:
        raise ValueError(f"{path}: no lines")
    return ids, texts


def _read_qrels(path, query_ids, corpus_ids) -> dict:
    """{query id: {document id: score}} of a qrels TSV (header first), refusing ids not
    in the queries or the corpus, naming file and line."""
    queries, documents = set(query_ids), set(corpus_ids)
    qrels = {}
    for line_number, fields in text_files.read_tsv(path, header=True):
        source = f"{path}:{line_number}"
        if len(fields) < 3:
            raise ValueError(f"{source}: {len(fields)} columns; expected query-id, "
                             "corpus-id, score")
        query, document = fields[0].strip(), fields[1].strip()
        score = text_files.parse_float(fields[2], path, line_number, "score")
        if query not in queries:
            raise ValueError(f"{source}: query-id {query!r} is not in queries.jsonl")
        if document not in documents:
            raise ValueError(f"{source}: corpus-id {document!r} is not in corpus.jsonl")
        if score > 0:
            qrels.setdefault(query, {})[document] = score
    if not qrels:
        raise ValueError(f"{path}: no judgement with a score above 0; no query to score")
    return qrels


def read_beir(folder: str, split: str = "test") -> RetrievalSet:
    """The BEIR-layout set in `folder` (see the module docstring); the queries kept are
    those with a relevant document in `qrels/<split>.tsv`, in queries.jsonl's order.

    Raises:
      FileNotFoundError / ValueError: naming the missing file, or file and line.
    """
    paths = {name: os.path.join(folder, name) for name in
             ("corpus.jsonl", "queries.jsonl", os.path.join("qrels", f"{split}.tsv"))}
    for path in paths.values():
        if not os.path.isfile(path):
            raise FileNotFoundError(f"retrieval_dir {folder}: no {path} (a BEIR folder "
                                    "holds corpus.jsonl, queries.jsonl and qrels/<split>.tsv)")
    corpus_ids, corpus_texts = _jsonl_texts(paths["corpus.jsonl"], ("title", "text"))
    query_ids, query_texts = _jsonl_texts(paths["queries.jsonl"], ("text",))
    qrels = _read_qrels(paths[os.path.join("qrels", f"{split}.tsv")], query_ids, corpus_ids)
    kept = [index for index, query in enumerate(query_ids) if query in qrels]
    return RetrievalSet(corpus_ids, corpus_texts, [query_ids[i] for i in kept],
                        [query_texts[i] for i in kept], qrels)


def top_documents(queries, documents, k, chunk=256) -> np.ndarray:
    """The indexes [Q, k] of each query's k most cosine-similar documents, best first
    (ties: the earlier document)."""
    queries = np.asarray(queries, np.float64)
    documents = np.asarray(documents, np.float64)
    queries = queries / np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), 1e-12)
    documents = documents / np.maximum(np.linalg.norm(documents, axis=1, keepdims=True),
                                       1e-12)
    k = min(k, len(documents))
    ranked = []
    for start in range(0, len(queries), chunk):
        similarities = queries[start:start + chunk] @ documents.T  # [q, D]
        order = np.argsort(-similarities, axis=1, kind="stable")[:, :k]
        ranked.append(order)
    return np.concatenate(ranked) if ranked else np.zeros((0, k), np.int64)


def ranking_scores(ranked_ids, relevant: dict, recall_ks) -> dict:
    """MRR@10, Recall@k, nDCG@10 of one query: `ranked_ids` its documents best first,
    `relevant` {document id: score > 0}."""
    scores = {"mrr_at_10": 0.0}
    for rank, document in enumerate(ranked_ids[:MRR_K], start=1):
        if document in relevant:
            scores["mrr_at_10"] = 1.0 / rank
            break
    for k in recall_ks:
        found = sum(1 for document in ranked_ids[:k] if document in relevant)
        scores[f"recall_at_{k}"] = found / len(relevant)
    gains = [relevant.get(document, 0.0) for document in ranked_ids[:NDCG_K]]
    ideal = sorted(relevant.values(), reverse=True)[:NDCG_K]
    discount = lambda values: sum(value / np.log2(rank + 1)  # noqa: E731
                                  for rank, value in enumerate(values, start=1))
    scores["ndcg_at_10"] = discount(gains) / discount(ideal)
    return scores


def retrieval_scores(retrieval: RetrievalSet, query_embeddings, corpus_embeddings) -> dict:
    """Mean MRR@10, Recall@k and nDCG@10 over the set's queries, plus `queries` and
    `corpus` (their counts)."""
    ks = retrieval.recall_ks()
    depth = max(ks + [MRR_K, NDCG_K])
    ranked = top_documents(query_embeddings, corpus_embeddings, depth)
    totals = {}
    for query, order in zip(retrieval.query_ids, ranked):
        ids = [retrieval.corpus_ids[index] for index in order]
        for name, value in ranking_scores(ids, retrieval.qrels[query], ks).items():
            totals[name] = totals.get(name, 0.0) + value
    count = len(retrieval.query_ids)
    results = {name: value / count for name, value in totals.items()}
    results.update(queries=count, corpus=len(retrieval.corpus_ids))
    return results


def write_similarities(path, data, cosines) -> None:
    """`<name>_predictions.tsv`: `index`, `cosine` and, when known, `score` per pair."""
    scored = data.raw_scores is not None
    lines = ["index\tcosine" + ("\tscore" if scored else "") + "\n"]
    for index, cosine in enumerate(cosines):
        gold = f"\t{data.raw_scores[index]:g}" if scored else ""
        lines.append(f"{index}\t{cosine:.6f}{gold}\n")
    fileio.write_text_atomic(path, "".join(lines))


def write_json(path, value) -> None:
    fileio.write_text_atomic(path, json.dumps(value, indent=1) + "\n")
