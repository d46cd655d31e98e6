"""Processes that end together: a data tool stopped by SIGTERM or SIGINT (Ctrl-C) ends
its worker processes and exits with one line, and a worker whose parent dies (even by
SIGKILL) ends too, instead of waiting forever for work that will never come.

The command side (`run_ending_on_signals`) turns SIGTERM and SIGINT into an
`Interrupted` exception in the main thread, so that every `with` block on the way out
runs: the pool's workers are terminated (`pretraining_pipeline`) and the temporary
output files are removed (`record_writing.ShardedWriter`). The worker side
(`end_with_parent`) runs first thing in each worker process.
"""

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_ENDING_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_PARENT_POLL_SECONDS = 1.0


class Interrupted(BaseException):
    """SIGTERM or SIGINT arrived (a BaseException: `except Exception` lets it through)."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


def _raise_interrupted(signum, frame):
    del frame
    for ending in _ENDING_SIGNALS:  # one is enough: let the clean-up run to its end
        signal.signal(ending, signal.SIG_IGN)
    raise Interrupted(signum)


@contextlib.contextmanager
def signals_raise_interrupted():
    """Within the block, SIGTERM and SIGINT raise `Interrupted` in the main thread."""
    previous = {signum: signal.signal(signum, _raise_interrupted) for signum in _ENDING_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def run_ending_on_signals(program: str, run_main) -> None:
    """Runs a command's `run_main()`; SIGTERM or SIGINT ends it with one line on stderr
    and the exit status 128 + the signal's number (143 for SIGTERM, 130 for SIGINT)."""
    try:
        with signals_raise_interrupted():
            run_main()
    except Interrupted as interrupted:
        print(f"{program}: error: {interrupted}; the worker processes were ended and the "
              "unfinished output files removed", file=sys.stderr)
        sys.exit(128 + interrupted.signum)


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
