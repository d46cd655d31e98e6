"""Real check: continued pre-training of a released BERT on a domain text, ours beside
Hugging Face transformers on the same weights, instances and recipe (issue 27).

The released model is ../shared/data/checkpoints/uncased_L-6_H-384_A-12 (encoder only:
its masked-LM and next-sentence heads start fresh, drawn once per seed and given to
both sides, so that both start from the very same weights). The domain text is the
WikiExtractor slice ../shared/data/wiki/enwiki_wikiextractor_wiki_00: its documents
with text are split 80 / 20 into training and held-out documents, and
create_pretraining_data turns each part into instances (seq 128, 20 predictions,
masks drawn once, so both sides see the same masks). Recipe: batch 16, AdamW lr 1e-4,
10% warm-up then linear decay, eps 1e-6, weight decay 0.01, clip 1.0, dropout 0.1.

    .venv/bin/python bench/continued_pretraining_check.py --seeds=1,2,3 \\
        --reference_python=/work/venv-ref/bin/python
    .venv/bin/python bench/continued_pretraining_check.py --seeds=1,2,3 --append_tokens=100 \\
        --reference_python=/work/venv-ref/bin/python

With `--append_tokens=N`, bert-extend-vocab --mode=append first adds the N most useful
words of the training documents to the released vocab (new rows: the mean of their old
pieces'), and both sides start from that folder: the masked-LM accuracy on the appended
tokens' positions (target ids from the released vocab size up) is reported too, and the
tokens per held-out document with the released and the extended vocab. Held-out
documents are other articles, with few of the appended words (7 masked slots in the
default split); `--heldout_split=paragraphs` holds out the last 20% of each document's
paragraphs instead, so that the held-out text shares the training text's words (67
masked slots of an appended token held out, 1,123 in training; both counts are printed).
"""

import argparse
import json
import os
import pathlib
import re
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import logging  # noqa: E402

import seed_summary  # noqa: E402
from bert_tf.models import BertPretrainer  # noqa: E402
from bert_tf.serving import huggingface  # noqa: E402
from bert_tf.tasks.pretraining import task as pretraining  # noqa: E402
from bert_tf.tasks.pretraining.options import PretrainingOptions  # noqa: E402
from bert_tf.text.tokenization import FullTokenizer  # noqa: E402
from bert_tf.train import distribute, records  # noqa: E402
from bert_tf.weights import checkpoints  # noqa: E402

SHARED = REPO.parent / "shared" / "data"
RELEASED = SHARED / "checkpoints" / "uncased_L-6_H-384_A-12"
BASE_VOCAB_SIZE = 30522


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model_dir", default=str(RELEASED))
    parser.add_argument("--text", default=str(SHARED / "wiki" / "enwiki_wikiextractor_wiki_00"))
    parser.add_argument("--work_dir", default="/tmp/bert_tf_continued_pretraining")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--num_train_steps", type=int, default=300)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--learning_rate", type=float, default=1e-4)
    parser.add_argument("--append_tokens", type=int, default=0,
                        help="Extend the vocab by this many words first (bert-extend-vocab "
                             "--mode=append on the training documents).")
    parser.add_argument("--heldout_split", default="documents",
                        choices=["documents", "paragraphs"],
                        help="documents: the last 20%% of the documents are held out; "
                             "paragraphs: the last 20%% of each document's paragraphs (the "
                             "held-out text then shares the training text's words).")
    parser.add_argument("--no_dropout_same_order", action="store_true",
                        help="Equivalence check: dropout 0 on both sides and the reference "
                             "trains on our input pipeline's batches in our order.")
    parser.add_argument("--reference_python", default=None,
                        help="A Python with torch and transformers: runs the reference.")
    return parser.parse_args()


