"""The reference side of continued_pretraining_check.py: Hugging Face transformers'
`BertForPreTraining` (PyTorch, CPU) on the same weights, instances and recipe.

Run with a Python that has `torch` and `transformers` (an optional bench dependency,
never a package one), e.g. a separate virtual environment:

    python -m venv /work/venv-ref && /work/venv-ref/bin/pip install torch transformers
    /work/venv-ref/bin/python bench/reference_continued_pretraining.py --work_dir=... --seed=1

Reads, from `--work_dir` (written by continued_pretraining_check.py):
`seed<N>/hf_weights.npz` (the starting model under Hugging Face names, heads included),
`seed<N>/config.json`, `train.npz` and `heldout.npz` (the pre-training instances, masks
included). Prints one JSON line: masked-LM accuracy on the held-out instances before and
after training, and the masked-LM accuracy on the positions of `--new_token_ids_from`
and above (the appended tokens of an extended vocab), when asked.
"""

import argparse
import json
import math
import os
import time

import numpy as np
import torch
import transformers


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work_dir", required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--num_train_steps", type=int, default=300)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--learning_rate", type=float, default=1e-4)
    parser.add_argument("--warmup_proportion", type=float, default=0.1)
    parser.add_argument("--new_token_ids_from", type=int, default=0)
    parser.add_argument("--order_file", default="",
                        help="A .npy of training instance indices, the batches in order "
                             "(ours' input pipeline's, for the no-dropout equivalence check).")
    return parser.parse_args()


def torch_batch(arrays, index):
    """The model inputs and labels of the instances at `index` (masks as in the records)."""
    ids = torch.tensor(arrays["input_ids"][index], dtype=torch.long)
    labels = torch.full_like(ids, -100)
    positions = arrays["masked_lm_positions"][index]
    targets = arrays["masked_lm_ids"][index]
    weights = arrays["masked_lm_weights"][index]
    for row in range(len(index)):
        for position, target, weight in zip(positions[row], targets[row], weights[row]):
            if weight > 0:
                labels[row, position] = int(target)
    return dict(input_ids=ids,
                attention_mask=torch.tensor(arrays["input_mask"][index], dtype=torch.long),
                token_type_ids=torch.tensor(arrays["segment_ids"][index], dtype=torch.long),
                labels=labels,
                next_sentence_label=torch.tensor(arrays["next_sentence_labels"][index]
                                                 .reshape(-1), dtype=torch.long))


@torch.no_grad()
def masked_lm_accuracy(model, arrays, new_from=0, batch_size=64):
    """(accuracy over every masked position, accuracy over positions whose target id is
    `new_from` or above; None when `new_from` is 0 or no such position)."""
    model.eval()
    right = total = new_right = new_total = 0
    for start in range(0, len(arrays["input_ids"]), batch_size):
        index = np.arange(start, min(start + batch_size, len(arrays["input_ids"])))
        batch = torch_batch(arrays, index)
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                       token_type_ids=batch["token_type_ids"]).prediction_logits
        labels = batch["labels"]
        scored = labels != -100
        hits = (logits.argmax(-1) == labels) & scored
        right, total = right + int(hits.sum()), total + int(scored.sum())
        if new_from:
            new = scored & (labels >= new_from)
            new_right += int((hits & new).sum())
            new_total += int(new.sum())
    return right / total, (new_right / new_total if new_total else None)


def optimizer_and_schedule(model, args):
    """AdamW as the recipe (eps 1e-6, weight decay 0.01 except biases and LayerNorm),
    linear warm-up then linear decay to 0."""
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        (no_decay if name.endswith("bias") or "LayerNorm" in name else decay).append(parameter)
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=args.learning_rate, eps=1e-6)
    schedule = transformers.get_linear_schedule_with_warmup(
        optimizer, int(args.warmup_proportion * args.num_train_steps), args.num_train_steps)
    return optimizer, schedule


def load_start(model_class, seed_dir, may_be_missing=("position_ids",)):
    """`model_class` of `seed_dir`/config.json with the weights of hf_weights.npz; exits
    naming the weights that do not fit (names ending in `may_be_missing` may be absent)."""
    with open(os.path.join(seed_dir, "config.json"), encoding="utf-8") as file:
        model = model_class(transformers.BertConfig(**json.load(file)))
    weights = np.load(os.path.join(seed_dir, "hf_weights.npz"))
    state = {name: torch.tensor(weights[name]) for name in weights.files}
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [name for name in missing if not name.endswith(tuple(may_be_missing))]
    if missing or unexpected:
        raise SystemExit(f"weights do not fit: missing {missing}, unexpected {unexpected}")
    return model


def train_steps(model, train, batch_fn, args, given_order=None):
    """`args.num_train_steps` steps of full `args.batch_size` batches drawn from one
    shuffled pass over `train` after another (numpy, seed `args.seed`), or, with
    `given_order` (instance indices, a batch after another), in that order; with
    `optimizer_and_schedule` and clip 1.0. Returns (the last loss, seconds)."""
    optimizer, schedule = optimizer_and_schedule(model, args)
    rng = np.random.default_rng(args.seed)
    order = np.array([], dtype=np.int64) if given_order is None else np.asarray(given_order)
    started = time.time()
    model.train()
    for _ in range(args.num_train_steps):
        if len(order) < args.batch_size:
            order = np.concatenate([order, rng.permutation(len(train["input_ids"]))])
        index, order = order[:args.batch_size], order[args.batch_size:]
        loss = model(**batch_fn(train, index)).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
    return loss.item(), time.time() - started


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(os.cpu_count() or 1)
    model = load_start(transformers.BertForPreTraining,
                       os.path.join(args.work_dir, f"seed{args.seed}"),
                       ("decoder.weight", "decoder.bias", "position_ids"))
    train = dict(np.load(os.path.join(args.work_dir, "train.npz")))
    heldout = dict(np.load(os.path.join(args.work_dir, "heldout.npz")))
    before = masked_lm_accuracy(model, heldout, args.new_token_ids_from)
    order = np.load(args.order_file) if args.order_file else None
    loss, seconds = train_steps(model, train, torch_batch, args, order)
    after = masked_lm_accuracy(model, heldout, args.new_token_ids_from)
    print(json.dumps({"seed": args.seed, "before": before[0], "after": after[0],
                      "new_before": before[1], "new_after": after[1],
                      "final_loss": loss, "train_seconds": round(seconds, 1),
                      "finite": math.isfinite(loss)}))


if __name__ == "__main__":
    main()
