"""The Beam graph of create_pretraining_data: the local tool's chunks, built in parallel.

    input splits ─┬─ SizeDocuments: each split's document sizes (and the reader's skip
                  │  counts) -> one plan: where each of the local tool's chunks starts
                  └─ ReadChunks (plan as side input): each split reads the chunks that
                     start in it, reading on into the next splits to finish its last
                     -> [Reshuffle] -> BuildInstances: data_prep.pretraining_pipeline's
                     convert_chunk, tokenize_chunk and build_chunk_records, seeded by
                     the chunk index -> WriteToTFRecord (Beam's sink: sharded, a retried
                     bundle's files are discarded, never duplicated)

The chunks, their indices and so their seeds are the local tool's, so the instances
are the same multiset. Every count goes to a Beam metric in the `bert_tf` namespace
(the launcher sums them into stats.json). A worker holds one split's reader and one
chunk at a time. The Reshuffle (reshuffle_chunks) balances the building when there are
few splits; without it and with num_shards=0 (no grouping before the files) no step of
the graph holds more than a chunk, even on the DirectRunner, whose groupings hand a
worker all their values at once.
"""

import collections
import contextlib
import dataclasses
import glob
import hashlib
import itertools
import os
import re
import shutil
import tempfile
import threading
from typing import Dict, Iterator, Optional, Sequence, Tuple

import apache_beam as beam
import numpy as np
from absl import logging
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from bert_tf.io import fileio
from bert_tf.text import tokenization
from data_prep import beam_inputs
from data_prep import pretraining_instances
from data_prep import pretraining_pipeline
from data_prep import record_writing

METRICS_NAMESPACE = "bert_tf"
SHARD_SUFFIX = re.compile(r"-\d{5}-of-\d{5}$")


@dataclasses.dataclass(frozen=True, kw_only=True)
class BeamSettings:
    """Everything the workers need (pickled into the pipeline); made of the command's
    options by `beam_pipeline.settings_from_options`, where the defaults are."""
    input_files: Tuple[str, ...]
    output_prefix: str
    num_shards: int
    options: pretraining_instances.InstanceOptions
    vocab_bytes: bytes  # each worker builds its tokenizer from them
    vocab_ids: pretraining_instances.VocabIds  # built once, by the launcher
    do_lower_case: bool
    random_seed: int
    input_format: str
    language: Optional[str]
    chunk_chars: int
    streams_per_split: int
    split_bytes: int
    reshuffle_chunks: bool
    gzip: bool


def count_stats(stats: Dict[str, int]):
    """Adds every count of `stats` to its Beam counter."""
    for name, value in stats.items():
        if value:
            Metrics.counter(METRICS_NAMESPACE, name).inc(int(value))


def readable_documents(split: beam_inputs.InputSplit, input_format: str,
                       language: Optional[str], stats):
    """The split's RawDocuments; a file that cannot be read ends them (counted in stats).

    A corrupt compressed file is not skipped: its ValueError names the file.
    """
    try:
        yield from beam_inputs.iter_split_documents(split, input_format, stats, language)
    except beam_inputs.UNREADABLE_FILE_ERRORS as error:
        logging.warning("%s: cannot read it, skipped (%s)", split.label, error)
        stats["unreadable_files"] += 1


def size_documents(split: beam_inputs.InputSplit, settings: BeamSettings):
    """(split, [n] int64 document sizes); the reader's skip counts go to the metrics."""
    stats = collections.Counter()
    documents = readable_documents(split, settings.input_format, settings.language, stats)
    sizes = np.fromiter(map(beam_inputs.document_chars, documents), dtype=np.int64)
    count_stats(stats)
    return split, sizes


def make_plan(split_sizes: Sequence, chunk_chars: int) -> dict:
    """The splits in reading order and plan_chunks' (first doc, first chunk) per split."""
    splits = sorted((split for split, _ in split_sizes), key=lambda s: s.key)
    plan = beam_inputs.plan_chunks([(split.key, sizes) for split, sizes in split_sizes],
                                   chunk_chars)
    return {"splits": splits, "plan": plan,
            "position": {split.key: position for position, split in enumerate(splits)}}


