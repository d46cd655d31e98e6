"""A signal ends a command that runs worker processes, every time (issue 49, class 1).

Every command that runs a pool or worker processes (`POOL_COMMANDS`: the local
pre-training data tool's pool, the Beam tools on the DirectRunner's multi_processing
mode, a multi-worker run's supervising parent) gets SIGINT or SIGTERM, sent to the
parent alone, at each phase (`PHASES`): before its workers start, while they read, while
they write. Each phase is reached by waiting for a marker (a log line, the workers in
/proc, a temporary output that is empty or not), never by a fixed sleep. The command
ends within `seconds` of the signal, with its one line and the signal's status (128 +
its number), its worker processes end with it, and no output that looks finished is
left (the folder holds its inputs alone: no file, no folder).

Why it hung (every other run, in issue 35): a pool worker killed while it wrote a
result to the result pipe left half a message there; the pool's manager thread waited
forever for the rest (the command held the pipe's write end too), and `shutdown`, or
Python's exit, joined it (`pretraining_pipeline._end_pool` now closes that end once the
workers are dead). The Beam tools took 4-40 s and more: the DirectRunner joins each
worker once it has finished its bundle; the stop signal now kills them first
(`process_lifetime.end_all_workers`, run by `bert_tf.process.signals.on_stop`), and the
sink's temporary folder goes (`beam_chunks.removed_if_unfinished`). The supervisor's
cases never saw their marker: TensorFlow's server listens on `[::]:port`, which
/proc/net/tcp6 lists, not /proc/net/tcp (`listening`).

The default suite runs `DEFAULT` (the local tool's phases, signals alternating, and the
supervisor's SIGTERM); the others are slow.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

import test_cli

from test_create_pretraining_data import (  # noqa: F401
    PRED, SEQ, VOCAB, proc_stat, write_corpus)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEAM_WORKERS = ["--runner=DirectRunner", "--direct_num_workers=2",
                "--direct_running_mode=multi_processing"]

# Every command that starts worker processes, by the module that starts them: a module
# of bert_tf/ or data_prep/ that starts processes and is not here fails
# test_every_module_that_starts_processes_has_a_command_here.
POOL_COMMANDS = {
    "bert-create-pretraining-data": "data_prep/pretraining_pipeline.py",
    "bert-create-pretraining-data-beam": "data_prep/beam_pipeline.py",
    "bert-build-vocab-beam": "data_prep/beam_vocab.py",
    "bert-run-classifier (multi-worker)": "bert_tf/process/supervisor.py",
}
# What else starts a process, and why it needs no case.
NOT_POOLS = {
    "bert_tf/commands/command_line.py": "calls supervisor.run_supervised",
}
PHASES = ("start", "read", "write")
# (command, phase): why the phase does not exist for that command.
NO_PHASE = {
    ("bert-build-vocab-beam", "write"): "the vocab is written at once, on one worker, "
                                        "after the counting ends",
    ("bert-run-classifier (multi-worker)", "read"): "a training run's stop is the "
                                                    "runners' (test_training)",
    ("bert-run-classifier (multi-worker)", "write"): "as read",
}
CASES = [(command, phase, signum) for command in POOL_COMMANDS for phase in PHASES
         if (command, phase) not in NO_PHASE for signum in (signal.SIGINT, signal.SIGTERM)]
# The local tool's cases (seconds each) and the supervisor's SIGTERM (10 s: TensorFlow's
# import); the Beam tools' take 10-30 s each to reach their phase.
DEFAULT = {("bert-create-pretraining-data", "write", signal.SIGTERM),
           ("bert-create-pretraining-data", "read", signal.SIGINT),
           ("bert-create-pretraining-data", "start", signal.SIGINT),
           ("bert-run-classifier (multi-worker)", "start", signal.SIGTERM)}


def descendants(pid):
    """The live processes below `pid` (children, grandchildren, ...)."""
    parents = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = proc_stat(int(name))
            if stat:
                parents.setdefault(stat[1], []).append(int(name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def paths_in(folder):
    """The files and folders below `folder`."""
    return set(folder.rglob("*"))


def _wchan(pid):
    try:
        with open(f"/proc/{pid}/wchan", encoding="utf-8") as wchan:
            return wchan.read()
    except OSError:
        return ""


class Run:
    """A command started in `folder`, its stderr in a file (read while it runs); what
    `folder` holds before it starts is its inputs (`inputs`)."""

    def __init__(self, folder, args, **env):
        self.folder = folder
        self.inputs = paths_in(folder)
        self.log_path = folder.parent / f"{folder.name}.stderr"
        with open(self.log_path, "w", encoding="utf-8") as log:
            self.process = subprocess.Popen(
                [sys.executable, *args], cwd=REPO, stdout=subprocess.DEVNULL, stderr=log,
                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **env))

    def log(self):
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def wait_for(self, condition, what, seconds=120):
        deadline = time.time() + seconds
        while time.time() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"ended (status {self.process.returncode}) before {what}: "
                            f"{self.log()[-3000:]}")
            if condition():
                return
            time.sleep(0.02)
        self.process.kill()
        pytest.fail(f"no {what} within {seconds} s: {self.log()[-3000:]}")

    def outputs(self, pattern):
        return list(self.folder.glob(pattern))


def _local_tool(folder, vocab_file, phase):
    """The local tool with 2 pool workers: `start` reads a FIFO nobody writes (it blocks
    opening it, before the pool has a process), `read` a corpus whose first chunks take
    the workers seconds (nothing written yet), `write` a corpus of many small chunks."""
    corpus = folder / "corpus.txt"
    if phase == "start":
        os.mkfifo(corpus)
    else:
        write_corpus(corpus, 6000, seed=5)
    chunk = {"start": 3000, "read": 400_000, "write": 3000}[phase]
    dupe = {"start": 1, "read": 40, "write": 5}[phase]
    run = Run(folder, ["-m", "data_prep.create_pretraining_data", f"--input_file={corpus}",
                       f"--output_file={folder / 'out.tfrecord'}", f"--vocab_file={vocab_file}",
                       f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PRED}",
                       f"--dupe_factor={dupe}", f"--chunk_chars={chunk}", "--num_workers=3",
                       "--num_output_shards=2"])
    pid = run.process.pid
    temps = lambda: run.outputs("out.tfrecord*.tmp-*")  # noqa: E731
    if phase == "start":
        run.wait_for(lambda: "*** Reading from" in run.log() and _wchan(pid) == "wait_for_partner",
                     "a wait for the input FIFO")
        assert not descendants(pid)
    elif phase == "read":
        run.wait_for(lambda: len(descendants(pid)) == 2 and temps()
                     and not any(t.stat().st_size for t in temps()),
                     "2 workers at work, nothing written")
    else:
        run.wait_for(lambda: len(descendants(pid)) == 2
                     and any(t.stat().st_size for t in temps()), "2 workers, records written")
    return run, "bert-create-pretraining-data", 5


def _beam_tool(folder, vocab_file, phase, vocab_tool):
    """A Beam tool on the DirectRunner with 2 worker processes (`sh -c python ...`):
    `start` as it logs that it reads (its workers come seconds later), `read` once the
    workers run and nothing is written, `write` once the sink's temporary files hold
    records."""
    corpus = write_corpus(folder / "corpus.txt", 4000 if phase == "write" else 1500, seed=5)
    if vocab_tool:
        program = "bert-build-vocab-beam"
        args = ["-m", "data_prep.beam_vocab", f"--input_file={corpus}",
                f"--output_file={folder / 'vocab.txt'}", "--vocab_size=400"]
    else:
        program = "bert-create-pretraining-data-beam"
        args = ["-m", "data_prep.beam_pipeline", f"--input_file={corpus}",
                f"--output_file={folder / 'out.tfrecord'}", f"--vocab_file={vocab_file}",
                f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PRED}",
                "--dupe_factor=5", "--num_output_shards=2"]
    run = Run(folder, args + BEAM_WORKERS)
    pid = run.process.pid
    written = lambda: [p for p in folder.rglob("*")  # noqa: E731
                       if p.is_file() and p.name != "corpus.txt" and p.stat().st_size]
    if phase == "start":
        marker = "*** Reading" if not vocab_tool else "Running pipeline"
        run.wait_for(lambda: marker in run.log() or (vocab_tool and "Pipeline" in run.log()),
                     "the pipeline's start")
        assert not descendants(pid)
    elif phase == "read":
        run.wait_for(lambda: len(descendants(pid)) >= 4 and not written(),
                     "the Beam workers at work, nothing written")
    else:
        run.wait_for(lambda: len(descendants(pid)) >= 4 and written(),
                     "the Beam workers, records written", seconds=180)
    return run, program, 5


def listening(port):
    """Whether a socket of this machine listens on TCP `port`, over IPv4 or IPv6
    (TensorFlow's gRPC server listens on `[::]:port`, listed in /proc/net/tcp6 alone)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="utf-8") as tcp:
                lines = tcp.read().splitlines()[1:]
        except OSError:  # no IPv6 on this machine
            continue
        if any(line.split()[1].endswith(f":{port:04X}") and line.split()[3] == "0A"  # LISTEN
               for line in lines):
            return True
    return False


def _multi_worker_run(folder, phase):
    """run_classifier with --distribution_strategy=multi_worker_mirrored, as worker 0 of
    a cluster whose worker 1 never comes: its supervising parent waits (`start`: once
    the child's TensorFlow server listens on its port)."""
    del phase
    import test_run_classifier  # pylint: disable=import-outside-toplevel
    test_run_classifier.write_sst2(folder / "data")
    vocab_file, config_file = test_run_classifier.tiny_model_files(folder / "model")
    tf_config = test_cli.two_worker_tf_config()
    port = int(json.loads(tf_config)["cluster"]["worker"][0].rsplit(":", 1)[1])
    run = Run(folder, ["run_classifier.py", "--task_name=SST-2", "--do_train",
                       f"--data_dir={folder / 'data'}", f"--vocab_file={vocab_file}",
                       f"--bert_config_file={config_file}", f"--output_dir={folder / 'out'}",
                       "--max_seq_length=12", "--allow_random_encoder",
                       "--distribution_strategy=multi_worker_mirrored"],
              TF_CONFIG=tf_config)

    run.wait_for(lambda: len(descendants(run.process.pid)) == 1 and listening(port),
                 "the child waiting for worker 1")
    return run, "bert-run-classifier", 5


def start(command, phase, folder, vocab_file):
    """Starts `command` and returns once it is in `phase`: (run, program, seconds)."""
    if command == "bert-create-pretraining-data":
        return _local_tool(folder, vocab_file, phase)
    if command == "bert-create-pretraining-data-beam":
        return _beam_tool(folder, vocab_file, phase, vocab_tool=False)
    if command == "bert-build-vocab-beam":
        return _beam_tool(folder, vocab_file, phase, vocab_tool=True)
    assert command == "bert-run-classifier (multi-worker)", command
    return _multi_worker_run(folder, phase)


def _case_params():
    for command, phase, signum in CASES:
        marks = [] if (command, phase, signum) in DEFAULT else [pytest.mark.slow]
        yield pytest.param(command, phase, signum, marks=marks,
                           id=f"{command.split()[0]}-{phase}-{signum.name}")


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
@pytest.mark.parametrize("command, phase, signum", list(_case_params()))
def test_a_signal_to_the_parent_ends_the_command_and_its_workers(
        tmp_path, vocab_file, command, phase, signum):
    if "beam" in command:
        pytest.importorskip("apache_beam")
    folder = tmp_path / "run"
    folder.mkdir()
    run, program, seconds = start(command, phase, folder, vocab_file)
    workers = descendants(run.process.pid)
    sent = time.time()
    run.process.send_signal(signum)
    try:
        run.process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        run.process.send_signal(signal.SIGKILL)
        pytest.fail(f"{command} still ran {seconds} s after {signum.name} ({phase}): "
                    f"{run.log()[-3000:]}")
    took = time.time() - sent
    deadline = time.time() + 10
    while time.time() < deadline and [pid for pid in workers if proc_stat(pid)]:
        time.sleep(0.05)
    stderr = run.log()
    assert [pid for pid in workers if proc_stat(pid)] == [], f"workers left after {signum.name}"
    assert run.process.returncode == 128 + signum, stderr[-3000:]
    assert "Traceback" not in stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith(f"{program}: error: stopped by {signum.name}"), last
    if command.endswith("(multi-worker)"):
        assert last.endswith("while waiting for the other workers of TF_CONFIG"), last
    left = paths_in(folder) - run.inputs  # no file, no folder (an output_dir, Beam's)
    assert left == set(), f"left behind: {sorted(map(str, left))}"
    print(f"{command} {phase} {signum.name}: ended {took:.2f} s after the signal")


def modules_matching(pattern):
    """The modules of bert_tf/ and data_prep/ (paths from the repository root) whose
    source the regular expression `pattern` matches."""
    found = set()
    for package in ("bert_tf", "data_prep"):
        for root, _, files in os.walk(os.path.join(REPO, package)):
            for name in files:
                path = os.path.join(root, name)
                if name.endswith(".py"):
                    with open(path, encoding="utf-8") as source:
                        if re.search(pattern, source.read()):
                            found.add(os.path.relpath(path, REPO))
    return found


def test_every_module_that_starts_processes_has_a_command_here():
    """A module of the package that starts processes (a pool, a Beam pipeline, a child)
    needs a row of POOL_COMMANDS (and its cases) or NOT_POOLS."""
    found = modules_matching(r"ProcessPoolExecutor|multiprocessing|subprocess\.|os\.fork|"
                             r"beam\.Pipeline\(|Popen|run_supervised\(")
    known = set(POOL_COMMANDS.values()) | set(NOT_POOLS)
    assert found - known == set(), "modules that start processes without a signal case"
    assert known - found == set(), "rows for modules that no longer start processes"
    assert {command for command, _, _ in CASES} == set(POOL_COMMANDS)
    assert DEFAULT <= set(CASES)
