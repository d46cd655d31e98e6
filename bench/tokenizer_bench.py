"""Tokenizer speed on one core: original Python rules vs the batched in-graph path.

Usage:
  .venv/bin/python bench/tokenizer_bench.py [--data_dir=../shared/data] [--batch_size=256]
      [--input=xml|wikiextractor] [--cased] [--repeats=3]

Text: the English Wikipedia sample (`wiki/enwiki-sample-pages-articles.xml.bz2`, its
wikitext turned into plain text with mwparserfromhell, one paragraph per line), or the
WikiExtractor sample. Vocab: the 30,522-token uncased vocab of
`checkpoints/uncased_L-6_H-384_A-12`. TensorFlow runs with one intra-op and one
inter-op thread.

Rows: `FullTokenizer.tokenize` (pure Python, the original algorithm),
`CachedTokenizer.convert_texts_to_ids` (pure Python, the work per distinct word cached:
with an empty cache, then on the same text again), the batched path
`FullTokenizer.convert_texts_to_ids` (ids as Python lists, batches of --batch_size
lines), the same graph on tensors (`GraphWordpiece.tokenize_ids`, ragged ids out), the
offsets path (`tokenize_batch_with_offsets`) and, for reference, bare
`tensorflow_text.FastBertTokenizer`, which does not follow the original rules. The
agreement column compares each row with the Python tokens, line by line.
"""

import argparse
import bz2
import os
import pathlib
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # pylint: disable=wrong-import-position

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import machine  # pylint: disable=wrong-import-position
from bert_tf.text import cached_tokenizer  # pylint: disable=wrong-import-position
from bert_tf.text import tokenization  # pylint: disable=wrong-import-position

VOCAB = "checkpoints/uncased_L-6_H-384_A-12/vocab.txt"


def wikipedia_lines(data_dir, source):
    """Non-empty paragraphs of the English sample."""
    if source == "wikiextractor":
        import re  # pylint: disable=import-outside-toplevel
        text = (data_dir / "wiki" / "enwiki_wikiextractor_wiki_00").read_text(encoding="utf-8")
        text = re.sub(r"</?doc[^>]*>", "", text)
    else:
        import xml.etree.ElementTree as ElementTree  # pylint: disable=import-outside-toplevel
        import mwparserfromhell  # pylint: disable=import-outside-toplevel
        pages = []
        with bz2.open(data_dir / "wiki" / "enwiki-sample-pages-articles.xml.bz2") as stream:
            for _, element in ElementTree.iterparse(stream):
                if element.tag.endswith("}text") and element.text:
                    pages.append(mwparserfromhell.parse(element.text).strip_code())
                if element.tag.endswith("}page"):
                    element.clear()
        text = "\n".join(pages)
    return [line for line in text.split("\n") if line.strip()]


def batches(items, size):
    return [items[i:i + size] for i in range(0, len(items), size)]


