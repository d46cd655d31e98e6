"""The reference side of serving_latency.py: Hugging Face transformers'
`pipeline("text-classification")` (PyTorch, CPU) on the folder that
`bert-export-model --export_format=huggingface` wrote, timed as serving_latency.py times
the SavedModel: the same text pairs, batch sizes and number of requests, warm-up calls
excluded, the wall-clock time of each call (`time.perf_counter`), torch threads =
`os.cpu_count()` (`--threads`).

Run with a Python that has `torch` and `transformers` (an optional bench dependency,
never a package one), e.g. /work/venv-ref/bin/python:

    /work/venv-ref/bin/python bench/reference_serving_latency.py --model_dir=WORK/huggingface \
        --texts_file=WORK/texts.json --batch_sizes=1,32 --requests=200 --warmup=10 \
        --check_texts=8 --output=WORK/reference.json

`--texts_file`: a JSON list of [text_a, text_b] pairs. Request i at batch size B sends
the pairs i*B .. i*B+B-1 (cycling over the list); a batch of one is one `{"text",
"text_pair"}` dict, a larger batch a list of B of them with `batch_size=B`. Tokenization
(the tokenizer of the folder, truncated longest-first to --max_seq_length) and the
post-processing into labels are inside the timed call, as in the SavedModel's raw-text
signature. Writes one JSON object to `--output`: the latencies in ms per batch size,
and the logits of the first --check_texts pairs (the pipeline with
`function_to_apply="none"`, every label) for the outputs' check.
"""

import argparse
import json
import os
import time

import torch
import transformers


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--model_dir", required=True, help="a transformers folder")
    parser.add_argument("--texts_file", required=True, help="JSON list of [a, b] pairs")
    parser.add_argument("--output", required=True, help="JSON file to write")
    parser.add_argument("--batch_sizes", default="1,32", help="comma-separated")
    parser.add_argument("--requests", type=int, default=200, help="timed calls a size")
    parser.add_argument("--warmup", type=int, default=10, help="untimed calls first")
    parser.add_argument("--check_texts", type=int, default=8,
                        help="pairs whose logits are returned for the outputs' check")
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="torch.set_num_threads (default: os.cpu_count())")
    parser.add_argument("--padding", default="longest", choices=("longest", "max_length"),
                        help="longest: the pipeline's own (a batch padded to its longest "
                             "row); max_length: every row padded to --max_seq_length, as "
                             "the SavedModel's rows")
    return parser.parse_args()


def requests_of(pairs, batch_size, count):
    """`count` pipeline inputs of `batch_size` pairs each, cycling over `pairs`."""
    def item(index):
        text_a, text_b = pairs[index % len(pairs)]
        return {"text": text_a, "text_pair": text_b}
    calls = [[item(call * batch_size + row) for row in range(batch_size)]
             for call in range(count)]
    return [call[0] if batch_size == 1 else call for call in calls]


def time_calls(pipe, calls, warmup, **kwargs):
    """Latencies in ms of `pipe` on each call after `warmup` untimed ones."""
    for index in range(warmup):
        pipe(calls[index % len(calls)], **kwargs)
    latencies = []
    for call in calls:
        started = time.perf_counter()
        pipe(call, **kwargs)
        latencies.append(1000 * (time.perf_counter() - started))
    return latencies


def check_logits(pipe, pairs, tokenizer_kwargs):
    """Logits [N, C] of `pairs` in label-id order, through the pipeline itself."""
    label2id = pipe.model.config.label2id
    logits = []
    for text_a, text_b in pairs:
        scores = pipe({"text": text_a, "text_pair": text_b}, function_to_apply="none",
                      top_k=None, **tokenizer_kwargs)
        row = [0.0] * len(label2id)
        for score in scores:
            row[label2id[score["label"]]] = float(score["score"])
        logits.append(row)
    return logits


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    with open(args.texts_file, encoding="utf-8") as file:
        pairs = json.load(file)
    if not pairs:
        raise ValueError(f"{args.texts_file} holds no text pairs; expected a JSON list of "
                         "[text_a, text_b]")
    pipe = transformers.pipeline("text-classification", model=args.model_dir,
                                 tokenizer=args.model_dir, device="cpu")
    tokenizer_kwargs = dict(truncation="longest_first", max_length=args.max_seq_length,
                            padding=args.padding)
    latencies = {}
    with torch.inference_mode():
        for batch_size in (int(size) for size in args.batch_sizes.split(",")):
            calls = requests_of(pairs, batch_size, args.requests)
            batching = {} if batch_size == 1 else {"batch_size": batch_size}
            latencies[str(batch_size)] = time_calls(pipe, calls, args.warmup, **batching,
                                                    **tokenizer_kwargs)
        logits = check_logits(pipe, pairs[:args.check_texts], tokenizer_kwargs)
    result = {"latencies_ms": latencies, "check_logits": logits,
              "torch_threads": torch.get_num_threads(), "torch": torch.__version__,
              "transformers": transformers.__version__,
              "tokenizer": type(pipe.tokenizer).__name__, "padding": args.padding}
    with open(args.output, "w", encoding="utf-8") as file:
        json.dump(result, file)


if __name__ == "__main__":
    main()
