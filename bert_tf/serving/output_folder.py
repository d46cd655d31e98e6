"""The folder an export writes, once: the rule for an existing folder, and the write
through a temporary sibling folder that is renamed into place when complete.

    target = output_folder.check_output_folder(path, overwrite=False)
    output_folder.write_folder(target, write)   # write(temporary_folder) fills it

A killed export never leaves a finished-looking folder: the files are written into
`.<name>.tmp-<pid>-<uuid>` beside the target, and a later export to the same target
removes such folders of processes that are gone.
"""

import os
import shutil
import uuid

from bert_tf.io import fileio
from bert_tf.io import write_errors
from bert_tf.weights.load_report import name_list

# How a Python caller replaces a folder (commands name their own flag).
OVERWRITE_HINT = "pass overwrite=True to replace it"


def check_output_folder(path, overwrite=False, hint=OVERWRITE_HINT):
    """The absolute folder to write: a missing or empty folder, or any folder with
    `overwrite`; through a symbolic link, the folder it points to (the link stays).

    Raises:
        FileExistsError: naming the folder when it is a file, or not empty without
            `overwrite` (with `hint`: how the caller replaces it).
    """
    path = os.path.realpath(os.fspath(path))
    if os.path.exists(path) and not os.path.isdir(path):
        raise FileExistsError(f"export_dir {path} is a file, expected a folder")
    entries = sorted(os.listdir(path)) if os.path.isdir(path) else []
    if entries and not overwrite:
        raise FileExistsError(f"export_dir {path} is not empty (holds {name_list(entries)});"
                              f" {hint}, or choose another folder")
    return path


def remove_stale_temporaries(parent, base):
    """Removes `.<base>.tmp-<pid>-*` folders whose writing process is gone (a killed
    export leaves its temporary folder: `finally` does not run on SIGKILL)."""
    prefix = f".{base}.tmp-"
    for name in os.listdir(parent):
        pid = name[len(prefix):].split("-")[0] if name.startswith(prefix) else ""
        if pid.isdigit() and not fileio.process_is_running(int(pid)):
            shutil.rmtree(os.path.join(parent, name), ignore_errors=True)


def write_folder(target, write):
    """Calls `write(temporary)` on a new sibling folder of `target`, then renames it
    onto `target` (replacing what was there; through a symbolic link, its target, the
    link kept). Returns `target`.

    Raises:
      write_errors.WriteFailed: a write error (a file too large for the file system, no
        space, a folder that cannot be written), naming the file and the cause; the
        temporary folder is removed and `target` stays as it was.
    """
    given, target = target, os.path.realpath(target)
    with write_errors.reported(os.path.dirname(target)):
        return _write_folder(given, target, write)


def _write_folder(given, target, write):
    parent = os.path.dirname(target)
    os.makedirs(parent, exist_ok=True)
    base = os.path.basename(target)
    remove_stale_temporaries(parent, base)
    temporary = os.path.join(parent, f".{base}.tmp-{os.getpid()}-{uuid.uuid4().hex}")
    try:
        write(temporary)
        fileio.apply_mode(temporary)  # the umask's modes (safetensors writes 0600)
        if os.path.isdir(target) and os.listdir(target):
            old = f"{temporary}.old"
            os.replace(target, old)
            os.replace(temporary, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            if os.path.isdir(target):
                os.rmdir(target)
            os.replace(temporary, target)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    return given
