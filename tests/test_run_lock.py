"""One run per output_dir: the lock, its stale-lock takeover, and two real runs."""

import os
import signal
import subprocess
import sys
import time

import pytest
import tensorflow as tf

from bert_tf.io import fileio
from harness import tiny_config, write_records, RUNNER_OVERRIDES

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def dead_pid():
    """The pid of a process that has ended."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_held_folder_is_refused_naming_the_process(tmp_path):
    with fileio.locked_folder(str(tmp_path)):
        assert (tmp_path / fileio.LOCK_FILE).read_text().split()[0] == str(os.getpid())
        with pytest.raises(ValueError, match=rf"output_dir {tmp_path} is in use by process "
                                             rf"{os.getpid()} on .*use another --output_dir"):
            with fileio.locked_folder(str(tmp_path)):
                pass
    assert not (tmp_path / fileio.LOCK_FILE).exists()  # released at the end


def test_a_stale_lock_is_taken_over_and_another_hosts_lock_is_respected(tmp_path, caplog):
    lock = tmp_path / fileio.LOCK_FILE
    lock.write_text(f"{dead_pid()} {os.uname().nodename}\n")
    with fileio.locked_folder(str(tmp_path)):
        assert lock.read_text().split()[0] == str(os.getpid())
    assert "which no longer runs" in caplog.text
    lock.write_text("1 some-other-host\n")  # its process cannot be checked from here
    with pytest.raises(ValueError, match="in use by process 1 on some-other-host"):
        with fileio.locked_folder(str(tmp_path)):
            pass


@pytest.mark.slow
def test_a_second_pretraining_run_on_the_same_output_dir_is_refused(tmp_path):
    # A run holds the folder; a second one started beside it stops at once with one
    # line. After the first is killed (SIGKILL leaves its lock), a rerun takes over.
    write_records(tmp_path / "records", 1, 64)
    config_path = tmp_path / "bert_config.json"
    tiny_config(num_hidden_layers=1, **RUNNER_OVERRIDES).to_json_file(str(config_path))
    out = tmp_path / "out"

    def command(steps):
        return [sys.executable, os.path.join(REPO, "run_pretraining.py"),
                f"--bert_config_file={config_path}",
                f"--input_file={tmp_path / 'records' / '*'}", f"--output_dir={out}",
                "--do_train", "--max_seq_length=16", "--max_predictions_per_seq=3",
                "--train_batch_size=8", f"--num_train_steps={steps}",
                "--num_warmup_steps=2", "--save_checkpoints_steps=10",
                "--iterations_per_loop=5"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    first = subprocess.Popen(command(100000), env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not tf.train.latest_checkpoint(str(out)):
            assert first.poll() is None, "the first run ended early"
            time.sleep(0.1)
        second = subprocess.run(command(20), env=env, capture_output=True, text=True,
                                timeout=120)
        assert second.returncode == 1
        assert second.stderr.strip().splitlines()[-1] == (
            f"bert-run-pretraining: error: output_dir {out} is in use by process {first.pid} on "
            f"{os.uname().nodename}: wait for that run to end, or use another --output_dir "
            f"(if it is not running, remove {out / fileio.LOCK_FILE})")
    finally:
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
    step = int(tf.train.latest_checkpoint(str(out)).rsplit("-", 1)[1])
    rerun = subprocess.run(command(step + 5), env=env, capture_output=True, text=True,
                           timeout=180)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert f"taking over the lock of process {first.pid}" in rerun.stderr
    assert not (out / fileio.LOCK_FILE).exists()
