"""SIGTERM and SIGINT in a command: the one place that installs their handlers.

A command's work runs inside `signals_raise()`: the first SIGTERM raises `Terminated`,
the first SIGINT KeyboardInterrupt, in the main thread, so that every `with` block and
`finally` on the way out runs (worker pools end, temporary files go) and
`bert_tf.commands.command_line` ends the process with one line and the signal's status. Later
signals are ignored, so that the clean-up runs to its end.

Work that a library runs in its own worker processes, and whose clean-up on the way out
waits for those workers to finish what they do (Apache Beam's DirectRunner joins them),
registers an action that ends them at once, before the exception is raised:

    with signals.on_stop(process_lifetime.end_all_workers):
        with signals.signals_raise():
            pipeline.run()

`handled(handler)` installs any other handler for both signals (the multi-worker
supervisor's, which forwards them; a training loop's, which saves a checkpoint first:
`bert_tf.train.preemption`) and restores the previous ones afterwards;
`reset_in_worker()` gives a pool worker the defaults. Nothing else in bert_tf or
data_prep calls `signal.signal` (tests/test_command_signals.py).
"""

import contextlib
import signal
import sys
import threading

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_STOP_ACTIONS = []  # called, newest first, as a stop signal arrives (`on_stop`)


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived (what a preempted VM or Kubernetes sends): raised in the main
    thread as Ctrl-C is, so that unfinished outputs are removed on the way out."""
    exit_code = 128 + signal.SIGTERM

    def __init__(self):
        super().__init__("stopped by SIGTERM")


@contextlib.contextmanager
def handled(handler, signals=STOP_SIGNALS):
    """Within the block, `handler(signum, frame)` handles `signals` (SIGTERM and
    SIGINT); the previous handlers come back afterwards (the default action for one
    that was installed outside Python). Main thread only (elsewhere Python refuses to
    install handlers): in another thread the block runs with the handlers as they are.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {stop: signal.signal(stop, handler) for stop in signals}
    try:
        yield
    finally:
        for stop, old in previous.items():
            signal.signal(stop, signal.SIG_DFL if old is None else old)


def reset_in_worker() -> None:
    """In a pool worker forked from a command: SIGTERM gets its default action (the
    worker inherited the command's handler) and SIGINT is ignored (on Ctrl-C the parent
    ends its workers itself)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _raise_stop(signum, frame):
    """SIGTERM raises `Terminated`, SIGINT KeyboardInterrupt, after the `on_stop`
    actions; later signals are ignored so that the clean-up on the way out (worker
    pools, temporary files) runs to its end."""
    del frame
    for stop in STOP_SIGNALS:
        signal.signal(stop, signal.SIG_IGN)
    for action in reversed(_STOP_ACTIONS):
        try:
            action()
        except Exception as error:  # pylint: disable=broad-except
            print(f"while stopping: {action.__name__} failed: {error}", file=sys.stderr)
    raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def signals_raise():
    """A context within which SIGTERM and SIGINT raise (main thread only; training
    loops install their own handlers that save a checkpoint first, then restore these)."""
    return handled(_raise_stop)


def forget_interrupt() -> None:
    """Makes the exit status the one the command asks for after Ctrl-C.

    CPython remembers a KeyboardInterrupt that left an `exec()` or `eval()` of a string
    (library code runs them: dataclasses, namedtuple) as unhandled, even when it was
    handled further up; a command run as `python -m` then ends itself by SIGINT at exit
    (status -2) whatever status it asked for (issue 49: 2 runs in 9 of a Beam tool
    stopped while it built its pipeline). Evaluating a string resets that memory.
    """
    exec("pass")  # pylint: disable=exec-used


@contextlib.contextmanager
def on_stop(action):
    """Within the block, a stop signal calls `action()` before it raises.

    For workers that the code on the way out would otherwise wait for: `action` ends
    them at once. It runs in the signal handler, so it must not block for long; an
    exception it raises is reported in one line and the stop goes on.

    Args:
      action: A function of no arguments.
    """
    _STOP_ACTIONS.append(action)
    try:
        yield
    finally:
        _STOP_ACTIONS.remove(action)
