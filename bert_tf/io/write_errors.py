"""Writes that fail, once: an OS or TensorFlow write error as one line naming the file.

A write that hits the file-size limit (EFBIG: a FAT32 disk, `ulimit -f`), a full disk or
quota (ENOSPC, EDQUOT) or a folder that cannot be written (EROFS, EACCES, EPERM) raises
`WriteFailed`, an `OSError` whose message names the file, the cause and what to do; the
command line prints it as its one line (`bert_tf.commands.command_line`). Every write
entry point goes through `classify` (`fileio.atomic_output`,
`train.preemption.save_checkpoint`, `serving.output_folder.write_folder`,
`data_prep.record_writing.ShardedWriter`):

    try:
        write(path)
    except Exception as error:
        raise write_errors.classify(error, path) or error

TensorFlow's errors (an `OutOfRangeError` for EFBIG, `ResourceExhaustedError`,
`PermissionDeniedError`) are recognized by the system's message they carry, without
importing TensorFlow.
"""

import contextlib
import errno
import re
from typing import Optional

FILE_TOO_LARGE = "file too large for the file system (EFBIG)"
NO_SPACE = "no space left on device"
READ_ONLY = "read-only / permission denied"

# errno -> (cause, what to do).
_CAUSES = {
    errno.EFBIG: (FILE_TOO_LARGE,
                  "write to a file system without that size limit (FAT32 holds at most "
                  "4 GiB a file), or raise the file-size limit (ulimit -f)"),
    errno.ENOSPC: (NO_SPACE + " (ENOSPC)", "free space there"),
    errno.EDQUOT: (NO_SPACE + " (EDQUOT: disk quota exceeded)", "free space there"),
    errno.EROFS: (READ_ONLY + " (EROFS: read-only file system)",
                  "write to a folder you can write"),
    errno.EACCES: (READ_ONLY + " (EACCES)", "write to a folder you can write, or change "
                   "its permissions"),
    errno.EPERM: (READ_ONLY + " (EPERM)", "write to a folder you can write, or change "
                  "its permissions"),
}
# The system's texts (strerror) that TensorFlow's and other libraries' messages carry.
_TEXTS = (("File too large", errno.EFBIG), ("No space left on device", errno.ENOSPC),
          ("Disk quota exceeded", errno.EDQUOT), ("Read-only file system", errno.EROFS),
          ("Permission denied", errno.EACCES), ("Operation not permitted", errno.EPERM))
# TensorFlow's error classes for these errnos, when its message lost the text.
_TENSORFLOW_CLASSES = {"ResourceExhaustedError": errno.ENOSPC,
                       "PermissionDeniedError": errno.EACCES}
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
_ACCESS = (errno.EACCES, errno.EPERM)


def cause_of(code):
    """(cause, advice) in words of the errno `code` (one of `WriteFailed`'s)."""
    return _CAUSES[code]


class WriteFailed(OSError):
    """A file could not be written: too large for the file system, no space left, or a
    folder that cannot be written.

    Attributes:
      errno: The cause's errno (EFBIG, ENOSPC, EDQUOT, EROFS, EACCES, EPERM).
      filename: The file (or folder, checkpoint prefix) being written.
      cause: The cause in words (`FILE_TOO_LARGE`, `NO_SPACE`, `READ_ONLY` ...).
      advice: What to do about it.
    """

    def __init__(self, code, path, message=None):
        self.cause, self.advice = _CAUSES[code]
        message = message or f"cannot write {path}: {self.cause}; {self.advice}"
        super().__init__(code, message, path)
        self.message = message

    def __str__(self):
        return self.message

    def __reduce__(self):
        return type(self), (self.errno, self.filename, self.message)


def error_code(error) -> Optional[int]:
    """The errno of the write error `error` (an `OSError`, a TensorFlow `OpError` or an
    exception whose message carries the system's text) when it is one of the causes
    `WriteFailed` names; None for any other error."""
    if isinstance(error, WriteFailed):
        return error.errno
    if isinstance(error, OSError) and error.errno in _CAUSES:
        return error.errno
    if not isinstance(error, Exception):  # KeyboardInterrupt, SystemExit: not a write's
        return None
    text = str(getattr(error, "message", None) or error)
    for marker, code in _TEXTS:
        if marker in text:
            return code
    if type(error).__module__.startswith("tensorflow"):
        return _TENSORFLOW_CLASSES.get(type(error).__name__)
    return None


def _named_file(error, path):
    """The file to name: the error's own (an OSError's filename, a path in a TensorFlow
    message, which names the very shard), else `path`."""
    if isinstance(error, OSError) and error.filename:
        return str(error.filename)
    found = re.search(r"(?:^|\s)((?:/|[a-z0-9]+://)\S+?);? (?:File too large|No space|"
                      r"Disk quota|Read-only|Permission denied|Operation not)", str(error))
    # TensorFlow writes `<file>.tempstate<digits>` and renames it: name the file.
    return re.sub(r"\.tempstate\d+$", "", found.group(1).rstrip(";")) if found else path


def classify(error, path=None) -> Optional[WriteFailed]:
    """The rule: `error`, raised while writing `path`, as a `WriteFailed` whose one line
    names the file and the cause ("file too large for the file system (EFBIG)", "no
    space left on device", "read-only / permission denied"); None when `error` is not
    such a write error (re-raise it as it is).

    Args:
      error: The exception a write raised.
      path: The output being written (named when the error does not name its file).
    """
    if isinstance(error, WriteFailed):
        return error
    code = error_code(error)
    if code is None:
        return None
    named = _named_file(error, path)
    if (code in _ACCESS and path and named
            and not str(named).startswith(str(path).rstrip("/"))):
        return None  # an input the block reads, not the output it writes
    return WriteFailed(code, named or "a file")


@contextlib.contextmanager
def reported(path):
    """Within the block, a write error (`classify`) is raised as `WriteFailed` naming
    `path` (or the file the error names); other exceptions pass as they are."""
    try:
        yield
    except Exception as error:  # pylint: disable=broad-except  (re-raised)
        failed = classify(error, path)
        if failed is None or failed is error:
            raise
        raise failed from error
