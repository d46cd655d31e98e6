"""TFRecord shards written under temporary names and renamed when complete.

The TFRecord framing is written here, without TensorFlow (whose import would cost the
tool seconds and most of its memory): per record a little-endian uint64 length, the
masked CRC-32C of those 8 bytes, the data and the masked CRC-32C of the data (CRC-32C by
google-crc32c, in C). GZIP shards are one gzip stream per file, as TensorFlow writes
and reads them.

An output set is replaced as a whole: when a run commits, shards of an earlier run into
the same prefix with another shard count (`<prefix>-NNNNN-of-MMMMM`) and their stats
files, a one-file run's `<prefix>` and its stats, and temporary files left by killed runs
(`.tmp-<pid>` of a process that no longer runs), are removed and logged, so that
`<prefix>-*` matches exactly this run's shards. A write error (a file too large for the
file system, a full disk, a read-only folder) names the shard and the cause
(`bert_tf.io.write_errors`).
"""

import contextlib
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

from absl import logging

from bert_tf.io import fileio
from bert_tf.io import write_errors

_SHARD_SUFFIX = re.compile(r"-\d{5}-of-\d{5}$")
_SHARD_GLOB = "-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9]"
_MASK_DELTA = 0xA282EAD8
_GZIP_LEVEL = 6  # zlib's default, as TensorFlow's GZIP writer uses
# pretraining_pipeline.STATS_SUFFIX (which imports this module).
STATS_SUFFIX = ".stats.json"


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


def stale_outputs(paths: Sequence[str], stats_suffix: str = STATS_SUFFIX,
                  also_keep: Sequence[str] = ()) -> list:
    """Files of earlier runs into the prefixes of `paths` that are not this output set.

    Shards named like `paths` but with another shard count and their stats files
    (`<prefix>-00000-of-00004.stats.json`); the unsharded `<prefix>` of a one-file run
    (recognized by its `<prefix>.stats.json`) and that stats file when this run is
    sharded; and `*.tmp-<pid>` files of processes that no longer run. `also_keep`: this
    run's other files (its stats file where it is not beside the first shard).
    """
    keep = {os.path.abspath(path) for path in paths}
    keep |= {path + stats_suffix for path in keep} | {os.path.abspath(p) for p in also_keep}
    stale = set()
    for prefix in {_SHARD_SUFFIX.sub("", path) for path in paths}:
        earlier = glob.glob(glob.escape(prefix) + _SHARD_GLOB)
        earlier += glob.glob(glob.escape(prefix) + _SHARD_GLOB + glob.escape(stats_suffix))
        if (os.path.isfile(prefix + stats_suffix)  # an unsharded run's file and stats
                and os.path.abspath(prefix + stats_suffix) not in keep):
            earlier += [prefix, prefix + stats_suffix]
        for path in earlier:
            if os.path.abspath(path) not in keep and os.path.isfile(path):
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
        self._writers = []
        self._next = 0
        self.num_records = 0
        self._committed = False
        self._stats_temp = None
        try:
            for temp, path in zip(self.temp_paths, self.paths):
                with write_errors.reported(path):
                    self._writers.append(_open_shard(temp, gzip))
        except BaseException:  # an error or a signal (issue 49) before `with` took it
            self.__exit__(None, None, None)
            raise

    def write_all(self, records: Iterable[bytes]):
        """Writes records round-robin, continuing where the last call stopped."""
        self.write_framed(frame_records(list(records)))

    def write_framed(self, framed: FramedRecords):
        """write_all for records already framed (by frame_records, in a worker)."""
        num_records, count = len(framed.offsets) - 1, len(self._writers)
        if count == 1:
            self._write(0, framed.data)
        else:
            view, bounds = memoryview(framed.data), framed.offsets.tolist()
            for shard in range(min(count, num_records)):
                self._write((self._next + shard) % count, b"".join(
                    view[bounds[i]:bounds[i + 1]] for i in range(shard, num_records, count)))
        self._next = (self._next + num_records) % count
        self.num_records += num_records

    def _write(self, index: int, data: bytes):
        """Writes `data` to shard `index`; a write error names the shard
        (`write_errors.WriteFailed`)."""
        with write_errors.reported(self.paths[index]):
            self._writers[index].write(data)

    def commit(self, stats_path: str = None, stats: Dict = None):
        """Closes the shards, writes the stats JSON, renames all into place and removes
        the earlier run's files of this prefix (`stale_outputs`, each logged).

        Raises:
          write_errors.WriteFailed: a write error, naming the file and the cause (the
            temporary files are removed on leaving the `with` block).
        """
        for writer, path in zip(self._writers, self.paths):
            with write_errors.reported(path):
                writer.close()
        if stats_path is not None:
            stats_path = fileio.output_target(stats_path)
            temp_stats = self._stats_temp = fileio.temporary_path(stats_path)
            with write_errors.reported(stats_path), \
                    open(temp_stats, "w", encoding="utf-8") as stats_file:
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
        stale = stale_outputs(self.paths, also_keep=[stats_path] if stats_path else [])
        for path in stale:
            os.remove(path)
        if stale:
            logging.info("Removed %d file(s) of an earlier run into this output name "
                         "(this run's files replace them all): %s", len(stale),
                         ", ".join(stale))

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        if not self._committed:
            for writer in self._writers:
                with contextlib.suppress(OSError):  # keep the error that ended the run
                    writer.close()
            for temp, path in zip(self.temp_paths, self.paths):
                if temp != path and os.path.exists(temp):
                    os.remove(temp)
            if self._stats_temp and os.path.exists(self._stats_temp):
                os.remove(self._stats_temp)
        return False
