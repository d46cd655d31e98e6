"""Corpus -> pre-training TFRecords: chunked, parallel, deterministic, bounded memory.

The corpus is cut, in reading order, into chunks of whole documents of about
`chunk_chars` characters. A chunk is the unit of everything: its documents are
shuffled and paired (random-next segments come from the same chunk), it gets its own
generators derived from `random_seed` and its index, and its shuffled instances are
written before the next chunk's, round-robin over the output shards. The output for a
seed is therefore the same for any `num_workers`, and memory holds only the chunks in
flight (never all the instances of the corpus, as the original does).

Processes: the main process reads the files, cuts the chunks, tokenizes chunks of
sentences (`bert_tf.text.cached_tokenizer`, pure Python and exact: one token cache) and
writes the records; it and `num_workers - 1` worker processes build chunks: sentence
splitting and tokenization of wiki text, instances, serialized `tf.train.Example` bytes
and their TFRecord framing (`data_prep.record_writing`). A worker sends back one bytes
object per chunk. No process imports TensorFlow, so all start in a fraction of a second
and stay small.
"""

import collections
import concurrent.futures
import contextlib
import dataclasses
import itertools
import json
import multiprocessing
import os
import sys
import threading
import time
from typing import Counter, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
from absl import logging

from bert_tf.io import fileio
from bert_tf.text import cached_tokenizer
from data_prep import example_encoding
from data_prep import full_sentences
from data_prep import pretraining_instances
from data_prep import process_lifetime
from data_prep import record_writing
from data_prep import wikipedia
from data_prep import word_segmentation

STATS_SUFFIX = record_writing.STATS_SUFFIX
TOKENIZER_BATCH = 4096  # sentences per call of the batched tokenizer


@dataclasses.dataclass
class ChunkResult:
    """Serialized Examples of one chunk and its stats (build_chunk_records)."""
    records: List[bytes]
    stats: Dict[str, int]


@dataclasses.dataclass
class FramedChunkResult:
    """A chunk done in a worker: its records in TFRecord framing, and its stats."""
    framed: record_writing.FramedRecords
    stats: Dict[str, int]


def resolve_output_files(output_file: str, num_output_shards: int = 1) -> List[str]:
    """Output paths: a comma-separated list, or one name expanded to shards.

    `name` with num_output_shards=N > 1 gives `name-00000-of-0000N` ... .
    """
    names = [name.strip() for name in str(output_file).split(",") if name.strip()]
    if not names:
        raise ValueError("output_file is empty: expected a file name or a comma-separated list")
    if num_output_shards < 1:
        raise ValueError(f"num_output_shards={num_output_shards}: expected >= 1")
    if num_output_shards > 1:
        if len(names) != 1:
            raise ValueError(
                f"output_file lists {len(names)} files and num_output_shards="
                f"{num_output_shards}: give one name to shard, or the list alone")
        names = [f"{names[0]}-{i:05d}-of-{num_output_shards:05d}"
                 for i in range(num_output_shards)]
    for name in names + [names[0] + STATS_SUFFIX]:
        fileio.check_output_path(name)
    return names


# A chunk holds at least two documents, so that a "random next" segment comes from
# another document (with --chunk_chars=1 every chunk was one document, and its
# random-next pairs were the document's own sentences, labelled random).
MIN_CHUNK_DOCUMENTS = 2


def chunk_is_full(chars: int, documents: int, chunk_chars: int) -> bool:
    """Whether a chunk of `documents` documents and `chars` characters ends here: once
    it holds `chunk_chars` characters and `MIN_CHUNK_DOCUMENTS` documents (the local
    tool and the Beam pipeline cut the same chunks)."""
    return chars >= chunk_chars and documents >= MIN_CHUNK_DOCUMENTS


def check_shards_filled(instances: int, output_files: Sequence[str]) -> None:
    """Refuses more output files than instances: the extra shards would be empty (a
    glob of them reads as a larger data set than it is).

    Raises:
      ValueError: naming both counts and the largest shard count that works.
    """
    if instances < len(output_files):
        raise ValueError(
            f"{instances} instances for {len(output_files)} output files: "
            f"{len(output_files) - instances} of them would be empty; give at most "
            f"--num_output_shards={instances} (or more input); nothing was written")


