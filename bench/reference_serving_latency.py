"""The reference sides of serving_latency.py, in a Python with torch, transformers and
onnxruntime (an optional bench dependency, never a package one), as a worker that
serving_latency.py drives round by round so that every side is timed in the same
alternating rounds (ABBA) as its own:

- `ort_hf`: ONNX Runtime on the transformers folder that `bert-export-model
  --export_format=huggingface` wrote, converted here with `torch.onnx.export` (opset 17,
  batch and length dynamic: what optimum and the "BERT on CPU" guides end with); the
  folder's fast tokenizer (Rust `tokenizers`) inside the timed call, a batch padded to its
  longest row, truncated longest-first to --max_seq_length.
- `ort_onnx`, `ort_onnx_int8`: ONNX Runtime on `--export_format=onnx`'s model.onnx
  (float32, `--quantize=int8`), the same tokenizer and call (ids cast to int32, the
  export's inputs).
- `pipeline`: transformers' `pipeline("text-classification")` on PyTorch, post-processing
  into labels inside the call (torch threads: --threads).

    .venv/bin/python bench/reference_serving_latency.py --model_dir=WORK/huggingface \
        --onnx_dir=WORK/onnx --onnx_int8_dir=WORK/onnx_int8 --texts_file=WORK/texts.json \
        --work_dir=WORK --sides=ort_hf,ort_onnx,ort_onnx_int8

Protocol: one JSON object a line on stdin, one answer a line on stdout (everything else
goes to stderr). `{"side": S, "batch_size": B, "calls": [i, ...]}` runs call i (the
pairs i*B .. i*B+B-1, cycling over --texts_file) for each i, each timed by wall clock
(`time.perf_counter`), and answers `{"latencies_ms": [...]}`; `{"check": N}` answers
`{"logits": {side: [[...], ...]}}`, each side's logits of the first N pairs one by one;
`{"versions": true}` the libraries' versions; end of input ends the worker. It answers
`{"ready": ...}` once every side is loaded.
"""

import argparse
import json
import os
import sys
import time

import numpy as np
import onnxruntime as ort
import torch
import transformers

SIDES = ("ort_hf", "ort_onnx", "ort_onnx_int8", "pipeline")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--model_dir", required=True, help="a transformers folder")
    parser.add_argument("--onnx_dir", help="--export_format=onnx's folder (ort_onnx)")
    parser.add_argument("--onnx_int8_dir", help="its --quantize=int8 folder")
    parser.add_argument("--texts_file", required=True, help="JSON list of [a, b] pairs")
    parser.add_argument("--work_dir", required=True, help="where hf.onnx is written")
    parser.add_argument("--sides", default="ort_hf,ort_onnx,ort_onnx_int8",
                        help=f"comma-separated, of {', '.join(SIDES)}")
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="torch.set_num_threads (default: os.cpu_count())")
    parser.add_argument("--ort_threads", type=int, default=0,
                        help="ONNX Runtime intra-op threads (0: its default, one a core)")
    return parser.parse_args()


def export_hf_onnx(model_dir, path, max_seq_length):
    """torch.onnx.export of the folder's sequence classifier, batch and length dynamic."""
    model = transformers.AutoModelForSequenceClassification.from_pretrained(model_dir)
    model.eval()
    names = ["input_ids", "attention_mask", "token_type_ids"]
    example = torch.ones(1, min(16, max_seq_length), dtype=torch.long)
    axes = {name: {0: "batch", 1: "sequence"} for name in names}
    torch.onnx.export(model, (example, example, torch.zeros_like(example)), path,
                      input_names=names, output_names=["logits"], opset_version=17,
                      dynamic_axes=dict(axes, logits={0: "batch"}), dynamo=False)
    return path


