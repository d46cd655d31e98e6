"""TFRecord shards written under temporary names and renamed when complete.

The TFRecord framing is written here, without TensorFlow (whose import would cost the
tool seconds and most of its memory): per record a little-endian uint64 length, the
masked CRC-32C of those 8 bytes, the data and the masked CRC-32C of the data (CRC-32C by
google-crc32c, in C). GZIP shards are one gzip stream per file, as TensorFlow writes
and reads them.

An output set is replaced as a whole: when a run commits, shards of an earlier run into
the same prefix with another shard count (`<prefix>-NNNNN-of-MMMMM`), and temporary files
left by killed runs (`.tmp-<pid>` of a process that no longer runs), are removed, so that
`<prefix>-*` matches exactly this run's shards.
"""

import glob
import gzip as gzip_format
import itertools
import json
import os
import re
import struct
from typing import Dict, Iterable, NamedTuple, Sequence

import google_crc32c
import numpy as np

from bert_tf import fileio

_SHARD_SUFFIX = re.compile(r"-\d{5}-of-\d{5}$")
_SHARD_GLOB = "-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9]"
_MASK_DELTA = 0xA282EAD8
_GZIP_LEVEL = 6  # zlib's default, as TensorFlow's GZIP writer uses


def masked_crc32c(data: bytes) -> int:
    """The CRC-32C of `data`, masked as TFRecord files store it."""
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


class FramedRecords(NamedTuple):
    """Records in TFRecord framing, back to back: record i is data[offsets[i]:offsets[i + 1]]."""
    data: bytes
    offsets: np.ndarray  # [n + 1] int64


def frame_records(records: Sequence[bytes]) -> FramedRecords:
    """The TFRecord framing of `records` (one C call per record for its checksum)."""
    count = len(records)
    lengths = np.fromiter(map(len, records), dtype=np.int64, count=count)
    unique_lengths, length_index = np.unique(lengths, return_inverse=True)
    headers = [struct.pack("<QI", n, masked_crc32c(struct.pack("<Q", n)))
               for n in unique_lengths.tolist()]
    crcs = np.fromiter(map(google_crc32c.value, records), dtype=np.uint32, count=count)
    footers = (((crcs >> 15) | (crcs << 17)) + np.uint32(_MASK_DELTA)).astype("<u4").tobytes()
    data = b"".join(itertools.chain.from_iterable(zip(
        map(headers.__getitem__, length_index.tolist()), records,
        (footers[i:i + 4] for i in range(0, 4 * count, 4)))))
    offsets = np.zeros([count + 1], dtype=np.int64)
    np.cumsum(lengths + 16, out=offsets[1:])
    return FramedRecords(data, offsets)


def _open_shard(path: str, gzip: bool):
    """A binary file to write; gzip: a stream with no name and time (same bytes every run)."""
    file = open(path, "wb")
    if not gzip:
        return file
    return _GzipShard(file)


class _GzipShard(gzip_format.GzipFile):
    """GzipFile that also closes the file it writes to."""

    def __init__(self, file):
        super().__init__(filename="", mode="wb", compresslevel=_GZIP_LEVEL, fileobj=file,
                         mtime=0)
        self._file = file

    def close(self):
        try:
            super().close()
        finally:
            self._file.close()


def stale_outputs(paths: Sequence[str]) -> list:
    """Files of earlier runs into the prefixes of `paths` that are not this output set.

    Shards named like `paths` but with another shard count, and `*.tmp-<pid>` files of
    processes that no longer run.
    """
    keep = {os.path.abspath(path) for path in paths}
    stale = set()
    for prefix in {_SHARD_SUFFIX.sub("", path) for path in paths}:
        for path in glob.glob(glob.escape(prefix) + _SHARD_GLOB):
            if os.path.abspath(path) not in keep:
                stale.add(path)
        for path in glob.glob(glob.escape(prefix) + "*.tmp-*"):
            pid = path.rsplit(".tmp-", 1)[1]
            if (pid.isdigit() and int(pid) != os.getpid()
                    and not fileio.process_is_running(int(pid))):
                stale.add(path)
    return sorted(stale)


class ShardedWriter:
    """Writes records round-robin over `paths` (as the original does over its files).

    Every shard is written to `<path>.tmp-<pid>`; `commit` closes them, writes the stats
    JSON the same way and renames all. Leaving the `with` block without `commit` (an
    error, a kill) removes the temporary files, so no finished-looking file is left.
    """

    def __init__(self, paths: Sequence[str], gzip: bool = False):
        # A symbolic link's target is written (beside it), the link kept.
        self.paths = [fileio.output_target(path) for path in paths]
        # A device or FIFO (--output_file=/dev/null) is written in place, never renamed over.
        self.temp_paths = [path if fileio.is_special_file(path) else fileio.temporary_path(path)
                           for path in self.paths]
        self._writers = [_open_shard(path, gzip) for path in self.temp_paths]
        self._next = 0
        self.num_records = 0
        self._committed = False

    def write_all(self, records: Iterable[bytes]):
        """Writes records round-robin, continuing where the last call stopped."""
        self.write_framed(frame_records(list(records)))

    def write_framed(self, framed: FramedRecords):
        """write_all for records already framed (by frame_records, in a worker)."""
        num_records, count = len(framed.offsets) - 1, len(self._writers)
        if count == 1:
            self._writers[0].write(framed.data)
        else:
            view, bounds = memoryview(framed.data), framed.offsets.tolist()
            for shard in range(min(count, num_records)):
                self._writers[(self._next + shard) % count].write(b"".join(
                    view[bounds[i]:bounds[i + 1]] for i in range(shard, num_records, count)))
        self._next = (self._next + num_records) % count
        self.num_records += num_records

    def commit(self, stats_path: str = None, stats: Dict = None):
        for writer in self._writers:
            writer.close()
        if stats_path is not None:
            stats_path = fileio.output_target(stats_path)
            temp_stats = fileio.temporary_path(stats_path)
            with open(temp_stats, "w", encoding="utf-8") as stats_file:
                json.dump(stats, stats_file, indent=2, sort_keys=True)
                stats_file.write("\n")
        for temp, path in zip(self.temp_paths, self.paths):
            if temp != path:
                fileio.apply_mode(temp, like=path)
                os.replace(temp, path)
        if stats_path is not None:
            fileio.apply_mode(temp_stats, like=stats_path)
            os.replace(temp_stats, stats_path)
        self._committed = True
        for path in stale_outputs(self.paths):
            os.remove(path)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        if not self._committed:
            for writer in self._writers:
                writer.close()
            for temp, path in zip(self.temp_paths, self.paths):
                if temp != path and os.path.exists(temp):
                    os.remove(temp)
        return False
