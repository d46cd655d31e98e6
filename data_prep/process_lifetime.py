"""Worker processes that end with their command: a worker whose parent dies (even by
SIGKILL) ends too, instead of waiting forever for work that will never come.

SIGTERM and Ctrl-C in the command itself raise in its main thread
(`bert_tf.command_line`), so that every `with` block on the way out runs: the pool's
workers are terminated (`pretraining_pipeline`) and the temporary output files are
removed (`record_writing.ShardedWriter`). `end_with_parent` runs first thing in each
worker process.
"""

import ctypes
import os
import signal
import sys
import threading
import time

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_PARENT_POLL_SECONDS = 1.0


def end_with_parent(parent_pid: int) -> None:
    """Makes this worker process end when `parent_pid` (its parent) ends.

    Linux: the kernel sends SIGKILL when the parent dies (prctl PR_SET_PDEATHSIG).
    Elsewhere a daemon thread checks the parent every second. SIGTERM gets its default
    action (a worker forked from a command inherits the command's handler) and SIGINT
    is ignored: on Ctrl-C the parent ends the workers itself.
    """
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
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