class OrtSide:
    """ONNX Runtime on one .onnx file, the HF tokenizer inside the call."""

    def __init__(self, path, tokenizer, max_seq_length, threads, int32_inputs):
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        self.session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        self.tokenizer, self.max_seq_length = tokenizer, max_seq_length
        self.int32_inputs = int32_inputs

    def __call__(self, pairs):
        encoded = self.tokenizer([a for a, _ in pairs], [b for _, b in pairs],
                                 truncation="longest_first", max_length=self.max_seq_length,
                                 padding="longest", return_tensors="np")
        if self.int32_inputs:  # --export_format=onnx's inputs
            feed = {"input_ids": encoded["input_ids"].astype(np.int32),
                    "input_mask": encoded["attention_mask"].astype(np.int32),
                    "segment_ids": encoded["token_type_ids"].astype(np.int32)}
        else:
            feed = {name: encoded[name] for name in
                    ("input_ids", "attention_mask", "token_type_ids")}
        (logits,) = self.session.run(["logits"], feed)
        return logits.argmax(-1), logits


class PipelineSide:
    """transformers' text-classification pipeline (labels out, as a server answers)."""

    def __init__(self, model_dir, max_seq_length):
        self.pipe = transformers.pipeline("text-classification", model=model_dir,
                                          tokenizer=model_dir, device="cpu")
        self.kwargs = dict(truncation="longest_first", max_length=max_seq_length,
                           padding="longest")

    def __call__(self, pairs):
        items = [{"text": a, "text_pair": b} for a, b in pairs]
        with torch.inference_mode():
            if len(items) == 1:
                return self.pipe(items[0], **self.kwargs), None
            return self.pipe(items, batch_size=len(items), **self.kwargs), None

    def logits(self, pairs):
        """[N, C] logits of `pairs` in label-id order, one by one through the pipeline."""
        label2id = self.pipe.model.config.label2id
        rows = []
        for a, b in pairs:
            with torch.inference_mode():
                scores = self.pipe({"text": a, "text_pair": b}, function_to_apply="none",
                                   top_k=None, **self.kwargs)
            row = [0.0] * len(label2id)
            for score in scores:
                row[label2id[score["label"]]] = float(score["score"])
            rows.append(row)
        return np.asarray(rows)


def load_sides(args):
    """{side name: callable(pairs) -> (answer, logits)} of --sides."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(args.model_dir)
    sides = {}
    for name in args.sides.split(","):
        if name == "ort_hf":
            path = export_hf_onnx(args.model_dir, os.path.join(args.work_dir, "hf.onnx"),
                                  args.max_seq_length)
            sides[name] = OrtSide(path, tokenizer, args.max_seq_length, args.ort_threads,
                                  int32_inputs=False)
        elif name in ("ort_onnx", "ort_onnx_int8"):
            folder = args.onnx_dir if name == "ort_onnx" else args.onnx_int8_dir
            sides[name] = OrtSide(os.path.join(folder, "model.onnx"), tokenizer,
                                  args.max_seq_length, args.ort_threads, int32_inputs=True)
        elif name == "pipeline":
            sides[name] = PipelineSide(args.model_dir, args.max_seq_length)
        else:
            raise ValueError(f"unknown side {name!r}; expected some of {', '.join(SIDES)}")
    return sides


def check_logits(side, pairs):
    """[N, C] logits of `pairs`, one call a pair."""
    if hasattr(side, "logits"):
        return side.logits(pairs)
    return np.concatenate([side([pair])[1] for pair in pairs])


def answer(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    with open(args.texts_file, encoding="utf-8") as file:
        pairs = json.load(file)
    sides = load_sides(args)
    answer({"ready": sorted(sides)})
    for line in sys.stdin:
        request = json.loads(line)
        if "check" in request:
            answer({"logits": {name: check_logits(side, pairs[:request["check"]]).tolist()
                               for name, side in sides.items()}})
        elif "versions" in request:
            answer({"onnxruntime": ort.__version__, "torch": torch.__version__,
                    "transformers": transformers.__version__,
                    "torch_threads": torch.get_num_threads()})
        else:
            side, size = sides[request["side"]], request["batch_size"]
            latencies = []
            for call in request["calls"]:
                batch = [pairs[(call * size + row) % len(pairs)] for row in range(size)]
                started = time.perf_counter()
                side(batch)
                latencies.append(1000 * (time.perf_counter() - started))
            answer({"latencies_ms": latencies})


if __name__ == "__main__":
    main()