def iter_raw_chunks(input_files: Sequence[str], input_format: str, chunk_chars: int,
                    stats: Counter, language: Optional[str] = None,
                    boundaries_files: Optional[Sequence[str]] = None
                    ) -> Iterator[List[wikipedia.RawDocument]]:
    """Whole documents in reading order, grouped until `chunk_chars` characters and two
    documents (`chunk_is_full`); with
    `boundaries_files` (one per input file) `word_segmentation.MarkedDocument`s."""
    chunk, size = [], 0
    for index, path in enumerate(input_files):
        documents = wikipedia.iter_raw_documents(path, input_format, stats, language)
        if boundaries_files:
            documents = word_segmentation.with_boundaries(
                documents, path, boundaries_files[index], stats, wikipedia.SENTENCES)
        for document in documents:
            chunk.append(document)
            content = document.content
            size += len(content) if isinstance(content, str) else sum(map(len, content))
            if chunk_is_full(size, len(chunk), chunk_chars):
                yield chunk
                chunk, size = [], 0
    if chunk:
        yield chunk


def convert_chunk(raw_documents: Sequence[wikipedia.RawDocument]) -> Tuple[List[List[str]], Dict[str, int]]:
    """Sentences of every raw document (wikitext parsing, sentence splitting)."""
    stats = collections.Counter()
    documents = [wikipedia.raw_document_to_sentences(d, stats) for d in raw_documents]
    return documents, dict(stats)


def ids_and_lengths(tokenizer, texts: Sequence[str]) -> Tuple[np.ndarray, np.ndarray]:
    """(flat int32 ids, int64 lengths) of the texts.

    `tokenizer`: a CachedTokenizer (the fast path), or any tokenizer with a batched
    `convert_texts_to_ids` (FullTokenizer's runs TensorFlow ops); the ids are the same.
    """
    if isinstance(tokenizer, cached_tokenizer.CachedTokenizer):
        return tokenizer.ids_and_lengths(texts)
    ids = []
    for start in range(0, len(texts), TOKENIZER_BATCH):
        ids.extend(tokenizer.convert_texts_to_ids(texts[start:start + TOKENIZER_BATCH]))
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int32,
                       count=int(lengths.sum()))
    return flat, lengths


def tokenize_chunk(tokenizer, documents: Sequence[Sequence[str]], stats: Counter,
                   segment: Optional[word_segmentation.Segmenter] = None,
                   boundaries: Optional[Sequence[word_segmentation.LineBoundaries]] = None):
    """Token ids of a chunk's sentences: (flat int32 ids, sentence ends, document ends).

    Args:
      tokenizer: see `ids_and_lengths`.
      documents: lists of sentences.
      stats: counts added to.
      segment: a word segmenter; the ids of tokens that continue a word get
        `word_segmentation.CONTINUATION_BIT`.
      boundaries: instead, the reference positions of each sentence, in order.
    """
    sentences = [s for document in documents for s in document]
    if segment is not None:
        flat, lengths = word_segmentation.tokenize_segmented(
            lambda texts: ids_and_lengths(tokenizer, texts), sentences, segment)
    else:
        flat, lengths = ids_and_lengths(tokenizer, sentences)
    if boundaries is not None:
        flat = word_segmentation.mark_boundaries(flat, lengths, boundaries)
    stats["sentences"] += len(sentences)
    stats["untokenizable_sentences"] += int((lengths == 0).sum())
    stats["input_tokens"] += int(lengths.sum())
    document_sizes = np.fromiter(map(len, documents), dtype=np.int64, count=len(documents))
    return flat, np.cumsum(lengths), np.cumsum(document_sizes)


def corpus_from_tokenized(flat, sentence_ends, document_ends) -> pretraining_instances.ChunkCorpus:
    """ChunkCorpus of tokenize_chunk's output; empty sentences and documents dropped."""
    sentence_ends = np.asarray(sentence_ends, dtype=np.int64)
    sentence_starts = np.concatenate([[0], sentence_ends[:-1]]).astype(np.int64)
    nonempty = sentence_ends > sentence_starts
    documents, first = [], 0
    for last in np.asarray(document_ends, dtype=np.int64).tolist():
        keep = nonempty[first:last]
        if keep.any():
            documents.append([int(sentence_starts[first:last][keep][0])]
                             + sentence_ends[first:last][keep].tolist())
        first = last
    return pretraining_instances.ChunkCorpus(np.asarray(flat, dtype=np.int32), documents)


