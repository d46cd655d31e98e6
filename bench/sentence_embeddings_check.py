"""Real check: sentence embeddings against sentence-transformers on the same weights and
recipe (issue 37, deliverable 5).

    .venv/bin/python bench/sentence_embeddings_check.py --seeds=1,2,3 \\
        --reference_python=.venv/bin/python --output_dir=/tmp/se_check

On a 2-core CPU shared with other work (docs/sentence_embeddings.md, "Sentence embeddings
against sentence-transformers", has the figures): subsets, one thread a side, both
sides of a seed at once:

    .venv/bin/python bench/sentence_embeddings_check.py --parts=cosent,mnrl --seeds=1,2,3 \\
        --train_pairs=2000 --mnrl_pairs=1000 --nomnrl_retrieval --parallel_sides \\
        --threads=1 --reference_python=.venv/bin/python --output_dir=/tmp/se_check

The weights: ../shared/data/checkpoints/uncased_L-6_H-384_A-12 (all-MiniLM-L6-v2's, in
the google-research checkpoint layout). sentence-transformers cannot read that layout,
so it is exported once with `bert-export-model --export_format=huggingface
--model_type=encoder`, and the reference side builds all-MiniLM-L6-v2's module stack on
that folder: `models.Transformer(folder, max_seq_length)`, mean `models.Pooling`,
`models.Normalize()` (bench/reference_sentence_embeddings.py, run by
`--reference_python`). Our side: `bert-train --task=sentence_embeddings`'s library
(`bert_tf.tasks.sentence_embeddings.task.run`), mean pooling, not normalized (cosine is
the same either way).

Parts (`--parts`):

1. `zero_shot`: STS-B dev (1,500 pairs) Spearman / Pearson of cosine, ours against
   sentence-transformers' `EmbeddingSimilarityEvaluator`, and the largest difference of
   a pair's cosine; also the retrieval set below, ours against its
   `InformationRetrievalEvaluator`. Target: equal to 1e-4.
2. `cosent`: fine-tuning with CoSENT (scale 20, scores 0 .. 5 as 0 .. 1) on STS-B train
   (`--train_pairs` of its 5,749 pairs, a random subset drawn with seed 0, the same
   rows on both sides; 0: all), each seed on both sides; STS-B dev Spearman per seed.
3. `mnrl`: in-batch negatives (MultipleNegativesRankingLoss, scale 20) on the positive
   (paraphrase) pairs of GLUE MRPC train (2,474 pairs, `--mnrl_pairs` of them),
   sentence 1 the anchor and sentence 2 its positive; STS-B dev Spearman per seed, and
   retrieval on the held-out MRPC dev set: each of the 279 positive dev pairs'
   sentence 1 is a query whose one relevant document is its sentence 2, among the 403
   distinct sentence-2 texts of MRPC dev's 408 pairs (BEIR layout; MRR@10, nDCG@10, Recall@1/10).

The recipe, both sides: batch 16, AdamW lr 2e-5, eps 1e-6, weight decay 0.01 (not bias
and LayerNorm), `--epochs` 1, int(N / 16 * epochs) full batches, int(10%) of them linear
warm-up then linear decay to 0, clip 1.0, dropout 0.1, max_seq_length 128. The
reference trains with sentence-transformers' own loop (`SentenceTransformer.old_fit`,
the pre-v3 `fit`: the v3+ trainer needs `datasets` and `accelerate`, not in the venv).
Each side draws its own shuffles and dropout from the seed: the seeds are paired by
number only. Target: our mean inside the reference's seed range.

Writes `<output_dir>/results.json` and `<output_dir>/results.md` (the tables). Not part
of the test suite.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from absl import app, flags, logging

import seed_summary
from bert_tf.runs import text_files
from bert_tf.tasks.sentence_embeddings import data as pair_data
from bert_tf.tasks.sentence_embeddings import task as se_task
from bert_tf.tasks.sentence_embeddings.options import SentenceEmbeddingOptions

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("BERT_TF_SHARED_DATA", os.path.join(REPO, "..", "shared", "data"))
CHECKPOINT = os.path.join(SHARED, "checkpoints", "uncased_L-6_H-384_A-12")
STSB = os.path.join(SHARED, "glue", "STS-B")
MRPC = os.path.join(SHARED, "glue", "MRPC")
PARTS = ("zero_shot", "cosent", "mnrl")
RETRIEVAL_KEYS = ("mrr_at_10", "ndcg_at_10", "recall_at_1", "recall_at_10")

seed_summary.define_recipe_flags(epochs=1.0, seeds="1,2,3")
flags.FLAGS.set_default("batch_size", 16)
flags.FLAGS.set_default("learning_rate", 2e-5)
flags.DEFINE_list("parts", list(PARTS), f"Which comparisons: {', '.join(PARTS)}.")
flags.DEFINE_integer("train_pairs", 0, "cosent: STS-B training pairs (a random subset, "
                     "seed 0; 0: all 5,749).")
flags.DEFINE_integer("mnrl_pairs", 0, "mnrl: MRPC positive training pairs (a random "
                     "subset, seed 0; 0: all 2,474).")
flags.DEFINE_float("scale", 20.0, "CoSENT / in-batch negatives similarity scale.")
flags.DEFINE_integer("eval_batch_size", 64, "Encoding batch size of the evaluation.")
flags.DEFINE_string("reference_python", sys.executable, "A Python with "
                    "sentence-transformers: runs the reference side ('' to leave it out).")
flags.DEFINE_bool("mnrl_retrieval", True, "mnrl: also score the MRPC dev retrieval set "
                  "after training.")
flags.DEFINE_bool("parallel_sides", False, "Run the reference side of a seed while ours "
                  "runs (a shorter wall time on a machine shared with other work; the "
                  "seconds a seed are then not comparable).")
flags.DEFINE_integer("threads", os.cpu_count(), "Threads of both sides (TensorFlow intra- "
                     "and inter-op; torch).")
FLAGS = flags.FLAGS


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as file:
        for row in rows:
            file.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def subset(rows, count):
    """`count` rows drawn at random with seed 0 (kept in file order); all when 0."""
    if not count or count >= len(rows):
        return rows
    keep = np.sort(np.random.RandomState(0).choice(len(rows), count, replace=False))
    return [rows[index] for index in keep]


def naive_tsv_mismatches(path, pairs):
    """Rows where our reader's texts differ from a plain tab split of the file (quoting,
    byte-order marks, CR): 0 expected."""
    with open(path, encoding="utf-8-sig") as file:
        lines = [line.rstrip("\r\n").split("\t") for line in file][1:]
    return sum((line[7], line[8]) != texts for line, texts in zip(lines, pairs.texts)) + abs(
        len(lines) - len(pairs.texts))


def prepare_data(work):
    """The files both sides read; returns their paths and counts."""
    columns = pair_data.Columns()
    dev = pair_data.read_pairs(os.path.join(STSB, "dev.tsv"), columns, True)
    train = pair_data.read_pairs(os.path.join(STSB, "train.tsv"), columns, True)
    mismatches = (naive_tsv_mismatches(os.path.join(STSB, "dev.tsv"), dev)
                  + naive_tsv_mismatches(os.path.join(STSB, "train.tsv"), train))
    files = {"dev_rows": len(dev.texts), "stsb_reader_mismatches": mismatches}
    files["dev"] = write_jsonl(os.path.join(work, "stsb_dev.jsonl"), [
        {"sentence1": a, "sentence2": b, "score": float(s)}
        for (a, b), s in zip(dev.texts, dev.raw_scores)])
    rows = subset(list(zip(train.texts, train.raw_scores, train.scores)), FLAGS.train_pairs)
    files["stsb_train_rows"] = len(rows)
    # Ours reads the 0 .. 5 scores (and normalizes them); the reference gets them / 5.
    files["stsb_train"] = write_jsonl(os.path.join(work, "stsb_train.jsonl"), [
        {"sentence1": a, "sentence2": b, "score": float(raw)} for (a, b), raw, _ in rows])
    files["stsb_train_reference"] = write_jsonl(
        os.path.join(work, "stsb_train_reference.jsonl"),
        [{"sentence1": a, "sentence2": b, "score": float(norm)} for (a, b), _, norm in rows])
    positives = [(record["#1 String"], record["#2 String"]) for _, record in
                 text_files.read_records(os.path.join(MRPC, "train.tsv"))
                 if record["Quality"] == "1"]
    positives = subset(positives, FLAGS.mnrl_pairs)
    files["mnrl_train_rows"] = len(positives)
    files["mnrl_train"] = write_jsonl(os.path.join(work, "mrpc_positive_pairs.jsonl"), [
        {"sentence1": a, "sentence2": b} for a, b in positives])
    files["retrieval"], files["retrieval_queries"], files["retrieval_corpus"] = (
        write_mrpc_retrieval(os.path.join(work, "mrpc_dev_beir")))
    return files


def write_mrpc_retrieval(folder):
    """A BEIR folder of MRPC dev: queries the positive pairs' sentence 1, the corpus the
    distinct sentence-2 texts of all dev pairs, one relevant document a query."""
    os.makedirs(os.path.join(folder, "qrels"), exist_ok=True)
    documents, queries, qrels = {}, [], []
    for _, record in text_files.read_records(os.path.join(MRPC, "dev.tsv")):
        document = documents.setdefault(record["#2 String"], f"d{len(documents)}")
        if record["Quality"] == "1":
            query = f"q{len(queries)}"
            queries.append({"_id": query, "text": record["#1 String"]})
            qrels.append(f"{query}\t{document}\t1\n")
    write_jsonl(os.path.join(folder, "corpus.jsonl"),
                [{"_id": key, "title": "", "text": text} for text, key in documents.items()])
    write_jsonl(os.path.join(folder, "queries.jsonl"), queries)
    with open(os.path.join(folder, "qrels", "test.tsv"), "w", encoding="utf-8") as file:
        file.write("query-id\tcorpus-id\tscore\n" + "".join(qrels))
    return folder, len(queries), len(documents)


def export_reference_weights(work):
    """The shared checkpoint as a Hugging Face BERT folder (for the reference side)."""
    folder = os.path.join(work, "huggingface")
    if not os.path.isfile(os.path.join(folder, "model.safetensors")):
        subprocess.run([os.path.join(os.path.dirname(sys.executable), "bert-export-model"),
                        "--export_format=huggingface", "--model_type=encoder",
                        f"--init_checkpoint={CHECKPOINT}", f"--export_dir={folder}",
                        "--overwrite"], check=True, capture_output=True)
    return folder


def run_ours(work, files, name, seed=None, loss=None):
    """Our side: {spearman, pearson, retrieval metrics, seconds, steps, cosines}."""
    output_dir = os.path.join(work, f"ours_{name}")
    train_file = {"cosent": files["stsb_train"], "mnrl": files["mnrl_train"]}.get(loss)
    options = SentenceEmbeddingOptions(
        init_checkpoint=CHECKPOINT, output_dir=output_dir, data_dir=STSB,
        do_train=loss is not None, do_eval=True, do_lower_case=True,
        train_file=train_file,
        retrieval_dir=(files["retrieval"] if loss is None or (
            loss == "mnrl" and FLAGS.mnrl_retrieval) else None),
        loss={"cosent": "cosent", "mnrl": "multiple_negatives_ranking"}.get(loss),
        similarity_scale=FLAGS.scale, pooling="mean", normalize=False,
        max_seq_length=FLAGS.max_seq_length, train_batch_size=FLAGS.batch_size,
        eval_batch_size=FLAGS.eval_batch_size, learning_rate=FLAGS.learning_rate,
        num_train_epochs=FLAGS.epochs, warmup_proportion=0.1, weight_decay_rate=0.01,
        save_checkpoints_steps=1000000, steps_per_loop=50, seed=seed)
    started = time.time()
    results = se_task.run(options)
    figures = {"seconds": time.time() - started, "steps": results.get("global_step", 0),
               "spearman": float(results["eval_spearman"]),
               "pearson": float(results["eval_pearson"])}
    figures.update({key: float(results[f"eval_{key}"]) for key in RETRIEVAL_KEYS
                    if f"eval_{key}" in results})
    with open(os.path.join(output_dir, "eval_predictions.tsv"), encoding="utf-8") as file:
        figures["cosines"] = [float(line.split("\t")[1]) for line in list(file)[1:]]
    return figures


def start_reference(work, files, hf_folder, name, seed=1, loss=None):
    """Starts the reference side; `finish_reference` waits for its figures (None without
    --reference_python)."""
    if not FLAGS.reference_python:
        return None
    output = os.path.join(work, f"reference_{name}.json")
    train_file = {"cosent": files["stsb_train_reference"],
                  "mnrl": files["mnrl_train"]}.get(loss)
    retrieval = loss is None or (loss == "mnrl" and FLAGS.mnrl_retrieval)
    process = subprocess.Popen(
        [FLAGS.reference_python, os.path.join(REPO, "bench", "reference_sentence_embeddings.py"),
         f"--model_dir={hf_folder}", f"--dev_file={files['dev']}", f"--output={output}",
         f"--max_seq_length={FLAGS.max_seq_length}", f"--seed={seed}",
         f"--batch_size={FLAGS.batch_size}", f"--learning_rate={FLAGS.learning_rate}",
         f"--epochs={FLAGS.epochs}", "--warmup_proportion=0.1", "--weight_decay=0.01",
         "--adam_epsilon=1e-6", f"--scale={FLAGS.scale}",
         f"--eval_batch_size={FLAGS.eval_batch_size}", f"--threads={FLAGS.threads}"]
        + ([f"--train_file={train_file}", f"--loss={loss}"] if loss else ["--cosines"])
        + ([f"--retrieval_dir={files['retrieval']}"] if retrieval else []))
    return process, output, time.time()


def finish_reference(started):
    if started is None:
        return None
    process, output, start = started
    if process.wait() != 0:
        raise SystemExit(f"the reference side failed (exit {process.returncode})")
    with open(output, encoding="utf-8") as file:
        figures = json.load(file)
    figures["wall_seconds"] = time.time() - start
    return figures


def run_reference(work, files, hf_folder, name, seed=1, loss=None):
    """The reference side's figures (same keys as ours), or None without the flag."""
    return finish_reference(start_reference(work, files, hf_folder, name, seed, loss))


