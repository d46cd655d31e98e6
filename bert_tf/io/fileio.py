"""Files, once: atomic writes and reading UTF-8 text with errors that name file and line.

Every output of bert_tf is written under a temporary name beside its final path
(`<path>.tmp-<pid>`) and renamed onto it only when complete, so a killed or failed run
never leaves a finished-looking file; the temporary file of a failed write is removed.
Paths may be local or any filesystem TensorFlow reads (`gs://...`).
"""

import codecs
import contextlib
import hashlib
import json
import importlib
import os
import socket

from absl import logging

from bert_tf.io import input_paths
from bert_tf.io import write_errors

TEMPORARY_MARKER = ".tmp-"


def temporary_path(path: str) -> str:
    """The temporary name `path` is written under: `<path>.tmp-<pid>`."""
    return f"{path}{TEMPORARY_MARKER}{os.getpid()}"


def is_special_file(path: str) -> bool:
    """True for an existing path that is neither a regular file nor a folder: a device
    such as /dev/null, a FIFO, a socket. Such a path is written in place, never renamed
    over (a rename would replace the node with a regular file)."""
    return os.path.exists(path) and not os.path.isfile(path) and not os.path.isdir(path)


def process_is_running(pid: int) -> bool:
    """Whether process `pid` still runs (a temporary output named after it is then not
    stale: it may still be written)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def output_target(path: str) -> str:
    """The file an output at `path` replaces: the target of a symbolic link (written
    beside its target, so the link stays and keeps pointing at the new content), else
    `path` itself."""
    if "://" not in path and os.path.islink(path):
        return os.path.realpath(path)
    return path


@contextlib.contextmanager
def atomic_output(path: str):
    """Yields a temporary path to write; renamed onto `path` if the block succeeds.

    On an exception the temporary file is removed and the exception propagates (a
    write error as `write_errors.WriteFailed`, naming the file and the cause); an
    existing file at `path` stays as it was. A device or FIFO (`is_special_file`) is
    written directly; a symbolic link's target is replaced (`output_target`). The new
    file gets the mode of the file it replaces, else the one the umask gives a new file
    (not the 0600 of writers that go through `tempfile`).
    """
    path = output_target(path)
    if is_special_file(path):
        yield path
        return
    if "://" not in path and os.path.isdir(path):
        raise IsADirectoryError(f"{path} is a folder: expected a file name (an output "
                                "never replaces a folder)")
    temporary = temporary_path(path)
    gfile = _gfile(path)
    try:
        yield temporary
        if gfile:
            gfile.rename(temporary, path, overwrite=True)
        else:
            apply_mode(temporary, like=path)
            os.replace(temporary, path)
    except BaseException as error:
        if gfile and gfile.exists(temporary):
            gfile.remove(temporary)
        elif not gfile and os.path.lexists(temporary):
            os.remove(temporary)
        failed = write_errors.classify(error, path)
        if failed is None or failed is error:
            raise
        raise failed from error


def _umask() -> int:
    """The process's umask (read without changing it where /proc tells it)."""
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def apply_mode(path: str, like: str = None) -> None:
    """Gives the new output `path` (a file, or a folder and all it holds) the modes the
    umask gives new files and folders, or a regular file the mode of the file `like`
    that it replaces. Writers that create files through `tempfile` or libraries that
    do (safetensors writes 0600) would otherwise leave outputs others cannot read."""
    mask = _umask()
    if os.path.isfile(path):
        keep = like and os.path.isfile(like) and not os.path.islink(like)
        os.chmod(path, os.stat(like).st_mode & 0o7777 if keep else 0o666 & ~mask)
        return
    if not os.path.isdir(path):
        return
    os.chmod(path, 0o777 & ~mask)
    for folder, folders, files in os.walk(path):
        for name in folders:
            os.chmod(os.path.join(folder, name), 0o777 & ~mask)
        for name in files:
            if not os.path.islink(os.path.join(folder, name)):
                os.chmod(os.path.join(folder, name), 0o666 & ~mask)


def _named_paths(named):
    """(name, path) pairs of {name: a path, a list of paths or None}."""
    for name, paths in named.items():
        for path in [paths] if isinstance(paths, (str, os.PathLike)) else (paths or ()):
            if path:
                yield name, os.fspath(path)


def _resolved(path: str) -> str:
    """`path` made absolute with its symbolic links resolved (remote: as written)."""
    return path.rstrip("/") if "://" in path else os.path.realpath(path)


