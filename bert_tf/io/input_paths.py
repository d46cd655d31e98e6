"""Input files, once: what an `--input_file`-like value names, and whether a file is text.

    files = input_paths.expand_input_paths("wiki/*.txt,extra[1].txt", flag="input_file")
    input_paths.check_text_file("corpus.txt")   # before a text reader reads it

An input path means that file: a path that exists is read as it is, even when its name
holds `*`, `?`, `[ ]` or a comma; a pattern is expanded only when no such file exists,
and a pattern that matches nothing names itself. Every reader of text calls
`check_text_file` first, so that a binary file (an executable, an image, a gzip without
its suffix) is refused naming the file, while a real text with a few bad lines is read
(and, by the corpus readers, those lines counted and skipped).
"""

import codecs
import collections
import glob
import os
import re
from typing import BinaryIO, Callable, List, Optional, Sequence, Union

_GLOB_CHARS = frozenset("*?[")
_LINE_END = re.compile(rb"\r\n|\r|\n")
# How much of a file is looked at to tell text from binary data.
SNIFF_BYTES = 1 << 16
# Leading bytes of formats that are not text, and what to call them.
_MAGIC = (
    (b"\x1f\x8b", "gzip-compressed data (decompress it, or give the corpus tools a name "
                  "ending in .gz)"),
    (b"BZh", "bzip2-compressed data (decompress it, or give the corpus tools a name "
             "ending in .bz2)"),
    (b"\xfd7zXZ\x00", "xz-compressed data (decompress it)"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed data (decompress it)"),
    (b"PK\x03\x04", "a zip archive (or an Office document); unpack it"),
    (b"\x7fELF", "an executable (ELF)"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"%PDF-", "a PDF document"),
)


class InputNotFoundError(FileNotFoundError, ValueError):
    """An input path that is no file and a pattern that matches none (both a
    FileNotFoundError and, for callers that catch bad values, a ValueError)."""


class NotTextError(ValueError):
    """A file given to a text reader that holds binary data."""


def has_pattern(path: str) -> bool:
    """Whether `path` holds glob characters (`*`, `?`, `[`)."""
    return bool(_GLOB_CHARS & set(path))


def _local_exists(path: str) -> bool:
    return os.path.exists(path)


def _local_glob(pattern: str) -> List[str]:
    return glob.glob(pattern)


def expand_input_paths(values: Union[str, os.PathLike, Sequence[str]],
                       flag: str = "input_file",
                       match: Callable[[str], List[str]] = _local_glob,
                       exists: Callable[[str], bool] = _local_exists,
                       keep: Optional[Callable[[str], bool]] = None) -> List[str]:
    """The files that an input flag names, in order; each pattern's matches sorted.

    Args:
      values: a path, comma-separated paths and patterns, or a list of them. A value that
        exists as a path is that file, commas and glob characters included.
      flag: the flag (or parameter) named in errors.
      match: a pattern -> the paths it matches (local glob; callers pass their
        filesystem's: tf.io.gfile.glob, Beam's).
      exists: whether a path exists (of the same filesystem).
      keep: a filter for a pattern's matches (never applied to a path named exactly).

    Raises:
      InputNotFoundError: naming the path that is no file, or the pattern that matches
        none; a folder named as an input file is an IsADirectoryError.
    """
    if isinstance(values, (str, os.PathLike)):
        values = [os.fspath(values)]
    files = []
    for value in values:
        if isinstance(value, bytes) or not isinstance(value, (str, os.PathLike)):
            raise TypeError(f"{flag} must be paths or patterns (str), got "
                            f"{type(value).__name__}: {str(value)[:60]!r}")
        value = os.fspath(value)
        names = [value] if exists(value) else value.split(",")
        for name in (n.strip() if not exists(n) else n for n in names):
            if name:
                files.extend(_expand_one(name, flag, match, exists, keep))
    if not files:
        raise InputNotFoundError(f"{flag} is empty: expected a file, a comma-separated "
                                 "list or a glob pattern")
    return files


def _expand_one(name, flag, match, exists, keep) -> List[str]:
    """[name] for an existing file, else the files its pattern matches."""
    if exists(name):
        if "://" not in name and os.path.isdir(name):
            raise IsADirectoryError(f"{flag} {name} is a folder: expected a file (or a "
                                    f"pattern such as {os.path.join(name, '*')})")
        return [name]
    if not has_pattern(name):
        raise InputNotFoundError(f"{flag} {name} not found (no such file)")
    matches = sorted(path for path in match(name)
                     if ("://" in path or not os.path.isdir(path))
                     and (keep is None or keep(path)))
    if not matches:
        raise InputNotFoundError(f"{flag} pattern {name} matches no file")
    return matches


def _binary_open(path: str) -> BinaryIO:
    return open(path, "rb")


def check_text_file(path: str, opener: Callable[[str], BinaryIO] = _binary_open,
                    own_encoding: bool = False) -> None:
    """Refuses a file that is mostly not UTF-8 text, before a text reader reads it.

    Looks at the first `SNIFF_BYTES` bytes (as `opener` gives them: decompressed, for
    the corpus readers): the leading bytes of a binary format (gzip, zip, an
    executable, an image, ...), or lines that are mostly NUL bytes, control characters
    or not UTF-8. A text with a few bad lines passes (its reader decides on them).
    `own_encoding`: the format declares its encoding (XML: UTF-16 is fine), so only the
    leading bytes of binary formats are refused.

    Raises:
      NotTextError: naming the file and what it holds instead of text.
    """
    with opener(path) as reader:
        head = reader.read(SNIFF_BYTES)
        at_end = len(head) < SNIFF_BYTES or not reader.read(1)
    check_text_bytes(head, path, at_end, own_encoding)


def check_text_bytes(head: bytes, path: str, at_end: bool = True,
                     own_encoding: bool = False) -> None:
    """`check_text_file` for the first bytes `head` of the file `path`, already read.

    Raises:
      NotTextError: naming the file and what it holds instead of text.
    """
    reason = binary_reason(head[:SNIFF_BYTES], at_end and len(head) <= SNIFF_BYTES,
                           own_encoding, name=path)
    if reason:
        raise NotTextError(f"{path}: not a text file: it holds {reason}; expected UTF-8 "
                           "text")


def binary_reason(head: bytes, at_end: bool = True, own_encoding: bool = False,
                  name: str = "line") -> Optional[str]:
    """What the start of a file, `head`, holds instead of text; None for text.

    Args:
      head: the first bytes of the file.
      at_end: whether `head` is the whole file (else its last line may be cut short).
      own_encoding: look for the leading bytes of binary formats only.
      name: the file's name, to name its first bad line as `name:number`.
    """
    for magic, kind in _MAGIC:
        if head.startswith(magic) and (magic != b"BZh" or head[4:10] == b"1AY&SY"):
            return kind
    if own_encoding:
        return None
    lines = _LINE_END.split(head)  # LF, CRLF or CR alone
    if not at_end and len(lines) > 1:
        lines.pop()  # cut short by the sample
    complete = at_end or len(lines) > 1
    problems, first = collections.Counter(), None
    for number, line in enumerate(lines, start=1):
        kind, detail = _line_problem(line, complete)
        problems[kind] += len(line)
        if kind and first is None:
            first = f"{name}:{number}: {detail}"
    total = sum(problems.values())
    bad = total - problems[None]
    if not total or bad * 2 <= total:
        return None
    share = f"{round(100 * bad / total)}% of its first {total} bytes"
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "UTF-16 text (save it as UTF-8)"
    if problems["not UTF-8"] * 2 > total:
        return (f"text in another encoding than UTF-8 ({share} are in lines that are not "
                f"UTF-8, the first at {first}; save it as UTF-8)")
    return (f"binary data ({share} are in lines that hold NUL bytes or control "
            f"characters, or are not UTF-8, the first at {first})")


def _line_problem(line: bytes, complete: bool):
    """(kind, detail) of what makes one line binary: NUL bytes, bytes that are not
    UTF-8, mostly control characters; (None, None) for a line of text."""
    nul = line.find(b"\x00")
    if nul >= 0:
        return "NUL", f"NUL byte at column {nul + 1}"
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(line, final=complete)
    except UnicodeDecodeError as error:
        return "not UTF-8", f"byte 0x{line[error.start]:02x} at column {error.start + 1}"
    controls = sum(1 for char in text if ord(char) < 32 and char not in "\t\r\f\v\x1b")
    if controls * 10 > max(len(text), 1):
        return "control characters", f"{controls} control characters"
    return None, None
