"""The one place that installs the commands' SIGINT / SIGTERM handlers
(`bert_tf.process.signals`) and what a stop does to worker processes that a library
runs (`data_prep.process_lifetime.end_all_workers`); the commands themselves are
tests/test_signals.py's."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

import test_signals
from bert_tf.process import signals
from test_create_pretraining_data import proc_stat

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_a_stop_signal_runs_the_stop_actions_newest_first_then_raises():
    calls = []
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(signals.Terminated):
        with signals.on_stop(lambda: calls.append("outer")), \
                signals.on_stop(lambda: calls.append("inner")), \
                signals.signals_raise():
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):
                pass
    assert calls == ["inner", "outer"]
    assert signal.getsignal(signal.SIGTERM) == before  # handlers and actions restored
    assert signals._STOP_ACTIONS == []  # pylint: disable=protected-access


def test_a_failing_stop_action_is_one_line_and_the_stop_goes_on(capsys):
    def broken():
        raise OSError("no such process")
    with pytest.raises(KeyboardInterrupt):
        with signals.on_stop(broken), signals.signals_raise():
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):
                pass
    assert capsys.readouterr().err == "while stopping: broken failed: no such process\n"


@pytest.mark.parametrize("forget", [True, False])
def test_ctrl_c_through_an_exec_of_a_string_exits_with_the_status_asked_for(
        tmp_path, forget):
    """CPython remembers a KeyboardInterrupt that left an exec() of a string, and a
    `python -m` program then kills itself by SIGINT at exit (-2) instead of exiting
    with 130; `forget_interrupt` makes it 130 (a Beam tool stopped while building its
    pipeline ended -2 in 2 runs of 9, 0 of 10 with it)."""
    (tmp_path / "interrupted.py").write_text(textwrap.dedent(f"""
        import os, signal, sys
        from bert_tf.process import signals
        try:
            with signals.signals_raise():
                exec("os.kill(os.getpid(), signal.SIGINT)\\nfor _ in range(10**6): pass")
        except KeyboardInterrupt:
            if {forget}:
                signals.forget_interrupt()
            sys.exit(130)
    """))
    done = subprocess.run([sys.executable, "-m", "interrupted"], cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=REPO), timeout=60, check=False)
    assert done.returncode == (130 if forget else -signal.SIGINT)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_end_all_workers_kills_every_process_below_and_keeps_their_waiters_quiet():
    """As the DirectRunner runs its workers: `sh -c python ...` per worker, and a
    thread that waits for each and raises when it ends by a signal."""
    script = textwrap.dedent("""
        import subprocess, sys, threading, time
        from data_prep import process_lifetime

        def run_worker():
            worker = subprocess.Popen("sleep 60; true", shell=True)
            if worker.wait():
                raise RuntimeError("Worker subprocess exited with return code %s"
                                   % worker.returncode)
        threads = [threading.Thread(target=run_worker) for _ in range(2)]
        for thread in threads:
            thread.start()
        while len(process_lifetime.descendants(os.getpid())) < 4:
            time.sleep(0.05)
        print(*process_lifetime.descendants(os.getpid()), flush=True)
        process_lifetime.end_all_workers()
        for thread in threads:
            thread.join(10)
        print(process_lifetime.descendants(os.getpid()), flush=True)
    """)
    done = subprocess.run([sys.executable, "-c", "import os\n" + script], cwd=REPO,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    workers, left = done.stdout.splitlines()
    assert len(workers.split()) == 4  # two shells, two sleeps
    assert left == "[]"
    assert [pid for pid in map(int, workers.split()) if proc_stat(pid)] == []
    assert "Traceback" not in done.stderr and "RuntimeError" not in done.stderr


def test_the_commands_signal_handlers_are_installed_in_one_place():
    """Only bert_tf.process.signals calls signal.signal in the package and the data
    tools: the training loop's checkpointing stop (bert_tf.train.preemption), the
    multi-worker supervisor and pool workers (process_lifetime) install theirs through
    it."""
    allowed = {"bert_tf/process/signals.py"}
    found = test_signals.modules_matching(r"signal\.signal\(")
    assert found <= allowed, sorted(found - allowed)