def timed(function, repeats):
    """Best wall time and best process CPU time of `repeats` runs, and the last result.

    CPU time is the steadier figure on a shared machine: it does not count the time the
    process waits for a core.
    """
    best_wall, best_cpu, result = float("inf"), float("inf"), None
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        result = function()
        best_wall = min(best_wall, time.perf_counter() - wall)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    return (best_wall, best_cpu), result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data_dir", default=str(REPO.parent / "shared" / "data"))
    parser.add_argument("--input", choices=("xml", "wikiextractor"), default="xml")
    parser.add_argument("--batch_size", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cased", action="store_true")
    args = parser.parse_args()
    print(machine.describe(), flush=True)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    data_dir = pathlib.Path(args.data_dir)
    vocab_file = data_dir / VOCAB
    if not vocab_file.is_file():
        sys.exit(f"vocab not found: {vocab_file} (pass --data_dir)")
    lines = wikipedia_lines(data_dir, args.input)
    megabytes = sum(len(line.encode("utf-8")) for line in lines) / 1e6
    lower = not args.cased
    tokenizer = tokenization.FullTokenizer(str(vocab_file), do_lower_case=lower)
    print(f"text: {len(lines):,} lines, {megabytes:.2f} MB ({args.input}); vocab "
          f"{len(tokenizer.vocab):,} ({'uncased' if lower else 'cased'}); one core; "
          f"batch {args.batch_size} lines; best of {args.repeats}")

    rows = []
    seconds, python_tokens = timed(lambda: [tokenizer.tokenize(t) for t in lines], 1)
    reference = [tokenizer.convert_tokens_to_ids(tokens) for tokens in python_tokens]
    rows.append(("FullTokenizer.tokenize (Python)", seconds, reference))

    cached = {}

    def cached_ids(fresh):
        if fresh or not cached:
            cached[0] = cached_tokenizer.CachedTokenizer(tokenizer.vocab, lower)
        return cached[0].convert_texts_to_ids(lines)

    seconds, ids = timed(lambda: cached_ids(fresh=True), args.repeats)
    rows.append(("CachedTokenizer, first pass (empty cache)", seconds, ids))
    seconds, ids = timed(lambda: cached_ids(fresh=False), args.repeats)
    rows.append(("CachedTokenizer, again (words cached)", seconds, ids))

    chunks = batches(lines, args.batch_size)
    tokenizer.convert_texts_to_ids(chunks[0])  # build and trace once
    seconds, ids = timed(lambda: [row for chunk in chunks
                                  for row in tokenizer.convert_texts_to_ids(chunk)],
                         args.repeats)
    rows.append(("convert_texts_to_ids (batched)", seconds, ids))

    graph = tokenizer._graph()  # pylint: disable=protected-access
    function = tf.function(graph.tokenize_ids, input_signature=[tf.TensorSpec([None], tf.string)])
    tensors = [tf.constant([t.encode("utf-8") for t in chunk]) for chunk in chunks]
    function(tensors[0])
    seconds, ragged = timed(lambda: [function(t) for t in tensors], args.repeats)
    rows.append(("graph only (tensors in, ragged out)", seconds,
                 [row for r in ragged for row in r.to_list()]))

    tokenizer.tokenize_batch_with_offsets(chunks[0])
    seconds, with_offsets = timed(lambda: [row for chunk in chunks for row in
                                           tokenizer.tokenize_batch_with_offsets(chunk)[0]], 1)
    rows.append(("tokenize_batch_with_offsets (exact path)", seconds, with_offsets))

    import tensorflow_text as tf_text  # pylint: disable=import-outside-toplevel
    bare = tf_text.FastBertTokenizer(list(tokenizer.vocab), lower_case_nfd_strip_accents=lower,
                                     token_out_type=tf.int64)
    bare_function = tf.function(bare.tokenize)
    bare_function(tensors[0])
    seconds, ragged = timed(lambda: [bare_function(t) for t in tensors], args.repeats)
    rows.append(("bare FastBertTokenizer (not the rules)", seconds,
                 [row for r in ragged for row in r.to_list()]))

    print(f"{'path':42s} {'wall s':>7s} {'cpu s':>7s} {'tokens':>9s} {'tokens/s':>10s} "
          f"{'MB/s':>6s} {'MB/s cpu':>8s}  agreement")
    for name, (wall, cpu), result in rows:
        tokens = sum(map(len, result))
        differing = sum(1 for a, b in zip(result, reference) if a != b)
        agreement = ("identical" if differing == 0 else
                     f"{differing} lines differ ({tokens - sum(map(len, reference)):+d} tokens)")
        print(f"{name:42s} {wall:7.2f} {cpu:7.2f} {tokens:9,d} {tokens / wall:10,.0f} "
              f"{megabytes / wall:6.2f} {megabytes / cpu:8.2f}  {agreement}")
    print("tokens/s and MB/s: wall clock; MB/s cpu: process CPU time (steadier when the "
          "machine is shared)")


if __name__ == "__main__":
    main()