def path_relation(output: str, source: str):
    """How path `output` meets path `source`: "is", "holds" (a folder above it), "lies
    inside", or None when neither can touch the other (links and hard links followed)."""
    out, src = _resolved(output), _resolved(source)
    if out == src or (os.path.exists(output) and os.path.exists(source)
                      and os.path.samefile(output, source)):
        return "is"
    if src.startswith(out.rstrip("/") + "/"):
        return "holds"
    if out.startswith(src.rstrip("/") + "/"):
        return "lies inside"
    return None


def check_outputs_apart(outputs: dict, inputs: dict) -> None:
    """Refuses, before any work, a run whose output would replace what it reads.

    An output never is, holds (a folder that `--overwrite` would replace) or lies inside
    an input of the same run, and no two outputs are one file. Symbolic links and hard
    links are followed: a link to the corpus is the corpus.

    Args:
      outputs: {name (a flag or parameter): a path or a list of paths} the run writes.
      inputs: {name: a path or a list of paths (or None)} the run reads; a checkpoint
        prefix stands for its files.

    Raises:
      ValueError: naming both paths, their flags, and what to do.
    """
    if not isinstance(outputs, dict) or not isinstance(inputs, dict):
        raise TypeError("check_outputs_apart takes {name: path or paths} dicts, got "
                        f"{type(outputs).__name__} and {type(inputs).__name__}")
    outputs, inputs = list(_named_paths(outputs)), list(_named_paths(inputs))
    for index, (name, path) in enumerate(outputs):
        for other_name, other in outputs[:index]:
            if path_relation(path, other) == "is":
                raise ValueError(f"{name} {path} and {other_name} {other} are one file: "
                                 "every output needs its own name")
        for source_name, source in inputs:
            relation = path_relation(path, source)
            if relation:
                raise ValueError(
                    f"{name} {path} {relation} {source_name} {source}, which this run "
                    f"reads: an output never replaces an input; choose another {name}")


def write_text_atomic(path: str, text: str) -> None:
    """Writes `text` (UTF-8) to `path` through a temporary file."""
    with atomic_output(path) as temporary:
        gfile = _gfile(path)
        with (gfile.GFile(temporary, "w") if gfile else
              open(temporary, "w", encoding="utf-8")) as file:
            file.write(text)


def check_output_path(path: str, flag: str = "output_file",
                      parent_must_exist: bool = True) -> None:
    """Refuses, before any work, an output path that cannot be written as a file.

    Raises:
      ValueError / FileNotFoundError: naming the flag, the path and what is wrong.
    """
    if os.path.isdir(path):
        raise ValueError(f"{flag} {path!r} is an existing directory: expected a file "
                         "name (e.g. a name inside that directory)")
    parent = os.path.dirname(os.path.abspath(path))
    if not parent_must_exist:
        parent = _nearest_existing(parent)  # which must be a folder
    if os.path.exists(parent) and not os.path.isdir(parent):
        raise ValueError(f"{flag} {path!r}: {parent!r} is a file, not a directory")
    if not os.path.isdir(parent):
        raise FileNotFoundError(f"{flag} {path!r}: directory {parent!r} does not exist")


def check_output_dir(path: str, flag: str = "output_dir") -> None:
    """Refuses, before any work, an output folder that is a file or lies under one.

    Remote paths (`gs://...`) are left to the filesystem.
    """
    if "://" in path:
        return
    folder = _nearest_existing(path)
    if not os.path.isdir(folder):
        where = "is" if folder == os.path.abspath(path) else f"lies under {folder!r}, which is"
        raise ValueError(f"{flag} {path!r} {where} a file: expected a folder")


LOCK_FILE = ".bert_tf.lock"


@contextlib.contextmanager
def locked_folder(path: str, flag: str = "output_dir"):
    """Holds `path/.bert_tf.lock` (pid and host) while the block runs: a second run on
    the same folder is refused instead of overwriting the first one's checkpoints.

    A lock left by a process of this host that no longer runs (a killed run) is taken
    over, saying so. Remote folders (`gs://...`) are not locked.

    Raises:
        ValueError: naming the folder and the process that holds it.
    """
    if "://" in path:
        yield
        return
    lock, host = os.path.join(path, LOCK_FILE), socket.gethostname()
    while True:
        try:
            descriptor = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            break
        except FileExistsError:
            _take_over_stale_lock(lock, host, flag)
    with os.fdopen(descriptor, "w") as file:
        file.write(f"{os.getpid()} {host}\n")
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(lock)


