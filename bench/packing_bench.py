"""Useful tokens/s with and without sequence packing, and masked-LM accuracy of plain,
packed and dynamically masked runs, on the English Wikipedia sample at seq 512.

Data (untimed, cached in --work_dir): the English dump slice as text (as
bench/pretraining_data_bench.py makes it), then create_pretraining_data at
max_seq_length 512, max_predictions_per_seq 76, dupe_factor 1, uncased 30,522 vocab:
once with masks (plain and packed runs) and once with --masking=none (dynamic run).

1. Throughput: `pretraining.run_pretraining` (the whole runner: tf.data, packing, XLA
   train step) for --steps steps of --batch rows, plain and packed (up to 3 instances
   a row) alternating --repeats times in this one process, best run of each; rows/s
   from the runner's loops after the first
   (compiling) one, times the mean real (non-padding) tokens per row of that pipeline
   gives useful tokens/s. Padding share = 1 - real tokens / (rows * 512).
2. Quality: plain, packed and dynamic runs from the same seed, each trained on the
   same number of useful tokens (--quality_tokens), then evaluated on the same held-out
   masked records (the last file; unpacked, static masks): masked-LM accuracy.

Tiny model (L2/H128/A2/I512) so that it runs in minutes on 2 CPU cores.

    .venv/bin/python bench/packing_bench.py
"""

import argparse
import os
import pathlib
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import logging  # noqa: E402

import machine  # noqa: E402
import pretraining_data_bench  # noqa: E402
from bert_tf.configs import BertConfig  # noqa: E402
from bert_tf.tasks.pretraining import task as pretraining  # noqa: E402
from bert_tf.tasks.pretraining.options import PretrainingOptions  # noqa: E402
from bert_tf.text import tokenization  # noqa: E402
from bert_tf.text.vocab import VocabFile  # noqa: E402
from bert_tf.train import distribute, loop, records  # noqa: E402
from data_prep import pretraining_instances, pretraining_pipeline, wikipedia  # noqa: E402

SEQ, PREDICTIONS, PER_ROW = 512, 76, 3
SHARED = pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "data"


def make_records(text, vocab_file, work, masking):
    """Records of the text at seq 512 (4 shards; the last is held out for eval)."""
    prefix = work / f"wiki512_{masking}.tfrecord"
    outputs = pretraining_pipeline.resolve_output_files(str(prefix), 4)
    if not all(os.path.exists(p) for p in outputs):
        tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
        options = pretraining_instances.InstanceOptions(
            max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS, dupe_factor=1,
            masking=masking)
        config = pretraining_pipeline.PipelineConfig(
            input_files=wikipedia.resolve_input_files(str(text)), output_files=outputs,
            random_seed=1)
        pretraining_pipeline.create_pretraining_data(tokenizer, options, config)
    return outputs


