"""Worker processes that end with their command: a worker whose parent dies (even by
SIGKILL) ends too, instead of waiting forever for work that will never come.

SIGTERM and Ctrl-C in the command itself raise in its main thread
(`bert_tf.commands.command_line`), so that every `with` block on the way out runs: the pool's
workers are terminated (`pretraining_pipeline`) and the temporary output files are
removed (`record_writing.ShardedWriter`). `end_with_parent` runs first thing in each
worker process.

Workers that a library starts and joins itself (Apache Beam's DirectRunner: `sh -c
python -m ...sdk_worker_main` per worker, joined once each has finished its bundle)
are ended by `end_all_workers`, which the Beam commands run as the stop signal arrives
(`bert_tf.process.signals.on_stop`).
"""

import ctypes
import os
import signal
import sys
import threading
import time

from bert_tf.process import signals

_NOT_LIVE = ("Z", "X")  # /proc/PID/stat states of a process that has ended

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_PARENT_POLL_SECONDS = 1.0


def end_with_parent(parent_pid: int) -> None:
    """Makes this worker process end when `parent_pid` (its parent) ends.

    Linux: the kernel sends SIGKILL when the parent dies (prctl PR_SET_PDEATHSIG).
    Elsewhere a daemon thread checks the parent every second. SIGTERM gets its default
    action (a worker forked from a command inherits the command's handler) and SIGINT
    is ignored: on Ctrl-C the parent ends the workers itself.
    """
    signals.reset_in_worker()
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            _watch_parent(parent_pid)
    else:
        _watch_parent(parent_pid)
    if os.getppid() != parent_pid:  # the parent died before the line above
        os._exit(1)  # pylint: disable=protected-access


def _watch_parent(parent_pid: int) -> None:
    def watch():
        while os.getppid() == parent_pid:
            time.sleep(_PARENT_POLL_SECONDS)
        os._exit(1)  # pylint: disable=protected-access
    threading.Thread(target=watch, name="end_with_parent", daemon=True).start()


def descendants(pid: int) -> list:
    """The ids of the live processes below `pid` (children, grandchildren, ...), read
    from /proc; [] where there is no /proc."""
    children = {}
    try:
        names = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []
    for name in names:
        try:
            with open(f"/proc/{name}/stat", encoding="utf-8") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # ended while we read
        if fields[0] not in _NOT_LIVE:
            children.setdefault(int(fields[1]), []).append(int(name))
    found, todo = [], [pid]
    while todo:
        below = children.get(todo.pop(), [])
        found.extend(below)
        todo.extend(below)
    return found


def end_all_workers() -> None:
    """Ends every process below this one now (SIGKILL), and from here on keeps quiet
    the errors of this process's threads that waited for them.

    For a command stopped by a signal whose workers a library manages: the library's
    clean-up would wait for each worker to finish its work first (seconds to minutes).
    The workers write nothing that this process does not remove on the way out (their
    temporary files). A thread that waited for one fails ("worker exited with return
    code -9"): that error is the signal's, and is not reported.
    """
    threading.excepthook = _quiet
    for _ in range(3):  # again: a worker's shell may have started its Python meanwhile
        pids = descendants(os.getpid())
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass  # ended meanwhile
        if not pids:
            return


def _quiet(args) -> None:
    """A `threading.excepthook` that reports nothing."""
    del args