# Worker-side state, set once per process by init_worker.
_WORKER = {}


def init_worker(options, vocab_ids, random_seed, tokenizer=None):
    """Sets what build_chunk_records reads (once per process: a pool or Beam worker)."""
    _WORKER.update(options=options, vocab_ids=vocab_ids, random_seed=random_seed,
                   tokenizer=tokenizer)


def raw_chunk_records(raw_documents: Sequence[wikipedia.RawDocument], chunk_index: int,
                      tokenizer) -> ChunkResult:
    """Everything of a chunk after reading: sentences, ids, instances, serialized
    Examples, and all of the chunk's stats (a pool worker, or a Beam worker)."""
    if any(d.kind != wikipedia.SENTENCES for d in raw_documents):
        documents, stats = convert_chunk(raw_documents)
        stats = collections.Counter(stats)
    else:
        documents, stats = [d.content for d in raw_documents], collections.Counter()
    segment = word_segmentation.load_segmenter(_WORKER["options"].word_segmenter)
    tokenized = tokenize_chunk(tokenizer, documents, stats, segment,
                               word_segmentation.boundaries_of(raw_documents))
    result = build_chunk_records(tokenized, chunk_index)
    stats.update(result.stats)
    return ChunkResult(result.records, dict(stats))


def build_raw_chunk_records(raw_documents: Sequence[wikipedia.RawDocument],
                            chunk_index: int) -> FramedChunkResult:
    """`raw_chunk_records` with the worker's tokenizer, its records framed."""
    result = raw_chunk_records(raw_documents, chunk_index, _WORKER["tokenizer"])
    return FramedChunkResult(record_writing.frame_records(result.records), result.stats)


def build_tokenized_chunk_records(tokenized, stats: Dict[str, int],
                                  chunk_index: int) -> FramedChunkResult:
    """Instances and framed records of a tokenized chunk (a worker's job: it sends back
    one bytes object, cheap to pass between processes); `stats` so far are added to."""
    result = build_chunk_records(tokenized, chunk_index)
    stats = collections.Counter(stats)
    stats.update(result.stats)
    return FramedChunkResult(record_writing.frame_records(result.records), dict(stats))


def build_chunk_records(tokenized, chunk_index: int) -> ChunkResult:
    """Serialized Examples of one tokenized chunk, shuffled (runs in a worker)."""
    options, vocab_ids = _WORKER["options"], _WORKER["vocab_ids"]
    corpus = corpus_from_tokenized(*tokenized)
    build = (pretraining_instances.build_chunk_instances if options.next_sentence
             else full_sentences.build_chunk_rows)
    chunk = build(corpus, options, vocab_ids, _WORKER["random_seed"], chunk_index)
    packed, masked = chunk.packed, chunk.masked
    column = np.arange(options.max_seq_length, dtype=np.int32)[None, :]
    valid = column < packed.lengths[:, None]
    segment_ids = valid & (column >= packed.segment_a_lengths[:, None])
    if not len(packed.lengths):  # a chunk without usable documents
        return ChunkResult([], _chunk_stats(chunk, corpus, vocab_ids, options))
    input_ids, marks = word_segmentation.split_marks(packed.input_ids)
    features = {"input_ids": input_ids if masked is None else masked.input_ids,
                "input_mask": valid.view(np.uint8),
                "segment_ids": segment_ids.view(np.uint8)}
    if masked is None and options.segments_words:  # the words, for dynamic masking
        special = (input_ids == vocab_ids.cls_id) | (input_ids == vocab_ids.sep_id)
        features[word_segmentation.WORD_STARTS] = word_segmentation.word_starts(
            input_ids, marks, valid, special, vocab_ids.is_continuation)
    if masked is not None:
        features.update(masked_lm_positions=masked.masked_lm_positions,
                        masked_lm_ids=masked.masked_lm_ids,
                        masked_lm_weights=masked.masked_lm_weights)
    if options.next_sentence:
        features["next_sentence_labels"] = packed.next_sentence_labels[:, None]
    records = example_encoding.serialize_examples(features)
    return ChunkResult(records, _chunk_stats(chunk, corpus, vocab_ids, options))


