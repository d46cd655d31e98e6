"""The reference side of multi_label_check.py: Hugging Face transformers'
`BertForSequenceClassification(problem_type="multi_label_classification")` (PyTorch, CPU:
sigmoid outputs, BCEWithLogitsLoss averaged over labels and examples) on the same
weights, token ids and recipe.

Run with a Python that has `torch` and `transformers` (an optional bench dependency,
never a package one), e.g. /work/venv-ref/bin/python:

    /work/venv-ref/bin/python bench/reference_multi_label.py --work_dir=... --seed=1

Reads, from `--work_dir` (written by multi_label_check.py): `seed<N>/hf_weights.npz` (the
starting model under Hugging Face names, the classifier head included),
`seed<N>/config.json`, `train.npz` and `dev.npz` (token ids and multi-hot labels).
Trains int(examples / batch * epochs) steps of full batches drawn from one shuffled pass
after another (as our runner counts them), AdamW eps 1e-6, weight decay 0.01 except
biases and LayerNorm, 10% linear warm-up then linear decay, clip 1.0. Prints one JSON
line: micro / macro F1 and subset accuracy of the dev set at the threshold, computed
here with numpy (not with bert_tf's metrics).
"""

import argparse
import json
import os

import numpy as np
import torch
import transformers

from reference_continued_pretraining import load_start, train_steps


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work_dir", required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=1e-4)
    parser.add_argument("--warmup_proportion", type=float, default=0.1)
    parser.add_argument("--threshold", type=float, default=0.5)
    return parser.parse_args()


def torch_batch(arrays, index):
    """Model inputs of the examples at `index`, cut to their longest (as ours trims)."""
    length = max(1, int(arrays["input_mask"][index].sum(axis=1).max()))
    return dict(input_ids=torch.tensor(arrays["input_ids"][index, :length]),
                attention_mask=torch.tensor(arrays["input_mask"][index, :length]),
                token_type_ids=torch.tensor(arrays["segment_ids"][index, :length]),
                labels=torch.tensor(arrays["labels"][index]))


@torch.no_grad()
def scores(model, arrays, threshold, batch_size=64):
    """micro / macro F1 (a label never predicted nor present: F1 0) and subset accuracy."""
    model.eval()
    predicted = []
    for start in range(0, len(arrays["input_ids"]), batch_size):
        index = np.arange(start, min(start + batch_size, len(arrays["input_ids"])))
        batch = torch_batch(arrays, index)
        batch.pop("labels")
        predicted.append(torch.sigmoid(model(**batch).logits).numpy() >= threshold)
    predicted, gold = np.concatenate(predicted), arrays["labels"] > 0.5
    tp = (predicted & gold).sum(axis=0)
    fp, fn = (predicted & ~gold).sum(axis=0), (~predicted & gold).sum(axis=0)
    per_label = [2 * t / (2 * t + p + n) if 2 * t + p + n else 0.0
                 for t, p, n in zip(tp, fp, fn)]
    decisions = 2 * tp.sum() + fp.sum() + fn.sum()
    return {"f1_micro": float(2 * tp.sum() / decisions) if decisions else 0.0,
            "f1_macro": float(np.mean(per_label)),
            "subset_accuracy": float(np.mean((predicted == gold).all(axis=1)))}


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(os.cpu_count() or 1)
    model = load_start(transformers.BertForSequenceClassification,
                       os.path.join(args.work_dir, f"seed{args.seed}"))
    train = dict(np.load(os.path.join(args.work_dir, "train.npz")))
    dev = dict(np.load(os.path.join(args.work_dir, "dev.npz")))
    args.num_train_steps = max(1, int(len(train["input_ids"]) / args.batch_size * args.epochs))
    loss, seconds = train_steps(model, train, torch_batch, args)
    print(json.dumps(dict(scores(model, dev, args.threshold), seed=args.seed,
                          steps=args.num_train_steps, seconds=round(seconds, 1),
                          final_loss=loss)))


if __name__ == "__main__":
    main()