def _take_over_stale_lock(lock: str, host: str, flag: str) -> None:
    """Removes `lock` when its process is gone; raises while it still runs."""
    try:
        with open(lock, encoding="utf-8") as file:
            pid_text, _, lock_host = file.read().strip().partition(" ")
    except FileNotFoundError:
        return  # released meanwhile: try again
    pid = int(pid_text) if pid_text.isdigit() else None
    folder = os.path.dirname(lock)
    if pid is not None and (lock_host != host or process_is_running(pid)):
        raise ValueError(f"{flag} {folder} is in use by process {pid} on {lock_host}: wait "
                         f"for that run to end, or use another --{flag} (if it is not "
                         f"running, remove {lock})")
    logging.warning("%s: taking over the lock of process %s on %s, which no longer runs",
                    folder, pid_text or "?", lock_host or "?")
    with contextlib.suppress(FileNotFoundError):
        os.remove(lock)


def _nearest_existing(path: str) -> str:
    """`path` (absolute) or its nearest ancestor that exists."""
    path = os.path.abspath(path)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return path


def path_argument(path, name: str, expected: str = "a path") -> str:
    """`path` (a str or os.PathLike) as a str: the check of a parameter that names a
    folder, a checkpoint prefix or a file still to be written.

    Raises:
      TypeError: `path` is not a path (a list, a number, bytes, ...), naming `name`.
    """
    if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{name} must be {expected} (str), got {type(path).__name__}: "
                        f"{str(path)[:60]!r}")
    return os.fspath(path)


def existing_file(path, name: str) -> str:
    """`path` (a str or os.PathLike) as a str, checked to be an existing file: what the
    library's readers take first, so that a wrong argument is named.

    Raises:
      TypeError: `path` is not a path (a list, a number, ...).
      IsADirectoryError / FileNotFoundError: a folder, or nothing there.
    """
    path = path_argument(path, name, "a file path")
    if os.path.isdir(path):
        raise IsADirectoryError(f"{name} {path} is a folder: expected a file")
    if not os.path.isfile(path) and "://" not in path:
        raise FileNotFoundError(f"{name} not found: {path}")
    return path


def file_in_folder(folder, name):
    """`folder/name` when `folder` is a directory holding that file, else None."""
    if folder and os.path.isdir(folder) and os.path.isfile(os.path.join(folder, name)):
        return os.path.join(folder, name)
    return None


def file_beside(path, name):
    """`name` in the folder `path`, or beside the file or checkpoint prefix `path`."""
    if not path:
        return None
    return file_in_folder(path if os.path.isdir(path) else os.path.dirname(path), name)


def run_folder_of(path):
    """The output_dir a checkpoint location belongs to: `path` itself when a folder,
    else the folder of the prefix, leaving a run's `best/` (`--best_metric`) for its
    parent; None for no path."""
    if not path:
        return None
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    if os.path.basename(os.path.normpath(folder)) == "best":
        folder = os.path.dirname(os.path.normpath(folder))
    return folder


def read_json(path: str, what: str):
    """The content of the JSON file `path`, `what` naming it in errors.

    Raises:
      FileNotFoundError / ValueError: naming the file, what it is, and the JSON error.
    """
    try:
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} not found: {what}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path} is not valid JSON ({error}): {what}") from None


def read_json_if_present(path: str, what: str):
    """`read_json`, or {} when there is no file at `path` (an optional settings file)."""
    return read_json(path, what) if os.path.isfile(path) else {}


def json_default(value):
    """`json.dumps(default=...)` for what the results and configs hold beyond JSON's
    types: numpy scalars as Python numbers, sets as lists."""
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (tuple, set)):
        return list(value)
    raise TypeError(f"{value!r} is not a JSON value")


def file_digest(path: str) -> str:
    """SHA-256 of a file's content: what caches are keyed by (never size or mtime)."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _gfile(path: str):
    """`tf.io.gfile` for a remote path (`gs://...`), None for a local one.

    TensorFlow is loaded only for remote paths, so that the tools that need no model
    (the SQuAD evaluator, conlleval, config files) start without it.
    """
    if "://" not in path:
        return None
    return importlib.import_module("tensorflow").io.gfile


def iter_text_lines(path: str):
    """Yields (line_number, line) of a UTF-8 text file, line ends kept.

    A UTF-8 byte-order mark on the first line is dropped.

    Raises:
      ValueError: naming the file, for one that is binary data
        (`input_paths.check_text_file`); naming file, line and byte, for a line that
        is not UTF-8 or holds a NUL byte.
    """
    input_paths.check_text_file(path)
    with open(path, "rb") as file:
        for line_number, raw in enumerate(file, start=1):
            if line_number == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8):]
            nul = raw.find(b"\x00")
            if nul >= 0:
                raise ValueError(f"{path}:{line_number}: NUL byte at column {nul + 1}: not a "
                                 "text file (expected UTF-8 text)")
            try:
                yield line_number, raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise ValueError(
                    f"{path}:{line_number}: not UTF-8 text (byte 0x{raw[error.start]:02x} at "
                    f"column {error.start + 1}); save the file as UTF-8") from None