def _chunk_stats(chunk, corpus, vocab_ids, options) -> Dict[str, int]:
    packed, masked = chunk.packed, chunk.masked
    if masked is None:  # masking="none": no masks to count
        masked = pretraining_instances.MaskedBatch(
            word_segmentation.split_marks(packed.input_ids)[0],
            np.zeros([len(packed.lengths), 0], np.int32),
            np.zeros([len(packed.lengths), 0], np.int32),
            np.zeros([len(packed.lengths), 0], np.float32))
    weights = masked.masked_lm_weights > 0
    rows, slots = np.nonzero(weights)
    replaced_by = masked.input_ids[rows, masked.masked_lm_positions[rows, slots]]
    labels = masked.masked_lm_ids[rows, slots]
    is_mask = replaced_by == vocab_ids.mask_id
    return {
        "documents": chunk.num_documents,
        "single_sentence_documents": sum(1 for d in corpus.documents if len(d) == 2),
        "instances": int(len(packed.lengths)),
        "instance_tokens": int(packed.lengths.sum()),
        "short_instances": int((packed.lengths < options.max_seq_length).sum()),
        "masked_tokens": int(weights.sum()),
        "masked_replaced_by_mask": int(is_mask.sum()),
        "masked_kept_original": int(((replaced_by == labels) & ~is_mask).sum()),
        "masked_replaced_by_random": int(((replaced_by != labels) & ~is_mask).sum()),
        "next_sentence_random": int(packed.next_sentence_labels.sum()),
    }


@dataclasses.dataclass
class PipelineConfig:
    """Everything create_pretraining_data needs besides the instance options."""
    input_files: Sequence[str]
    output_files: Sequence[str]
    random_seed: int = 12345
    input_format: str = "auto"
    num_workers: int = 1
    gzip: bool = False
    chunk_chars: int = 1_000_000
    language: Optional[str] = None
    log_every_seconds: float = 10.0
    stats_file: Optional[str] = None  # default: the first output file + ".stats.json"


def stats_path_of(config) -> Optional[str]:
    """Where the stats go: `stats_file`, else beside the first output file; None when that
    output is a device or FIFO (`--output_file=/dev/null` writes nothing beside it)."""
    if config.stats_file:
        return config.stats_file
    first = config.output_files[0]
    return None if fileio.is_special_file(first) else first + STATS_SUFFIX


def create_pretraining_data(tokenizer, options: pretraining_instances.InstanceOptions,
                            config: PipelineConfig,
                            vocab_ids: Optional[pretraining_instances.VocabIds] = None
                            ) -> Dict[str, object]:
    """Writes the pre-training TFRecords and the stats JSON; returns the stats.

    Args:
      tokenizer: a bert_tf.text.cached_tokenizer.CachedTokenizer, or a
        bert_tf.text.tokenization.FullTokenizer (its vocab and case are used through a
        CachedTokenizer: the same ids).
      options: instance shaping (max_seq_length, masking, dupe_factor, ...).
      config: files, seed, format, workers, compression, chunk size.
      vocab_ids: the tokenizer's VocabIds when the caller has them (built here if not).
    """
    if not isinstance(tokenizer, cached_tokenizer.CachedTokenizer):
        tokenizer = cached_tokenizer.CachedTokenizer(
            tokenizer.vocab, tokenizer.do_lower_case,
            getattr(tokenizer, "keep_special_tokens", False),
            vocab_file=getattr(tokenizer, "vocab_file", "vocab"))
    if vocab_ids is None:
        vocab_ids = pretraining_instances.VocabIds.from_vocab(
            tokenizer.vocab, getattr(tokenizer, "vocab_file", "vocab"))
    stats = collections.Counter()
    start = time.time()
    progress = _ProgressLog(start, config.log_every_seconds)
    results = _run_chunks(tokenizer, options, vocab_ids, config, stats)
    # closing: leaving early (an error, a signal) ends the workers before the shards go.
    with record_writing.ShardedWriter(config.output_files, config.gzip) as writer, \
            contextlib.closing(results):
        for result in results:
            writer.write_framed(result.framed)
            stats.update(result.stats)
            progress.maybe_log(stats)
        summary = summarize_stats(stats, options, config, time.time() - start)
        if not summary["instances"]:
            raise ValueError(
                f"no training instances from {list(config.input_files)}: "
                f"{summary['documents']} usable documents, skipped {summary['skipped']} "
                "(expected text with one sentence per line, WikiExtractor output or a "
                "MediaWiki XML dump)")
        check_shards_filled(summary["instances"], config.output_files)
        writer.commit(stats_path=stats_path_of(config), stats=summary)
    logging.info("Wrote %d instances to %d file(s) in %.1f s (%.0f instances/s): %s",
                 summary["instances"], len(config.output_files), summary["seconds"],
                 summary["instances_per_second"], json.dumps(summary["nsp"]))
    return summary