def zero_shot(work, files, hf_folder, results, lines):
    ours = run_ours(work, files, "zero_shot")
    theirs = run_reference(work, files, hf_folder, "zero_shot")
    results["zero_shot"] = {"ours": ours, "reference": theirs}
    lines += ["### Zero-shot (the shared weights, no training)", "",
              "| metric | ours | sentence-transformers | difference |",
              "| --- | --- | --- | --- |"]
    for key in ("spearman", "pearson") + RETRIEVAL_KEYS:
        other = theirs[key] if theirs else None
        lines.append(f"| {key} | {ours[key]:.6f} | "
                     + (f"{other:.6f} | {ours[key] - other:+.2e} |" if theirs else "- | - |"))
    if theirs:
        gap = float(np.abs(np.asarray(ours["cosines"]) - theirs["cosines"]).max())
        results["zero_shot"]["max_cosine_difference"] = gap
        worst = max(abs(ours[key] - theirs[key]) for key in ("spearman", "pearson"))
        results["zero_shot"]["equal_to_1e-4"] = worst <= 1e-4
        lines += ["", f"Largest difference of a dev pair's cosine: {gap:.2e}; Spearman / "
                  f"Pearson equal to 1e-4: {'yes' if worst <= 1e-4 else 'NO'}."]
    lines.append("")


