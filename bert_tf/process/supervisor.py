"""A multi-worker run (`--distribution_strategy=multi_worker_mirrored`) under a parent
process that SIGTERM and SIGINT always reach.

While MultiWorkerMirroredStrategy waits for the other workers of TF_CONFIG, the process
is inside TensorFlow's C++ code holding Python's lock, and TensorFlow has taken SIGTERM
for its own preemption notice: neither signal could stop it (only SIGKILL did). So the
command runs itself again as a child; the parent only waits, forwards signals and
reports. Until the child says it joined its cluster (`report_joined`), a signal ends it
(SIGKILL) with one line; afterwards the signal is passed on, and the child saves a
checkpoint and stops as any training run does.

    if not supervisor.supervised():
        sys.exit(supervisor.run_supervised("run_classifier"))
    supervisor.notify_joined()   # in the child, once its strategy joined the cluster

Why the child re-executes the command line (`sys.orig_argv`, the interpreter's own
arguments included, so that a console script, `python -m` and a root script rerun as
they were started) rather than something plainer: the child must be a fresh process.
`os.fork()` is unsafe once any thread runs, and the command's process may have started
threads or imported TensorFlow by then (a test, a search's trials, absl's or a data
pipeline's threads; Python warns on fork of a multi-threaded process), and
`multiprocessing`'s spawn would re-import the command module under another `__main__`
without its parsed flags. A fresh interpreter on the same arguments parses the same
flags and runs the same code path, the environment variable telling it that it is the
child. The parent loads no run code and imports no TensorFlow
(`bert_tf.commands.command_line` decides to supervise before it loads the run code).
"""

import os
import signal
import subprocess
import sys
import threading

from bert_tf.process import signals

SUPERVISOR_FD = "BERT_TF_SUPERVISOR_FD"  # in the child: where it says it joined


def supervised() -> bool:
    """Whether this process is the child of `run_supervised`."""
    return SUPERVISOR_FD in os.environ


def run_supervised(program: str, output_dir=None) -> int:
    """Runs this command again as a child and waits for it; returns its exit status
    (128 + the signal's number when a signal ended it while it waited, after removing
    `output_dir` when the child made it and left it empty)."""
    made = bool(output_dir) and not os.path.exists(output_dir)
    read_fd, write_fd = os.pipe()
    child = subprocess.Popen(  # its own session: Ctrl-C reaches the parent alone
        [sys.executable, *sys.orig_argv[1:]], pass_fds=(write_fd,),
        env=dict(os.environ, **{SUPERVISOR_FD: str(write_fd)}), start_new_session=True)
    os.close(write_fd)
    joined = threading.Event()

    def watch():
        with os.fdopen(read_fd, "rb") as reader:
            if reader.read(1):
                joined.set()
    threading.Thread(target=watch, daemon=True).start()
    stopped = []

    def forward(signal_number, frame):
        del frame
        if joined.is_set():
            child.send_signal(signal_number)  # it saves a checkpoint, then stops
            return
        if not stopped:
            stopped.append(signal_number)
            child.kill()
            print(f"{program}: error: stopped by {signal.Signals(signal_number).name} "
                  "while waiting for the other workers of TF_CONFIG", file=sys.stderr)

    with signals.handled(forward):
        status = child.wait()
    if stopped:
        if made and os.path.isdir(output_dir) and not os.listdir(output_dir):
            os.rmdir(output_dir)
        return 128 + stopped[0]
    return status if status >= 0 else 128 - status


def notify_joined() -> None:
    """Tells the supervising parent, once, that the run joined its cluster and signals
    may now be passed on; nothing in a process that is not supervised (the library calls
    it when a MultiWorkerMirroredStrategy is made: `bert_tf.train.distribute`)."""
    descriptor = os.environ.pop(SUPERVISOR_FD, None)  # once: the variable goes with it
    if descriptor is None:
        return
    try:
        os.write(int(descriptor), b"j")
        os.close(int(descriptor))
    except OSError:
        pass  # the parent is gone