def split_paragraphs(text_path, work):
    """Train / held-out WikiExtractor files: of each document with text, the first 80%
    of its paragraphs (at least one) train and the rest are held out, under the same
    header and title; returns the number of documents in each."""
    parts = {"train": [], "heldout": []}
    for header, body in re.findall(r"(<doc [^>]*>)(.*?)</doc>",
                                   pathlib.Path(text_path).read_text("utf-8"), re.S):
        lines = [line for line in body.split("\n") if line.strip()]
        if len(lines) < 3:  # a title and at least two paragraphs
            continue
        title, paragraphs = lines[0], lines[1:]
        cut = max(1, int(len(paragraphs) * 0.8))
        for name, chosen in (("train", paragraphs[:cut]), ("heldout", paragraphs[cut:])):
            if chosen:
                parts[name].append("\n".join([header, title, ""] + chosen + ["</doc>"]))
    for name, documents in parts.items():
        (work / f"{name}.wiki").write_text("\n".join(documents) + "\n", encoding="utf-8")
    return len(parts["train"]), len(parts["heldout"])


def split_documents(text_path, work):
    """Train / held-out WikiExtractor files, 80 / 20 in order of the documents of more
    than three lines (redirect stubs included: the data tool skips those); returns the
    number of documents with text (a line besides the title) in each."""
    documents = [doc for doc in re.findall(r"<doc [^>]*>.*?</doc>",
                                           pathlib.Path(text_path).read_text("utf-8"), re.S)
                 if len(re.sub(r"<[^>]+>", "", doc).split("\n")) > 3]
    cut = int(len(documents) * 0.8)
    counts = []
    for name, part in (("train", documents[:cut]), ("heldout", documents[cut:])):
        (work / f"{name}.wiki").write_text("\n".join(part) + "\n", encoding="utf-8")
        counts.append(sum(len([line for line in re.sub(r"<[^>]+>", "", doc).split("\n")
                               if line.strip()]) > 1 for doc in part))
    return counts


def make_instances(work, model_dir, name, dupe_factor):
    """Records of `<work>/<name>.wiki` and the same instances as numpy arrays (.npz)."""
    path = work / f"{name}.tfrecord"
    if not path.exists():
        subprocess.run([sys.executable, "-m", "data_prep.create_pretraining_data",
                        f"--input_file={work / (name + '.wiki')}", f"--output_file={path}",
                        f"--vocab_file={pathlib.Path(model_dir) / 'vocab.txt'}",
                        "--do_lower_case", "--max_seq_length=128",
                        "--max_predictions_per_seq=20", f"--dupe_factor={dupe_factor}",
                        "--masked_lm_prob=0.15", "--random_seed=12345"],
                       cwd=REPO, check=True)
    spec = records.pretraining_features(128, 20)
    arrays = {key: [] for key in spec}
    for serialized in tf.data.TFRecordDataset(str(path)):
        example = tf.io.parse_single_example(serialized, spec)
        for key in spec:
            arrays[key].append(example[key].numpy())
    arrays = {key: np.stack(values) for key, values in arrays.items()}
    np.savez(work / f"{name}.npz", **arrays)
    return str(path), len(arrays["input_ids"])


def extend_vocab(args, work):
    """bert-extend-vocab --mode=append of `--model_dir` on the training documents."""
    out = work / "extended_vocab"
    if not (out / "vocab.txt").exists():
        subprocess.run([sys.executable, "-m", "data_prep.extend_vocab",
                        f"--init_checkpoint={args.model_dir}", f"--output_dir={out}",
                        f"--input_file={work / 'train.wiki'}", "--mode=append",
                        f"--max_new_tokens={args.append_tokens}", "--overwrite"],
                       cwd=REPO, check=True)
    return str(out)


def tokens_per_document(vocab_file, wiki_file):
    """Mean WordPiece tokens per document of a WikiExtractor file (markup removed)."""
    tokenizer = FullTokenizer(vocab_file, do_lower_case=True)
    documents = re.findall(r"<doc [^>]*>(.*?)</doc>", wiki_file.read_text("utf-8"), re.S)
    return float(np.mean([len(tokenizer.tokenize(doc)) for doc in documents]))