def _worker_context():
    """fork while this process is small and has one thread (no TensorFlow loaded, as in
    the command): workers start at once with the modules already imported. Otherwise
    spawn: a fresh interpreter each, without the parent's memory and threads."""
    if ("fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1
            and "tensorflow" not in sys.modules):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def _run_chunks(tokenizer, options, vocab_ids, config, stats) -> Iterator[FramedChunkResult]:
    """Done chunks in chunk order: built by this process and num_workers - 1 others."""
    raw_chunks = iter_raw_chunks(config.input_files, config.input_format,
                                 config.chunk_chars, stats, config.language,
                                 word_segmentation.boundaries_files(
                                     options.word_boundaries_file, config.input_files))
    initargs = (options, vocab_ids, config.random_seed, tokenizer)
    init_worker(*initargs)
    word_segmentation.load_segmenter(options.word_segmenter)  # before the workers fork
    jobs = _chunk_jobs(raw_chunks, tokenizer, options.word_segmenter != "none")
    if config.num_workers <= 1:
        for function, args in jobs:
            yield function(*args)
        return
    # An executor, unlike Pool, fails (BrokenProcessPool) when a worker dies instead of
    # replacing it forever.
    pool = concurrent.futures.ProcessPoolExecutor(
        config.num_workers - 1, mp_context=_worker_context(),
        initializer=_init_pool_worker, initargs=(os.getpid(),) + initargs)
    try:
        yield from _shared_work(pool, config.num_workers - 1, jobs)
    except BaseException:  # an error, a signal (process_lifetime), or closed early
        _end_pool(pool)
        raise
    pool.shutdown(wait=True)


def _init_pool_worker(parent_pid, *initargs):
    """A pool worker's start: it ends with its parent, then `init_worker(*initargs)`."""
    process_lifetime.end_with_parent(parent_pid)
    init_worker(*initargs)


def _end_pool(pool, seconds: float = 5.0) -> None:
    """Ends the pool now, its jobs unfinished, leaving none of its threads blocked.

    The workers are killed (they hold no output: this process writes the records). A
    worker killed while it wrote a result to the result pipe leaves half a message
    there, and the pool's manager thread then waited forever for the rest (this
    process holds the pipe's write end too), and so did `shutdown(wait=True)`, or
    Python's exit (issue 49: a signal hung the command in about one run of six). With
    no worker left, the write end is closed here: the read ends (EOF), the manager marks
    the pool broken and ends, closing the job pipe that its feeder thread may be
    blocked writing to. Pythons without that close (before 3.11.5 / 3.12) get it here.
    """
    processes = list((getattr(pool, "_processes", None) or {}).values())
    if not processes and hasattr(pool, "kill_workers"):  # Python 3.14, no _processes
        pool.kill_workers()
    for process in processes:
        process.kill()  # SIGKILL: a worker forked before its initializer ran has the
    for process in processes:  # command's SIGTERM handler, which ignores a second one
        process.join(seconds)
    result_queue = getattr(pool, "_result_queue", None)
    if result_queue is not None:
        result_queue._writer.close()  # pylint: disable=protected-access
    pool.shutdown(wait=False, cancel_futures=True)
    manager = getattr(pool, "_executor_manager_thread", None)
    if manager is None:
        return
    manager.join(seconds)
    call_queue = getattr(pool, "_call_queue", None)
    if manager.is_alive() and call_queue is not None:  # joining its blocked feeder
        call_queue._reader.close()  # pylint: disable=protected-access
        manager.join(seconds)
    if manager.is_alive():
        logging.warning("the worker pool did not end within %.0f s", 2 * seconds)