def owned_chunks(split: beam_inputs.InputSplit, plan: dict, settings: BeamSettings
                 ) -> Iterator[Tuple[int, list]]:
    """(chunk index, raw documents) of the chunks that start in `split`."""
    first_doc, chunk_index = plan["plan"][split.key]
    if first_doc is None:
        return
    ignored = collections.Counter()  # SizeDocuments counted the reader's skips

    def documents(of_split):
        return readable_documents(of_split, settings.input_format, settings.language, ignored)

    chunk, filled = [], 0
    for document in itertools.islice(documents(split), first_doc, None):
        chunk.append(document)
        filled += beam_inputs.document_chars(document)
        if pretraining_pipeline.chunk_is_full(filled, len(chunk), settings.chunk_chars):
            yield chunk_index, chunk
            chunk_index, chunk, filled = chunk_index + 1, [], 0
    if not chunk:
        return
    for later in plan["splits"][plan["position"][split.key] + 1:]:  # finish the last chunk
        for document in documents(later):
            chunk.append(document)
            filled += beam_inputs.document_chars(document)
            if pretraining_pipeline.chunk_is_full(filled, len(chunk), settings.chunk_chars):
                yield chunk_index, chunk
                return
    yield chunk_index, chunk  # the corpus ends inside it


_TOKENIZERS = {}  # (vocab digest, do_lower_case) -> FullTokenizer, one per process
_TOKENIZERS_LOCK = threading.Lock()


def shared_tokenizer(vocab_bytes: bytes, do_lower_case: bool) -> tokenization.FullTokenizer:
    """One tokenizer per worker process (an SDK worker runs bundles in several threads).

    The vocab travels in the pipeline, so workers need no access to the launcher's disk.
    """
    key = (hashlib.sha256(vocab_bytes).hexdigest(), do_lower_case)
    with _TOKENIZERS_LOCK:
        if key not in _TOKENIZERS:
            # The tokenizer reads the file once; the folder goes right after.
            with tempfile.TemporaryDirectory(prefix="bert_tf_vocab_") as folder:
                vocab_path = os.path.join(folder, "vocab.txt")
                with open(vocab_path, "wb") as vocab_file:
                    vocab_file.write(vocab_bytes)
                _TOKENIZERS[key] = tokenization.FullTokenizer(vocab_path, do_lower_case)
        return _TOKENIZERS[key]


class BuildChunkRecords(beam.DoFn):
    """(chunk index, raw documents) -> the local tool's serialized Examples of the chunk."""

    def __init__(self, settings: BeamSettings):
        super().__init__()
        self.settings = settings
        self.tokenizer = None

    def setup(self):
        self.tokenizer = shared_tokenizer(self.settings.vocab_bytes, self.settings.do_lower_case)
        pretraining_pipeline.init_worker(self.settings.options, self.settings.vocab_ids,
                                         self.settings.random_seed)

    def process(self, element):
        chunk_index, raw_documents = element
        result = pretraining_pipeline.raw_chunk_records(raw_documents, chunk_index,
                                                        self.tokenizer)
        count_stats(result.stats)
        yield from result.records


def shard_name_template(num_shards: int) -> str:
    """The local tool's names: `prefix` for one shard, else `prefix-00000-of-00004`."""
    return "" if num_shards == 1 else "-SSSSS-of-NNNNN"


def output_files(prefix: str, num_shards: int) -> Optional[list]:
    """The shard names WriteToTFRecord writes (local ones checked like the local tool's).

    None for num_shards=0: the runner decides how many (one per bundle).
    """
    if not beam_inputs.is_remote(prefix):
        names = pretraining_pipeline.resolve_output_files(prefix, max(num_shards, 1))
        return names if num_shards else None
    if num_shards <= 1:
        return [prefix] if num_shards else None
    return [f"{prefix}-{i:05d}-of-{num_shards:05d}" for i in range(num_shards)]


def written_shards(prefix: str) -> list:
    """The `prefix-NNNNN-of-MMMMM` files of the run that wrote last (after a
    num_shards=0 run): those of the newest file's shard count; an earlier run's shards
    of another count are not this run's (`remove_earlier_outputs` removes them)."""
    matches = [m for m in FileSystems.match([prefix + "-*-of-*"])[0].metadata_list
               if SHARD_SUFFIX.search(m.path)]
    if not matches:
        return []
    newest = max(matches, key=lambda m: m.last_updated_in_seconds or 0).path
    count = SHARD_SUFFIX.search(newest).group(0).rsplit("-", 1)[1]
    return sorted(m.path for m in matches if m.path.endswith("-of-" + count))


