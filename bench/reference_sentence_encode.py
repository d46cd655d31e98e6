"""The reference side of sentence_encode_speed.py: sentence-transformers' `encode`
(PyTorch, CPU) on the folder that `bert-export-model --export_format=sentence_transformers`
wrote, timed as sentence_encode_speed.py times `bert-encode`'s library: the same texts,
the whole list a pass at each batch size (`encode` sorts by length and pads each batch to
its longest, as we do), one untimed pass of the first batch first, the wall-clock time of
the pass (`time.perf_counter`), torch threads = `--threads`.

Run with a Python that has sentence-transformers (a bench dependency, never a package
one):

    .venv/bin/python bench/reference_sentence_encode.py --model_dir=WORK/sentence_transformers \
        --texts_file=WORK/texts.json --batch_sizes=1,32,128 --output=WORK/reference.json

Writes one JSON object to `--output`: seconds and texts/s per batch size, and the
vectors of the first `--check_texts` texts.
"""

import argparse
import json
import os
import time

import torch
from sentence_transformers import SentenceTransformer


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--model_dir", required=True, help="a sentence-transformers folder")
    parser.add_argument("--texts_file", required=True, help="JSON list of texts")
    parser.add_argument("--output", required=True, help="JSON file to write")
    parser.add_argument("--batch_sizes", default="1,32,128", help="comma-separated")
    parser.add_argument("--check_texts", type=int, default=16, help="vectors returned")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="torch threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with open(args.texts_file, encoding="utf-8") as file:
        texts = json.load(file)
    model = SentenceTransformer(args.model_dir, device="cpu")
    result = {"threads": args.threads, "speed": {}}
    for batch_size in (int(size) for size in args.batch_sizes.split(",")):
        model.encode(texts[:batch_size], batch_size=batch_size)  # warm-up
        start = time.perf_counter()
        model.encode(texts, batch_size=batch_size)
        seconds = time.perf_counter() - start
        result["speed"][str(batch_size)] = {"seconds": seconds,
                                            "texts_per_second": len(texts) / seconds}
    result["vectors"] = model.encode(texts[:args.check_texts]).tolist()
    with open(args.output, "w", encoding="utf-8") as file:
        json.dump(result, file)


if __name__ == "__main__":
    main()