def _chunk_jobs(raw_chunks, tokenizer, segmenting=False):
    """(function, args) that build each chunk. Chunks of sentences are tokenized here, so
    that one token cache serves the whole run (this process tokenized every chunk before,
    with TensorFlow, as fast); wiki text goes to the workers whole (its sentence
    splitting is the slow part), and so does all text when a word segmenter runs."""
    for chunk_index, raw in enumerate(raw_chunks):
        if segmenting or any(d.kind != wikipedia.SENTENCES for d in raw):
            yield build_raw_chunk_records, (raw, chunk_index)
        else:
            stats = collections.Counter()
            tokenized = tokenize_chunk(tokenizer, [d.content for d in raw], stats,
                                       boundaries=word_segmentation.boundaries_of(raw))
            yield build_tokenized_chunk_records, (tokenized, dict(stats), chunk_index)


def _shared_work(pool, pool_size, jobs) -> Iterator[FramedChunkResult]:
    """Jobs go to the pool while it has fewer than two per worker to do; otherwise this
    process runs the job itself instead of waiting (and sends nothing between processes
    for it). Results come out in chunk order; at most about 3 chunks per worker are held."""
    in_flight = collections.deque()  # futures, or results built here, in chunk order

    def head_ready():
        return in_flight and (not isinstance(in_flight[0], concurrent.futures.Future)
                              or in_flight[0].done())

    for function, args in jobs:
        while head_ready():
            yield _chunk_result(in_flight.popleft())
        queued = sum(1 for item in in_flight
                     if isinstance(item, concurrent.futures.Future) and not item.done())
        if queued < 2 * pool_size:
            in_flight.append(pool.submit(function, *args))
        else:
            in_flight.append(function(*args))
        while len(in_flight) > 3 * pool_size + 1:
            yield _chunk_result(in_flight.popleft())
    while in_flight:
        yield _chunk_result(in_flight.popleft())


def _chunk_result(item) -> FramedChunkResult:
    return item.result() if isinstance(item, concurrent.futures.Future) else item


class _ProgressLog:
    """Logs documents, instances and the rate at most every `every_seconds`."""

    def __init__(self, start, every_seconds):
        self.start, self.every_seconds, self.last, self.last_instances = (
            start, every_seconds, start, 0)

    def maybe_log(self, stats):
        now = time.time()
        if now - self.last < self.every_seconds:
            return
        recent = (stats["instances"] - self.last_instances) / max(now - self.last, 1e-9)
        self.last, self.last_instances = now, stats["instances"]
        logging.info("%d documents, %d instances, %.0f instances/s (%.0f since start)",
                     stats["documents"], stats["instances"], recent,
                     stats["instances"] / max(now - self.start, 1e-9))


def summarize_stats(stats, options, config, seconds) -> Dict[str, object]:
    """The stats.json dict of summed chunk and reader counts (local tool and Beam)."""
    instances = stats["instances"]
    masked = max(stats["masked_tokens"], 1)
    skipped_keys = ("non_utf8_lines", "invalid_json_lines", "lines_outside_doc",
                    "redirect_pages", "non_article_pages", "empty_documents",
                    "untokenizable_sentences")
    summary = {
        "input_files": list(config.input_files),
        "output_files": list(config.output_files),
        "options": dataclasses.asdict(options),
        "random_seed": config.random_seed,
        "documents": stats["documents"],
        "single_sentence_documents": stats["single_sentence_documents"],
        "sentences": stats["sentences"],
        "input_tokens": stats["input_tokens"],
        "skipped": {key: stats[key] for key in skipped_keys},
        "instances": instances,
        "instance_tokens": stats["instance_tokens"],
        "short_instances": stats["short_instances"],
        "masked_tokens": stats["masked_tokens"],
        "masked_fraction": stats["masked_tokens"] / max(stats["instance_tokens"], 1),
        "masking": {
            "mask_token": stats["masked_replaced_by_mask"] / masked,
            "random_token": stats["masked_replaced_by_random"] / masked,
            "unchanged": stats["masked_kept_original"] / masked,
        },
        "nsp": {
            "is_next": instances - stats["next_sentence_random"],
            "random_next": stats["next_sentence_random"],
            "random_next_fraction": stats["next_sentence_random"] / max(instances, 1),
        },
        "seconds": round(seconds, 3),
        "instances_per_second": instances / max(seconds, 1e-9),
    }
    if stats["documents"] and stats["single_sentence_documents"] > 0.5 * stats["documents"]:
        logging.warning(
            "%d of %d documents have one sentence: their instances are all random-next. "
            "Is the input one sentence per line with blank lines between documents?",
            stats["single_sentence_documents"], stats["documents"])
    return summary
