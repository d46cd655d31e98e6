"""What LoRA costs and saves against full fine-tuning (issue 51): trained weights, run
folder size, train-step time (alternating rounds in one process) and the peak memory of
the train steps (each side in its own process, the peak reset after the model is built
and its step traced), on the shared 6-layer checkpoint's classifier.

Work: batch 32, sequence 128, AdamW as the runners build it (`create_optimizer`), the
classifier's loss; LoRA rank 8 on query and value (the default), the encoder frozen.
The folder sizes come from two `bert-run-classifier` runs of 10 steps on MRPC's first
320 pairs (full, then --lora_rank=8), summing the files each output_dir holds.

    .venv/bin/python bench/lora_bench.py --steps=3 --rounds=8
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import machine  # noqa: E402
import model_bench  # noqa: E402
import seed_summary  # noqa: E402
from bert_tf.models import BertClassifier  # noqa: E402
from bert_tf.tasks.classification.task import classifier_loss_fn  # noqa: E402
from bert_tf.train import lora, optimization  # noqa: E402
from bert_tf.weights import checkpoints  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(REPO, "..", "shared", "data")
CHECKPOINT = os.path.join(SHARED, "checkpoints", "uncased_L-6_H-384_A-12")
BATCH, SEQ = 32, 128
SIDES = ("full", "lora")


def make_side(side):
    """(train call, trained weight count) of one side's classifier."""
    model = checkpoints.from_pretrained(BertClassifier, CHECKPOINT, num_classes=2)
    if side == "lora":
        lora.apply_lora(model, lora.LoraSettings(rank=8))
    optimizer = optimization.create_optimizer(2e-5, 1000, 100)
    variables = model.trainable_variables
    optimizer.build(variables)
    loss_fn = classifier_loss_fn(False)
    rng = np.random.default_rng(0)
    batch = {"input_ids": tf.constant(rng.integers(1000, 30000, (BATCH, SEQ)), tf.int32),
             "input_mask": tf.ones((BATCH, SEQ), tf.int32),
             "segment_ids": tf.zeros((BATCH, SEQ), tf.int32),
             "label_ids": tf.constant(rng.integers(0, 2, BATCH), tf.int32)}

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            outputs = model(batch, training=True)
            loss = loss_fn(batch, outputs)
            loss = loss["total_loss"] if isinstance(loss, dict) else loss
        grads = tape.gradient(loss, variables)
        optimizer.apply_gradients(zip(grads, variables))
        return loss
    return (lambda: step().numpy()), int(sum(np.prod(v.shape) for v in variables))


def peak_memory(side, steps):
    """Peak resident MiB of `side`'s train steps, in a process of its own: the peak is
    reset (/proc/self/clear_refs) after the model is built and a first step traced, so
    that loading and tracing, the same on both sides, do not hide the steps'."""
    code = (f"import sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); "
            "import lora_bench; "
            f"call, _ = lora_bench.make_side({side!r}); call(); "
            "open('/proc/self/clear_refs', 'w').write('5'); "
            f"[call() for _ in range({steps})]; "
            "print(lora_bench.resident_peak_mib())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    return float(done.stdout.strip().splitlines()[-1])


def resident_peak_mib():
    """This process's peak resident memory since the last reset (VmHWM), in MiB."""
    with open("/proc/self/status", encoding="utf-8") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise OSError("no VmHWM in /proc/self/status (not Linux)")


def folder_sizes(work_dir):
    """{side: MiB of its run folder's files} after 10 steps of bert-run-classifier."""
    data_dir = seed_summary.first_glue_rows(os.path.join(SHARED, "glue", "MRPC"), "MRPC",
                                            320, work_dir)
    sizes = {}
    for side in SIDES:
        output_dir = os.path.join(work_dir, side)
        subprocess.run([os.path.join(os.path.dirname(sys.executable), "bert-run-classifier"),
                        "--task_name=MRPC", f"--data_dir={data_dir}",
                        f"--init_checkpoint={CHECKPOINT}", f"--output_dir={output_dir}",
                        "--do_train", "--max_seq_length=64", "--num_train_epochs=1",
                        "--seed=1"] + (["--lora_rank=8"] if side == "lora" else []),
                       check=True, capture_output=True)
        sizes[side] = sum(os.path.getsize(os.path.join(root, name))
                          for root, _, names in os.walk(output_dir) for name in names
                          if not name.endswith(".tf_record")) / 2 ** 20
    return sizes


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3, help="Train steps a side a round.")
    parser.add_argument("--rounds", type=int, default=8, help="Alternating rounds.")
    args = parser.parse_args()
    print(machine.describe(), flush=True)
    calls, counts = {}, {}
    for side in SIDES:
        calls[side], counts[side] = make_side(side)
    rates = model_bench.run_rounds(calls, args.steps, args.rounds, batch=BATCH)
    ratios = np.array(rates["lora"]) / np.array(rates["full"])
    memory = {side: peak_memory(side, args.steps) for side in SIDES}
    sizes = folder_sizes(tempfile.mkdtemp(prefix="lora_bench_"))
    print("| | full fine-tuning | LoRA r=8 (query, value) |\n| --- | --- | --- |")
    print(f"| trained weights | {counts['full']:,} | {counts['lora']:,} "
          f"({100 * counts['lora'] / counts['full']:.2f}%) |")
    print(f"| run folder, 10 steps (MiB) | {sizes['full']:.1f} | {sizes['lora']:.1f} |")
    print(f"| train step, median seq/s | {np.median(rates['full']):.1f} | "
          f"{np.median(rates['lora']):.1f} |")
    print(f"| peak memory of the steps (MiB, own process) | {memory['full']:.0f} | "
          f"{memory['lora']:.0f} |")
    print(f"LoRA / full step speed: median {np.median(ratios):.2f}x "
          f"({ratios.min():.2f}x to {ratios.max():.2f}x) over {args.rounds} rounds of "
          f"{args.steps} steps, batch {BATCH} x {SEQ}")
    print(json.dumps({"counts": counts, "sizes_mib": sizes, "memory_mib": memory,
                      "ratios": ratios.tolist()}))


if __name__ == "__main__":
    main()
