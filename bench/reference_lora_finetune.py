"""The reference side of glue_finetune_check.py --lora_rank: LoRA fine-tuning with Hugging
Face PEFT (PyTorch, CPU, float32) on a transformers export of the same base checkpoint,
with the recipe of ../shared/bench/reference_finetune.py (its `train` and `epochs_of`,
rewritten here because that script needs a package this machine cannot install).

    /tmp/refenv/bin/python bench/reference_lora_finetune.py --base_dir=B --data_dir=D \
        --task=MRPC --seeds=1,2,3 --learning_rate=1e-3 --lora_rank=8 --lora_alpha=16 \
        --lora_dropout=0.1 --lora_targets=query,value --output_json=results.json

The recipe: max_seq_length 128 (pairs truncated longest first; a batch padded to its
longest row), batch 32, the epochs given,
AdamW (weight decay 0.01 except LayerNorm and biases, eps 1e-6) over the trainable weights,
10% linear warm-up then linear decay to 0, global-norm clip 1.0, dropout 0.1, a new head
N(0, 0.02). PEFT's `LoraConfig(task_type=SEQ_CLS)`: the adapters and the classifier train
(PEFT's modules_to_save), the pooler and every other base weight are frozen, as ours.
`--lora_rank=0` fine-tunes every weight (the full fine-tuning reference).

Data: a GLUE folder's train.tsv and dev.tsv (MRPC pairs or SST-2 sentences); the first
`--train_examples` training rows when given. Writes per-seed dev accuracy (and F1 for
MRPC) and steps to `--output_json`.
"""

import argparse
import csv
import json
import time

import numpy as np
import peft
import torch
import transformers

# The transformers module of each --lora_targets name (as bert_tf.serving.peft.MODULES).
MODULES = {"query": r"attention\.self\.query", "key": r"attention\.self\.key",
           "value": r"attention\.self\.value",
           "attention_output": r"attention\.output\.dense",
           "intermediate": r"intermediate\.dense", "output": r"output\.dense"}


def read_rows(path, task, limit=0):
    """(text_a, text_b or None, label) rows of a GLUE tsv with a header."""
    with open(path, encoding="utf-8-sig") as file:
        rows = list(csv.reader(file, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
    if task == "MRPC":
        rows = [(r[3], r[4], int(r[0])) for r in rows]
    else:  # SST-2: sentence, label
        rows = [(r[0], None, int(r[1])) for r in rows]
    return rows[:limit] if limit else rows


def epochs_of(n, batch_size, epochs, seed):
    rng = np.random.default_rng(seed)
    for _ in range(int(np.ceil(epochs))):
        order = rng.permutation(n)
        for i in range(0, n, batch_size):
            yield order[i:i + batch_size]


def build_model(args, seed):
    torch.manual_seed(seed)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        args.base_dir, num_labels=2, dtype=torch.float32)
    if not args.lora_rank:
        return model
    targets = [MODULES[name] for name in args.lora_targets.split(",")]
    config = peft.LoraConfig(
        task_type=peft.TaskType.SEQ_CLS, r=args.lora_rank, lora_alpha=args.lora_alpha,
        lora_dropout=args.lora_dropout,
        target_modules=r".*encoder\.layer\.\d+\.(" + "|".join(targets) + ")")
    return peft.get_peft_model(model, config)


def train(model, batches, steps, lr):
    model.train()
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    no_decay = lambda n: "LayerNorm" in n or n.endswith("bias")
    groups = [{"params": [p for n, p in named if not no_decay(n)], "weight_decay": 0.01},
              {"params": [p for n, p in named if no_decay(n)], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=lr, eps=1e-6)
    schedule = transformers.get_linear_schedule_with_warmup(optimizer, int(0.1 * steps), steps)
    done = 0
    for batch in batches:
        model(**batch).loss.backward()
        torch.nn.utils.clip_grad_norm_([p for _, p in named], 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        done += 1
        if done % 50 == 0:
            print(f"step {done}/{steps}", flush=True)
        if done >= steps:
            break
    model.eval()
    return done, sum(p.numel() for _, p in named)


def run_seed(args, seed, tokenizer, train_rows, dev_rows):
    def encode(rows):
        pairs = [r[1] for r in rows] if rows[0][1] is not None else None
        # Padded to the batch's longest row, as our runners' trimmed batches: the
        # attention mask makes padded positions inert, so the outputs equal max_length
        # padding's (to float rounding) at a fraction of the CPU time.
        return tokenizer([r[0] for r in rows], pairs, truncation="longest_first",
                         max_length=args.max_seq_length, padding="longest",
                         return_tensors="pt")

    def batches():
        for index in epochs_of(len(train_rows), args.batch_size, args.epochs, seed):
            rows = [train_rows[j] for j in index]
            batch = dict(encode(rows))
            batch["labels"] = torch.tensor([r[2] for r in rows])
            yield batch
    started = time.time()
    model = build_model(args, seed)
    steps = int(args.epochs * ((len(train_rows) + args.batch_size - 1) // args.batch_size))
    done, trained = train(model, batches(), steps, args.learning_rate)
    predicted = []
    with torch.no_grad():
        for i in range(0, len(dev_rows), 64):
            predicted += model(**encode(dev_rows[i:i + 64])).logits.argmax(-1).tolist()
    gold, predicted = np.array([r[2] for r in dev_rows]), np.array(predicted)
    true_positives = ((predicted == 1) & (gold == 1)).sum()
    return {"seed": seed, "eval_accuracy": float((predicted == gold).mean()),
            "eval_f1": float(2 * true_positives / ((predicted == 1).sum() + (gold == 1).sum())),
            "global_step": done, "trained_weights": int(trained),
            "seconds": time.time() - started}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base_dir", required=True, help="transformers BertModel folder")
    parser.add_argument("--data_dir", required=True, help="GLUE task folder")
    parser.add_argument("--task", choices=("MRPC", "SST-2"), default="MRPC")
    parser.add_argument("--seeds", default="1")
    parser.add_argument("--train_examples", type=int, default=0)
    parser.add_argument("--epochs", type=float, default=3.0)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--lora_rank", type=int, default=8)
    parser.add_argument("--lora_alpha", type=float, default=16.0)
    parser.add_argument("--lora_dropout", type=float, default=0.1)
    parser.add_argument("--lora_targets", default="query,value")
    parser.add_argument("--output_json", required=True)
    args = parser.parse_args()
    tokenizer = transformers.BertTokenizerFast.from_pretrained(args.base_dir)
    train_rows = read_rows(f"{args.data_dir}/train.tsv", args.task, args.train_examples)
    dev_rows = read_rows(f"{args.data_dir}/dev.tsv", args.task)
    results = []
    for seed in (int(s) for s in args.seeds.split(",")):
        results.append(run_seed(args, seed, tokenizer, train_rows, dev_rows))
        print(f"reference seed {seed}: " + json.dumps(results[-1]), flush=True)
        with open(args.output_json, "w", encoding="utf-8") as file:
            json.dump({"peft": peft.__version__, "torch": torch.__version__,
                       "transformers": transformers.__version__, "runs": results}, file,
                      indent=1)


if __name__ == "__main__":
    main()
