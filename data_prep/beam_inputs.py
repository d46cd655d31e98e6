"""Corpus input for the Beam pipelines: files on any Beam filesystem, cut into splits.

A split is the unit of reading. It is a whole file (plain text, WikiExtractor output, an
XML dump, compressed or not), or, for a MediaWiki *multistream* dump
(`...-multistream.xml.bz2` beside its `...-multistream-index.txt.bz2`), a range of its
bz2 streams: the index gives the byte offset of every stream of 100 pages, so a 20 GB
dump spreads over thousands of workers. A stream range is read as the dump's header
(the first stream: `<mediawiki>` and `<siteinfo>`), the range's pages and a closing
tag, through the same XML reader as the whole file (data_prep/wikipedia.py), so the
pages come out exactly as the local tool reads them.

Splits are ordered by (file index, split number): the order of the local tool's reading.
"""

import bz2
import gzip
import io
import os
from typing import Iterator, List, NamedTuple, Optional, Sequence

import numpy as np
from apache_beam.io.filesystem import BeamIOError
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from bert_tf.io import input_paths
from data_prep import pretraining_pipeline
from data_prep import wikipedia

# A file that went away or cannot be opened is counted and skipped (not a corrupt one).
UNREADABLE_FILE_ERRORS = (FileNotFoundError, PermissionError, IsADirectoryError,
                          NotADirectoryError, BeamIOError)
DUMP_SUFFIX = ".xml.bz2"
INDEX_SUFFIX = "-index.txt.bz2"
_READ_BLOCK = 1 << 20
_CLOSING_TAG = b"</mediawiki>\n"


WHOLE_FILE, STREAM_RANGE, TEXT_RANGE = "file", "streams", "text"


class InputSplit(NamedTuple):
    """One unit of reading: a whole file, a range of a multistream dump's streams, or a
    byte range of an uncompressed one-sentence-per-line text file.

    Attributes:
      file_index: position of the file in the sorted input list.
      split_number: position of the split in its file.
      path: the file.
      start, end: byte offsets of the range's first stream and of the stream after its
        last (None: the whole file).
      header_end: byte offset of the first page stream (the header is [0, header_end)).
      at_file_end: the range ends at the end of the file (which holds the closing tag).
      kind: WHOLE_FILE, STREAM_RANGE or TEXT_RANGE.
    """
    file_index: int
    split_number: int
    path: str
    start: Optional[int] = None
    end: Optional[int] = None
    header_end: Optional[int] = None
    at_file_end: bool = True
    kind: str = WHOLE_FILE

    @property
    def key(self):
        return (self.file_index, self.split_number)

    @property
    def label(self) -> str:
        """The file, with the byte range for a stream range (named in errors)."""
        if self.kind == WHOLE_FILE:
            return self.path
        what = "bz2 streams at bytes" if self.kind == STREAM_RANGE else "bytes"
        return f"{self.path} ({what} {self.start}-{self.end})"


def is_remote(path: str) -> bool:
    return "://" in path


def _beam_matches(pattern: str) -> List[str]:
    """The files a glob matches: local ones as the local tool finds them, others
    through Beam's filesystems."""
    if not is_remote(pattern):
        return wikipedia.local_matches(pattern)
    return sorted(m.path for m in FileSystems.match([pattern])[0].metadata_list)


def match_input_files(patterns: str) -> List[str]:
    """Expands comma-separated globs on local disk or any Beam filesystem.

    The index file of a multistream dump that is itself among the inputs is left out
    (it is read to split the dump, not as text).

    Raises:
      FileNotFoundError: naming the first glob that matches no file.
    """
    files = wikipedia.resolve_input_files(
        str(patterns), match=_beam_matches,
        exists=lambda path: FileSystems.exists(path) if is_remote(path) else os.path.exists(path))
    dumps = set(files)
    return [f for f in files
            if not (f.endswith(INDEX_SUFFIX) and f[:-len(INDEX_SUFFIX)] + DUMP_SUFFIX in dumps)]


def open_file(path: str):
    """Opens a file of any Beam filesystem for binary reading, decompressed by suffix.

    Local files go through wikipedia.open_binary (what the local tool uses); others are
    read through Beam and decompressed by Python's bz2 / gzip (both read multistream).
    """
    if not is_remote(path):
        return wikipedia.open_binary(path)
    raw = FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)
    if path.endswith(".bz2"):
        return bz2.BZ2File(raw)
    if path.endswith(".gz"):
        return gzip.GzipFile(fileobj=raw)
    return raw