def remove_earlier_outputs(prefix: str, files: Sequence[str]) -> list:
    """Removes, and logs, the files an earlier run wrote into `prefix` that this run's
    `files` do not replace (shards of another count and their stats files, a one-file
    run's `prefix`: `record_writing.stale_outputs`); local prefixes only. Returns them."""
    if beam_inputs.is_remote(prefix):
        return []
    stale = record_writing.stale_outputs(  # the stats are this run's
        files, also_keep=[prefix + pretraining_pipeline.STATS_SUFFIX])
    for path in stale:
        os.remove(path)
    if stale:
        logging.info("Removed %d file(s) of an earlier run into %s (this run's files "
                     "replace them all): %s", len(stale), prefix, ", ".join(stale))
    return stale


def _unfinished_candidates(output: str) -> dict:
    """{path: mtime} of what a Beam run writing `output` (a file or a shard prefix) may
    leave in its folder when stopped: the sink's temporary folders (`beam-temp-<name>-
    <id>`), workers' temporary files (`<name>.tmp-<pid>`), and the output's names."""
    folder, name = os.path.split(os.path.abspath(output))
    name = glob.escape(name)
    found = {}
    for pattern in (f"beam-temp-{name}-*", f"{name}{fileio.TEMPORARY_MARKER}*", name,
                    f"{name}-*-of-*"):
        for path in glob.glob(os.path.join(glob.escape(folder), pattern)):
            with contextlib.suppress(OSError):  # gone meanwhile
                found[path] = os.stat(path).st_mtime_ns
    return found


@contextlib.contextmanager
def removed_if_unfinished(output: str):
    """Within the block a Beam pipeline writes `output` (a file, or the prefix of
    shards); when the block raises (an error, SIGINT / SIGTERM: issue 49), what the run
    made or changed of it is removed, so that nothing of a stopped run looks finished:
    the sink's temporary folder, a killed worker's temporary file, shards renamed into
    place before the stop. An earlier run's files that this run did not touch stay.
    Local outputs only (a remote runner's job is not stopped by the signal).
    """
    before = {} if beam_inputs.is_remote(output) else _unfinished_candidates(output)
    try:
        yield
    except BaseException:
        if not beam_inputs.is_remote(output):
            for path, mtime in _unfinished_candidates(output).items():
                if before.get(path) != mtime:
                    with contextlib.suppress(OSError):
                        if os.path.isdir(path):
                            shutil.rmtree(path)
                        else:
                            os.remove(path)
        raise


def input_splits(pipeline: beam.Pipeline, input_files: Sequence[str], streams_per_split: int,
                 input_format: str = "auto", split_bytes: int = 0):
    """PCollection of the InputSplits of `input_files`, spread over the workers."""
    return (pipeline
            | "Files" >> beam.Create(list(enumerate(input_files)))
            | "Splits" >> beam.FlatMapTuple(
                beam_inputs.file_splits, streams_per_split=streams_per_split,
                input_format=input_format, split_bytes=split_bytes)
            | "SpreadSplits" >> beam.Reshuffle())


def build_pipeline(pipeline: beam.Pipeline, settings: BeamSettings):
    """Adds the whole create_pretraining_data graph to `pipeline`."""
    splits = input_splits(pipeline, settings.input_files, settings.streams_per_split,
                          settings.input_format, settings.split_bytes)
    plan = (splits
            | "SizeDocuments" >> beam.Map(size_documents, settings=settings)
            | "AllSizes" >> beam.combiners.ToList()
            | "Plan" >> beam.Map(make_plan, chunk_chars=settings.chunk_chars))
    chunks = splits | "ReadChunks" >> beam.FlatMap(
        owned_chunks, plan=beam.pvalue.AsSingleton(plan), settings=settings)
    if settings.reshuffle_chunks:  # balance the building over workers; moves the raw text
        chunks = chunks | "SpreadChunks" >> beam.Reshuffle()
    records = chunks | "BuildInstances" >> beam.ParDo(BuildChunkRecords(settings))
    # num_shards=0: no grouping step, each bundle streams into its own file (memory stays
    # flat on the DirectRunner, which hands a worker a whole shard group at once).
    return records | "Write" >> beam.io.WriteToTFRecord(
        settings.output_prefix, num_shards=settings.num_shards,
        shard_name_template=shard_name_template(settings.num_shards),
        compression_type=(CompressionTypes.GZIP if settings.gzip
                          else CompressionTypes.UNCOMPRESSED))