def fine_tune(work, files, hf_folder, loss, results, lines):
    seeds = seed_summary.parse_seeds(FLAGS.seeds)
    rows = {"ours": [], "reference": []}
    for seed in seeds:
        reference = None
        if FLAGS.parallel_sides:  # the reference runs while ours does
            reference = start_reference(work, files, hf_folder, f"{loss}_{seed}", seed, loss)
        rows["ours"].append(run_ours(work, files, f"{loss}_{seed}", seed, loss))
        print(f"{loss} seed {seed} ours: spearman {rows['ours'][-1]['spearman']:.4f} "
              f"({rows['ours'][-1]['seconds']:.0f} s)", flush=True)
        if not FLAGS.parallel_sides:
            reference = start_reference(work, files, hf_folder, f"{loss}_{seed}", seed, loss)
        theirs = finish_reference(reference)
        if theirs:
            rows["reference"].append(theirs)
            print(f"{loss} seed {seed} reference: spearman {theirs['spearman']:.4f} "
                  f"({theirs['seconds']:.0f} s)", flush=True)
    for side in rows.values():
        for row in side:
            row.pop("cosines", None)
    keys = ("spearman", "pearson") + (RETRIEVAL_KEYS if loss == "mnrl"
                                      and FLAGS.mnrl_retrieval else ())
    data = (f"{files['stsb_train_rows']} STS-B train pairs" if loss == "cosent"
            else f"{files['mnrl_train_rows']} MRPC train positive pairs")
    lines += [f"### {'CoSENT' if loss == 'cosent' else 'In-batch negatives (MNRL)'}: "
              f"{data}, {rows['ours'][0]['steps']} steps a seed", "",
              "| metric | side | " + " | ".join(f"seed {seed}" for seed in seeds)
              + " | mean | range | ours inside the reference's range |",
              "| --- | --- | " + " | ".join("---" for _ in seeds) + " | --- | --- | --- |"]
    summary = {}
    for key in keys:
        for side, side_rows in rows.items():
            if not side_rows:
                continue
            values = np.array([row[key] for row in side_rows])
            summary[f"{side}_{key}"] = {"values": values.tolist(), "mean": values.mean(),
                                        "min": values.min(), "max": values.max()}
            verdict = ""
            if side == "ours" and rows["reference"]:
                ref = np.array([row[key] for row in rows["reference"]])
                # 1e-9: the float noise of a mean of equal figures.
                inside = ref.min() - 1e-9 <= values.mean() <= ref.max() + 1e-9
                summary[f"{key}_inside"] = bool(inside)
                verdict = "yes" if inside else (
                    f"NO ({values.mean() - ref.mean():+.4f} from its mean)")
            lines.append(f"| {key} | {'ours' if side == 'ours' else 'sentence-transformers'}"
                         f" | " + " | ".join(f"{v:.4f}" for v in values)
                         + f" | {values.mean():.4f} | [{values.min():.4f}, "
                           f"{values.max():.4f}] | {verdict} |")
            print(seed_summary.summary_line(f"{loss} dev {key}", values, digits=4,
                                            side=side), flush=True)
    seconds = {side: float(np.mean([row.get("wall_seconds", row["seconds"])
                                    for row in side_rows]))
               for side, side_rows in rows.items() if side_rows}
    lines += ["", "Seconds a seed (train + eval): " + ", ".join(
        f"{side} {value:.0f}" for side, value in seconds.items()) + ".", ""]
    results[loss] = {"rows": rows, "summary": summary, "seconds": seconds}


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(FLAGS.threads)
    tf.config.threading.set_inter_op_parallelism_threads(FLAGS.threads)
    unknown = set(FLAGS.parts) - set(PARTS)
    if unknown:
        sys.exit(f"sentence_embeddings_check: error: --parts: unknown {sorted(unknown)}; "
                 f"expected some of {', '.join(PARTS)}")
    if FLAGS.pack_sequences:
        sys.exit("sentence_embeddings_check: error: --pack_sequences does not apply here")
    work = FLAGS.output_dir or tempfile.mkdtemp(prefix="sentence_embeddings_check_")
    os.makedirs(work, exist_ok=True)
    files = prepare_data(work)
    hf_folder = export_reference_weights(work)
    started = time.time()
    results = {"machine": f"{os.cpu_count()} CPU cores", "threads": FLAGS.threads,
               "files": files, "recipe": {
                   "batch_size": FLAGS.batch_size, "learning_rate": FLAGS.learning_rate,
                   "epochs": FLAGS.epochs, "max_seq_length": FLAGS.max_seq_length,
                   "warmup_proportion": 0.1, "weight_decay": 0.01, "adam_epsilon": 1e-6,
                   "scale": FLAGS.scale, "seeds": FLAGS.seeds}}
    lines = [f"STS-B dev: {files['dev_rows']} pairs; our reader against a plain tab "
             f"split of the STS-B files: {files['stsb_reader_mismatches']} rows differ. "
             f"Retrieval: MRPC dev, {files['retrieval_queries']} queries over "
             f"{files['retrieval_corpus']} documents.", ""]
    if "zero_shot" in FLAGS.parts:
        zero_shot(work, files, hf_folder, results, lines)
    for loss in ("cosent", "mnrl"):
        if loss in FLAGS.parts:
            fine_tune(work, files, hf_folder, loss, results, lines)
    results["seconds"] = time.time() - started
    if "zero_shot" in results:
        for side in ("ours", "reference"):
            if results["zero_shot"][side]:
                results["zero_shot"][side].pop("cosines", None)
    with open(os.path.join(work, "results.json"), "w", encoding="utf-8") as file:
        json.dump(results, file, indent=1, default=float)
    with open(os.path.join(work, "results.md"), "w", encoding="utf-8") as file:
        file.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"Written: {os.path.join(work, 'results.json')}, results.md")


if __name__ == "__main__":
    app.run(main)