def index_path(dump_path: str) -> Optional[str]:
    """The `-index.txt.bz2` beside a multistream dump, or None when there is none."""
    if not dump_path.endswith(DUMP_SUFFIX):
        return None
    path = dump_path[:-len(DUMP_SUFFIX)] + INDEX_SUFFIX
    return path if FileSystems.exists(path) else None


def read_stream_offsets(path: str) -> List[int]:
    """Distinct stream offsets of a multistream index (`offset:page_id:title` lines)."""
    offsets = []
    with open_file(path) as reader:
        for line_number, line in enumerate(reader, start=1):
            head = line.split(b":", 1)[0]
            if not head.strip():
                continue
            try:
                offset = int(head)
            except ValueError:
                raise ValueError(f"{path}:{line_number}: expected `offset:page_id:title`, "
                                 f"got {line[:60]!r}") from None
            if not offsets or offset != offsets[-1]:
                if offsets and offset < offsets[-1]:
                    raise ValueError(f"{path}:{line_number}: stream offsets must ascend")
                offsets.append(offset)
    return offsets


def file_size(path: str) -> int:
    matches = FileSystems.match([path])[0].metadata_list
    if not matches:
        raise FileNotFoundError(f"{path}: no such file")
    return matches[0].size_in_bytes


def file_splits(file_index: int, path: str, streams_per_split: int = 100,
                input_format: str = "auto", split_bytes: int = 0) -> List[InputSplit]:
    """The splits of one input file.

    A multistream dump: ranges of `streams_per_split` streams. An uncompressed text file
    (one sentence per line) of more than `split_bytes` bytes: byte ranges of that size
    (0: never). Anything else: the whole file.
    """
    index = index_path(path)
    if index is not None:
        return _stream_splits(file_index, path, index, streams_per_split)
    if split_bytes and not path.endswith((".bz2", ".gz")):
        try:
            size = file_size(path)
            is_text = size > split_bytes and "text" == (
                input_format if input_format != "auto" else
                wikipedia.detect_format(path, opener=open_file))
        except UNREADABLE_FILE_ERRORS:
            is_text = False  # read whole, where it is counted as unreadable
        if is_text:
            return [InputSplit(file_index, number, path, start, min(start + split_bytes, size),
                               kind=TEXT_RANGE)
                    for number, start in enumerate(range(0, size, split_bytes))]
    return [InputSplit(file_index, 0, path)]


def _stream_splits(file_index, path, index, streams_per_split):
    offsets = read_stream_offsets(index)
    if not offsets:
        raise ValueError(f"{index}: the multistream index lists no stream")
    size = file_size(path)
    splits = []
    for number, first in enumerate(range(0, len(offsets), streams_per_split)):
        last = first + streams_per_split
        end = offsets[last] if last < len(offsets) else size
        splits.append(InputSplit(file_index, number, path, offsets[first], end, offsets[0],
                                 at_file_end=end >= size, kind=STREAM_RANGE))
    return splits


def iter_text_range(split: InputSplit, stats) -> Iterator[wikipedia.RawDocument]:
    """The documents a byte range of a one-sentence-per-line file owns.

    The local tool's rules (data_prep.wikipedia, format `text`): a document is a run of
    non-blank lines between blank lines; a line that is not UTF-8 is skipped (counted)
    and does not end a document. A range owns the first document of the file (if it
    starts at 0) and every document whose last preceding blank line starts inside it;
    it reads on past its end to finish its last document. A skipped line is counted by
    the range it starts in.
    """
    if split.start == 0:  # binary data is refused, naming the file (as locally)
        input_paths.check_text_file(split.path, open_file)
    with open_file(split.path) as reader:
        if split.start:
            reader.seek(split.start - 1)
            reader.readline()  # on to the first line that starts at or after `start`
        position, owned, sentences = reader.tell(), split.start == 0, []
        for raw_line in reader:
            line_start, position = position, position + len(raw_line)
            for piece in raw_line.splitlines() or [b""]:  # CR alone ends a line too
                try:
                    line = piece.decode("utf-8").strip()
                except UnicodeDecodeError:
                    stats["non_utf8_lines"] += line_start < split.end
                    continue
                if line:
                    if owned:
                        sentences.append(line)
                    continue
                if sentences:
                    yield wikipedia.RawDocument(wikipedia.SENTENCES, sentences)
                    sentences = []
                if line_start >= split.end:
                    return  # the documents after this blank line are the next range's
                owned = True
        if sentences:
            yield wikipedia.RawDocument(wikipedia.SENTENCES, sentences)