def masked_lm_accuracies(model, arrays, new_from, batch_size=64):
    """(accuracy over every masked slot, over the slots whose target id >= new_from
    (None without such slots)), from the model's logits on the instances' arrays."""
    right = total = new_right = new_total = 0
    for start in range(0, len(arrays["input_ids"]), batch_size):
        batch = {key: value[start:start + batch_size] for key, value in arrays.items()}
        logits = model(batch, training=False)["masked_lm_logits"]  # [B, P, V]
        hits = (np.argmax(logits, -1) == batch["masked_lm_ids"]) & (
            batch["masked_lm_weights"] > 0)
        scored, new = batch["masked_lm_weights"] > 0, batch["masked_lm_ids"] >= new_from
        right, total = right + hits.sum(), total + scored.sum()
        new_right, new_total = new_right + (hits & new).sum(), new_total + (scored & new).sum()
    return right / total, (new_right / new_total if new_total else None)


def appended_slots(arrays_file):
    """How many masked slots of an instances' .npz have an appended token as target."""
    with np.load(arrays_file) as arrays:
        return int(((arrays["masked_lm_ids"] >= BASE_VOCAB_SIZE)
                    & (arrays["masked_lm_weights"] > 0)).sum())


def starting_model(model_dir, seed, seed_dir, dropout=0.1):
    """The released encoder with heads drawn from `seed`, written for both sides."""
    keras.utils.set_random_seed(seed)
    model = checkpoints.from_pretrained(BertPretrainer, model_dir)
    seed_dir.mkdir(parents=True, exist_ok=True)
    checkpoints.save_google_checkpoint(model, str(seed_dir / "start" / "bert_model.ckpt"),
                                       write_config=True)
    config = model.config.to_dict()
    config.update(hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    (seed_dir / "config.json").write_text(json.dumps(config))
    (seed_dir / "start" / "bert_config.json").write_text(json.dumps(config))
    np.savez(seed_dir / "hf_weights.npz", **huggingface.hf_state_dict(model))
    return str(seed_dir / "start"), model


def run_ours(args, seed, seed_dir, train_records, heldout_records):
    """Held-out masked-LM accuracy before and after training, on our side, and on the
    appended tokens' positions (None without them): {before, after, new_before, new_after}."""
    start, start_model = starting_model(args.model_dir, seed, seed_dir,
                                        0.0 if args.no_dropout_same_order else 0.1)
    heldout = dict(np.load(seed_dir.parent / "heldout.npz"))
    new_before = masked_lm_accuracies(start_model, heldout, BASE_VOCAB_SIZE)[1]
    common = dict(max_seq_length=128, max_predictions_per_seq=20, seed=seed,
                  train_batch_size=args.batch_size, eval_batch_size=64,
                  max_eval_steps=100000, steps_per_loop=50)
    before = pretraining.run_pretraining(PretrainingOptions(
        init_checkpoint=start, input_file=heldout_records, do_eval=True,
        output_dir=str(seed_dir / "before"), **common), distribute.get_strategy())["eval"]
    training = PretrainingOptions(
        init_checkpoint=start, input_file=train_records, do_train=True,
        output_dir=str(seed_dir / "ours"), learning_rate=args.learning_rate,
        num_train_steps=args.num_train_steps,
        num_warmup_steps=args.num_train_steps // 10,
        save_checkpoints_steps=args.num_train_steps, **common)
    if args.no_dropout_same_order:
        np.save(seed_dir / "order.npy", batch_order(training, args.num_train_steps,
                                                    seed_dir.parent / "train.npz"))
    after = pretraining.run_pretraining(training, distribute.get_strategy())
    evaluation = pretraining.run_pretraining(PretrainingOptions(
        input_file=heldout_records, do_eval=True, output_dir=str(seed_dir / "ours"),
        bert_config_file=str(pathlib.Path(start) / "bert_config.json"), **common),
        distribute.get_strategy())["eval"]
    del after
    trained = checkpoints.from_pretrained(BertPretrainer, str(seed_dir / "ours"))
    overall, new_after = masked_lm_accuracies(trained, heldout, BASE_VOCAB_SIZE)
    if abs(overall - evaluation["masked_lm_accuracy"]) > 1e-6:  # two paths, one model
        raise SystemExit(f"the run's eval ({evaluation['masked_lm_accuracy']}) and the "
                         f"trained folder's logits ({overall}) disagree")
    return dict(before=before["masked_lm_accuracy"], after=overall,
                new_before=new_before, new_after=new_after)


def batch_order(options, num_steps, arrays_path):
    """The indices (in `arrays_path`'s instances) of the rows our training input pipeline
    gives for `options`, a batch after another, over `num_steps` steps."""
    arrays = np.load(arrays_path)
    key = lambda ids, positions: ids.astype(np.int64).tobytes() + positions.astype(
        np.int64).tobytes()
    index = {key(ids, positions): row for row, (ids, positions) in enumerate(
        zip(arrays["input_ids"], arrays["masked_lm_positions"]))}
    keras.utils.set_random_seed(options.seed)  # as the driver does before reading
    dataset = pretraining.dataset_fn_for(options, True)(tf.distribute.InputContext())
    return np.array([index[key(ids, positions)] for batch in dataset.take(num_steps)
                     for ids, positions in zip(batch["input_ids"].numpy(),
                                               batch["masked_lm_positions"].numpy())])


def run_reference(args, seed, work, new_from):
    completed = subprocess.run(
        [args.reference_python, str(REPO / "bench" / "reference_continued_pretraining.py"),
         f"--work_dir={work}", f"--seed={seed}", f"--num_train_steps={args.num_train_steps}",
         f"--batch_size={args.batch_size}", f"--learning_rate={args.learning_rate}",
         f"--new_token_ids_from={new_from}"]
        + ([f"--order_file={work / f'seed{seed}' / 'order.npy'}"]
           if args.no_dropout_same_order else []),
        capture_output=True, text=True, check=True)
    return json.loads(completed.stdout.strip().splitlines()[-1])


def percent(value):
    return "n/a" if value is None else f"{value:.4f}"


def main():
    args = parse_args()
    logging.set_verbosity(logging.WARNING)
    work = pathlib.Path(args.work_dir) / ((f"append{args.append_tokens}"
                                           if args.append_tokens else "base")
                                          + ("_no_dropout" if args.no_dropout_same_order
                                             else "")
                                          + ("_paragraphs" if args.heldout_split
                                             == "paragraphs" else ""))
    work.mkdir(parents=True, exist_ok=True)
    split = split_paragraphs if args.heldout_split == "paragraphs" else split_documents
    train_docs, heldout_docs = split(args.text, work)
    if args.append_tokens:
        args.model_dir = extend_vocab(args, work)
        print("tokens per held-out document: released vocab "
              f"{tokens_per_document(RELEASED / 'vocab.txt', work / 'heldout.wiki'):.1f}, "
              "extended vocab "
              f"{tokens_per_document(pathlib.Path(args.model_dir) / 'vocab.txt', work / 'heldout.wiki'):.1f}",
              flush=True)
    train_records, train_count = make_instances(work, args.model_dir, "train", 3)
    heldout_records, heldout_count = make_instances(work, args.model_dir, "heldout", 1)
    print(f"documents with text: {train_docs} train, {heldout_docs} held out; instances: "
          f"{train_count} train, {heldout_count} held out", flush=True)
    if args.append_tokens:
        print("masked slots of an appended token: " + ", ".join(
            f"{appended_slots(work / f'{part}.npz')} {part}" for part in ("train", "heldout")),
            flush=True)
    rows = {"ours": [], "transformers": []}
    for seed in seed_summary.parse_seeds(args.seeds):
        row = run_ours(args, seed, work / f"seed{seed}", train_records, heldout_records)
        rows["ours"].append(row)
        if args.reference_python:
            rows["transformers"].append(run_reference(args, seed, work, BASE_VOCAB_SIZE))
        for side in rows:
            if len(rows[side]) == len(rows["ours"]):
                row = rows[side][-1]
                print(f"seed {seed} {side}: held-out masked-LM accuracy "
                      f"{row['before']:.4f} -> {row['after']:.4f}; on appended tokens "
                      f"{percent(row['new_before'])} -> {percent(row['new_after'])}",
                      flush=True)
    for side, side_rows in rows.items():
        for key, what in (("after", "held-out masked-LM accuracy"),
                          ("new_after", "masked-LM accuracy on appended tokens")):
            values = [row[key] for row in side_rows if row[key] is not None]
            if values:
                print(seed_summary.summary_line(what, values, digits=4, side=side))


if __name__ == "__main__":
    main()