def make_config():
    return BertConfig(vocab_size=30522, hidden_size=128, num_hidden_layers=2,
                      num_attention_heads=2, intermediate_size=512,
                      max_position_embeddings=SEQ, type_vocab_size=2,
                      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def _options(train_files, vocab_file, workdir, batch, steps, steps_per_loop, mode, seed):
    return PretrainingOptions(
        do_train=True, bert_config=make_config(), input_file=",".join(train_files),
        output_dir=tempfile.mkdtemp(dir=workdir), max_seq_length=SEQ,
        max_predictions_per_seq=PREDICTIONS, train_batch_size=batch, learning_rate=1e-3,
        num_train_steps=steps, num_warmup_steps=max(1, steps // 10),
        save_checkpoints_steps=steps, steps_per_loop=steps_per_loop, use_xla=True,
        seed=seed, pack_sequences=mode == "packed", max_sequences_per_row=PER_ROW,
        dynamic_masking=mode == "dynamic", vocab_file=vocab_file)


def tokens_per_row(options, batches=150):
    """Mean real tokens per row of the training pipeline, over `batches` batches (about
    an epoch of the three training shards at 8 rows a batch)."""
    vocab = VocabFile.read(options.vocab_file) if options.dynamic_masking else None
    dataset = pretraining.dataset_fn_for(
        options, True, pretraining.masking_options(options, vocab))(None)
    counts = [float(b["input_mask"].numpy().sum()) / len(b["input_mask"].numpy())
              for b in dataset.take(batches)]
    return float(np.mean(counts))


def throughput(options):
    """(rows/s after the first loop, real tokens per row)."""
    result = pretraining.run_pretraining(options, distribute.get_strategy("one_device"))
    rates = [h["sequences_per_second"] for h in result["train"].history[1:]]
    return float(np.mean(rates)), tokens_per_row(options)


def accuracy(options, eval_files):
    """Masked-LM accuracy on the held-out masked records (unpacked, static masks)."""
    result = pretraining.run_pretraining(options, distribute.get_strategy("one_device"))
    eval_options = _options(eval_files, None, options.output_dir, 8, 1, 1, "plain", 0)
    results = loop.evaluate(
        distribute.get_strategy("one_device"), result["train"].model,
        pretraining.dataset_fn_for(eval_options, False),
        pretraining.pretraining_metrics)
    return results["masked_lm_accuracy"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dump", default=str(
        SHARED / "wiki" / "enwiki-sample-pages-articles.xml.bz2"))
    parser.add_argument("--vocab_file", default=str(
        SHARED / "checkpoints" / "uncased_L-6_H-384_A-12" / "vocab.txt"))
    parser.add_argument("--work_dir", default="/tmp/bert_tf_packing_bench")
    parser.add_argument("--batch", type=int, default=8, help="rows per step")
    parser.add_argument("--steps", type=int, default=50, help="throughput steps per path")
    parser.add_argument("--repeats", type=int, default=2,
                        help="alternating plain/packed throughput runs; best of each")
    parser.add_argument("--quality_tokens", type=int, default=400_000,
                        help="useful tokens each quality run trains on")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(machine.describe(), flush=True)
    logging.set_verbosity(logging.WARNING)
    work = pathlib.Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    text = work / "enwiki_sample.txt"
    pretraining_data_bench.make_text(pathlib.Path(args.dump), text)
    masked = make_records(text, args.vocab_file, work, "static")
    unmasked = make_records(text, args.vocab_file, work, "none")
    train, held_out = masked[:-1], masked[-1:]
    print(f"{os.cpu_count()} cpus; records at seq {SEQ}: {len(masked)} shards "
          f"(the last held out for eval)", flush=True)

    with tempfile.TemporaryDirectory() as workdir:
        figures = {}
        # Plain and packed alternate, best of --repeats each: on a shared machine the
        # load changes between runs, and alternating exposes both sides to it alike.
        for repeat in range(args.repeats):
            for mode in ("plain", "packed"):
                options = _options(train, None, workdir, args.batch, args.steps, 10, mode,
                                   args.seed)
                start = time.time()
                rows_per_second, per_row = throughput(options)
                if rows_per_second > figures.get(mode, (0.0,))[0]:
                    figures[mode] = (rows_per_second, per_row)
                print(f"{mode} (run {repeat + 1}): {rows_per_second:.2f} rows/s, "
                      f"{per_row:.1f} real tokens/row, padding "
                      f"{100 * (1 - per_row / SEQ):.1f}%, useful "
                      f"{rows_per_second * per_row:,.0f} tokens/s "
                      f"({time.time() - start:.0f} s)", flush=True)
        print(f"best: plain {figures['plain'][0]:.2f}, packed {figures['packed'][0]:.2f} "
              "rows/s", flush=True)
        ratio = (figures["packed"][0] * figures["packed"][1]) / (
            figures["plain"][0] * figures["plain"][1])
        print(f"useful tokens/s, packed / plain: {ratio:.2f}x (target >= 1.6x; at most "
              f"{SEQ / figures['plain'][1]:.2f}x for the plain rows' padding share at equal "
              "rows/s)", flush=True)

        for mode, files in (("plain", train), ("packed", train),
                            ("dynamic", unmasked[:-1])):
            per_row = figures.get(mode, figures["plain"])[1]
            steps = max(10, round(args.quality_tokens / (per_row * args.batch)))
            options = _options(files, args.vocab_file, workdir, args.batch, steps,
                               steps, mode, args.seed)
            value = accuracy(options, held_out)
            print(f"quality {mode}: {steps} steps x {args.batch} rows "
                  f"(~{steps * args.batch * per_row:,.0f} useful tokens), held-out "
                  f"masked-LM accuracy {value:.4f}", flush=True)


if __name__ == "__main__":
    main()