class _ChunksReader(io.RawIOBase):
    """A readable binary stream over an iterator of bytes pieces."""

    def __init__(self, pieces: Iterator[bytes]):
        super().__init__()
        self._pieces, self._buffer = pieces, b""

    def readable(self):
        return True

    def readinto(self, buffer):
        while not self._buffer:
            piece = next(self._pieces, None)
            if piece is None:
                return 0
            self._buffer = piece
        size = min(len(buffer), len(self._buffer))
        buffer[:size] = self._buffer[:size]
        self._buffer = self._buffer[size:]
        return size


def _decompressed_range(path: str, start: int, end: int) -> Iterator[bytes]:
    """Decompressed bytes of the bz2 streams in [start, end) of `path`."""
    raw = FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)
    try:
        raw.seek(start)
        decompressor, mid_stream, remaining = bz2.BZ2Decompressor(), False, end - start
        while remaining > 0:
            block = raw.read(min(_READ_BLOCK, remaining))
            if not block:
                break
            remaining -= len(block)
            while block:
                yield decompressor.decompress(block)
                mid_stream = not decompressor.eof
                block = b""
                if decompressor.eof:  # the next stream starts in the unused bytes
                    block, decompressor = decompressor.unused_data, bz2.BZ2Decompressor()
        if mid_stream or remaining > 0:
            raise EOFError("the file ended before the end of its last bz2 stream")
    finally:
        raw.close()


def _stream_range_pieces(split: InputSplit) -> Iterator[bytes]:
    header = b"".join(_decompressed_range(split.path, 0, split.header_end))
    yield header.split(b"</mediawiki>", 1)[0]
    yield from _decompressed_range(split.path, split.start, split.end)
    if not split.at_file_end:
        yield _CLOSING_TAG


def split_opener(split: InputSplit):
    """The opener (path -> binary reader) that data_prep.wikipedia reads the split with."""
    if split.kind == WHOLE_FILE:
        return lambda _: open_file(split.path)
    return lambda _: io.BufferedReader(_ChunksReader(_stream_range_pieces(split)), _READ_BLOCK)


def iter_split_documents(split: InputSplit, input_format: str, stats,
                         language: Optional[str]) -> Iterator[wikipedia.RawDocument]:
    """The RawDocuments of a split, in the order of the local tool's reading."""
    if split.kind == TEXT_RANGE:
        return iter_text_range(split, stats)
    split_format = "wikipedia_xml" if split.kind == STREAM_RANGE else input_format
    return wikipedia.iter_raw_documents(split.label, split_format, stats, language,
                                        opener=split_opener(split))


def document_chars(document: wikipedia.RawDocument) -> int:
    """Characters of a raw document, as the local tool counts them for chunking."""
    content = document.content
    return len(content) if isinstance(content, str) else sum(map(len, content))


def plan_chunks(sizes_by_split: Sequence, chunk_chars: int) -> dict:
    """Where the local tool's chunks start: split key -> (first doc, first chunk index).

    The local tool cuts the documents of all files, in reading order, into chunks that
    end at the first document that brings them to `chunk_chars` characters and two
    documents (`pretraining_pipeline.chunk_is_full`). Each split
    builds the chunks that start in it, reading on into the next splits to finish its
    last one; a split where no chunk starts gets (None, None).

    Args:
      sizes_by_split: (split key, [n] document sizes) in any order.
    """
    plan, chunk_index, filled, held = {}, 0, 0, 0  # held: documents of the open chunk
    for key, sizes in sorted(sizes_by_split, key=lambda item: item[0]):
        first_doc = first_chunk = None
        for doc, size in enumerate(np.asarray(sizes, dtype=np.int64).tolist()):
            if not held and first_doc is None:
                first_doc, first_chunk = doc, chunk_index
            filled, held = filled + size, held + 1
            if pretraining_pipeline.chunk_is_full(filled, held, chunk_chars):
                chunk_index, filled, held = chunk_index + 1, 0, 0
        plan[key] = (first_doc, first_chunk)
    return plan
