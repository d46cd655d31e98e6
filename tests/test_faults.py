"""Faults: commands killed (SIGKILL) or stopped (SIGTERM, SIGINT) at random points,
then run again (slow tests, but for one SIGTERM run).

For each seed the command is killed after a random delay; what it left must not look
finished (no final output file without all of them), and a rerun must end with the
same outputs as an uninterrupted run, with no temporary file left behind. A training
runner sent SIGTERM or SIGINT while it trains saves a checkpoint at the step reached
and ends with one line; its rerun resumes from that step.
"""

import filecmp
import glob
import json
import os
import pathlib
import re
import signal
import stat
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.io import fileio
from bert_tf.models import BertClassifier
from data_prep import record_writing
from harness import (SPECIAL_TOKENS, tiny_config, tiny_model, write_released_checkpoint,
                     write_vocab)
import test_run_classifier
import test_run_pretraining
from test_run_classifier import tiny_model_files, write_sst2

REPO = pathlib.Path(__file__).resolve().parents[1]
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
SEEDS = (0, 1, 2)


def _run(command):
    completed = subprocess.run(command, cwd=REPO, env=ENV, capture_output=True, text=True,
                               timeout=600)
    assert completed.returncode == 0, completed.stderr[-2000:]
    return time.time()


def _kill_after(command, delay):
    """Starts `command`, SIGKILLs it after `delay` seconds (if still running)."""
    process = subprocess.Popen(command, cwd=REPO, env=ENV, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        process.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()


def _timed(command):
    started = time.time()
    return _run(command) - started


def _temporary_files(folder):
    return glob.glob(os.path.join(folder, "**", "*.tmp-*"), recursive=True)


def _stats(path):
    stats = json.loads(path.read_text())
    for varying in ("seconds", "instances_per_second", "output_files"):
        stats.pop(varying)
    return stats


@pytest.mark.slow
def test_create_pretraining_data_killed_then_rerun(tmp_path):
    vocab_file, _ = tiny_model_files(tmp_path)
    corpus = REPO / "demo" / "data" / "corpus.txt"

    def command(prefix):
        return [sys.executable, "-m", "data_prep.create_pretraining_data",
                f"--input_file={corpus}", f"--output_file={prefix}", f"--vocab_file={vocab_file}",
                "--max_seq_length=32", "--max_predictions_per_seq=5", "--dupe_factor=3",
                "--num_output_shards=3", "--random_seed=7"]

    reference = tmp_path / "reference" / "wiki.tfrecord"
    reference.parent.mkdir()
    seconds = _timed(command(reference))
    names = sorted(os.path.basename(p) for p in glob.glob(f"{reference}*"))
    assert len(names) == 4  # 3 shards + stats.json
    for seed in SEEDS:
        folder = tmp_path / f"killed_{seed}"
        folder.mkdir()
        _kill_after(command(folder / "wiki.tfrecord"),
                    np.random.default_rng(seed).uniform(0.4, 1.0) * seconds)
        left = sorted(os.path.basename(p) for p in glob.glob(f"{folder}/wiki.tfrecord*")
                      if ".tmp-" not in p)
        assert left in ([], names), f"seed {seed}: a partial output set {left}"
        _run(command(folder / "wiki.tfrecord"))
        assert not _temporary_files(folder), f"seed {seed}"
        for name in names:
            if name.endswith(".stats.json"):  # the same, but for timings and paths
                assert _stats(folder / name) == _stats(reference.parent / name)
            else:
                assert filecmp.cmp(folder / name, reference.parent / name, shallow=False), name


@pytest.mark.slow
def test_export_killed_then_rerun(tmp_path):
    words = ["good", "bad", "movie"]
    model = tiny_model(BertClassifier, tiny_config(), 3, num_classes=2)
    write_released_checkpoint(tmp_path / "model", model)
    write_vocab(tmp_path / "model" / "vocab.txt", SPECIAL_TOKENS + words, size=99)

    def command(export_dir):
        return [sys.executable, "export_model.py", "--model_type=classifier",
                f"--init_checkpoint={tmp_path / 'model'}", "--label_names=neg,pos",
                f"--export_dir={export_dir}", "--max_seq_length=16", "--overwrite"]

    seconds = _timed(command(tmp_path / "reference"))
    for seed in SEEDS:
        export_dir = tmp_path / f"killed_{seed}"
        _kill_after(command(export_dir), np.random.default_rng(seed).uniform(0.4, 1.0) * seconds)
        # Either nothing at export_dir, or a complete SavedModel.
        assert not export_dir.exists() or (export_dir / "saved_model.pb").exists()
        _run(command(export_dir))
        assert (export_dir / "saved_model.pb").exists()
        assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


@pytest.mark.slow
def test_run_classifier_killed_then_rerun(tmp_path):
    write_sst2(tmp_path / "data")
    vocab_file, config_file = tiny_model_files(tmp_path)

    def command(output_dir):
        return [sys.executable, "run_classifier.py", "--task_name=SST-2",
                f"--data_dir={tmp_path / 'data'}", f"--output_dir={output_dir}",
                f"--vocab_file={vocab_file}", f"--bert_config_file={config_file}",
                "--do_train", "--do_eval", "--max_seq_length=12", "--train_batch_size=16",
                "--learning_rate=2e-3", "--num_train_epochs=20", "--save_checkpoints_steps=8",
                "--steps_per_loop=4", "--seed=1", "--dropout_rate=0",
                "--allow_random_encoder"]

    seconds = _timed(command(tmp_path / "reference"))
    expected = (tmp_path / "reference" / "eval_results.txt").read_text().splitlines()
    for seed in SEEDS:
        output_dir = tmp_path / f"killed_{seed}"
        _kill_after(command(output_dir), np.random.default_rng(seed).uniform(0.4, 1.0) * seconds)
        assert not (output_dir / "eval_results.txt").exists() or \
            (output_dir / "eval_results.txt").read_text().splitlines() == expected
        _run(command(output_dir))
        results = (output_dir / "eval_results.txt").read_text().splitlines()
        assert [line for line in results if line.startswith("global_step")] == \
            [line for line in expected if line.startswith("global_step")]
        assert not _temporary_files(output_dir), f"seed {seed}"


def _fifo_with_reader(path):
    """A FIFO at `path` and a non-blocking reader's descriptor (writers do not block)."""
    os.mkfifo(path)
    return os.open(path, os.O_RDONLY | os.O_NONBLOCK)


def _drain(descriptor):
    chunks = []
    while True:
        try:
            chunk = os.read(descriptor, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.slow
def test_a_device_or_fifo_output_is_written_in_place_not_renamed_over(tmp_path):
    # --output_file=/dev/null: a rename would replace the device node with a regular
    # file. A FIFO stands in for the device here (the test must not touch /dev/null).
    text_fifo = tmp_path / "vocab_fifo"
    reader = _fifo_with_reader(text_fifo)
    fileio.write_text_atomic(str(text_fifo), "[PAD]\n[UNK]\n")
    assert stat.S_ISFIFO(os.stat(text_fifo).st_mode)
    assert _drain(reader) == b"[PAD]\n[UNK]\n"
    os.close(reader)
    records_fifo = tmp_path / "records_fifo"
    reader = _fifo_with_reader(records_fifo)
    with record_writing.ShardedWriter([str(records_fifo)]) as writer:
        writer.write_all([b"abc"])
        writer.commit()
    assert stat.S_ISFIFO(os.stat(records_fifo).st_mode)
    assert len(_drain(reader)) == 16 + 3  # one TFRecord frame: length, CRCs, data
    os.close(reader)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["records_fifo", "vocab_fifo"]


# Training runners stopped by a signal: each run trains NUM_STEPS steps in loops of 3.
NUM_STEPS = 300
STOPPED = re.compile(r"interrupted by (SIG\w+) at step (\d+); saved (\S+); rerun the same "
                     r"command to resume$")
PROGRESS = re.compile(r"\] step (\d+)/(\d+) \(")


def _training_command(command, tmp_path, output_dir):
    """A tiny run of `command` (its test module's data and model) of NUM_STEPS steps."""
    module = {"run_pretraining": test_run_pretraining,
              "run_classifier": test_run_classifier}[command]
    module.write_tiny_inputs(tmp_path)
    options = module.tiny_options(tmp_path)
    flags = [f"--{name}={getattr(options, name)}" for name in (
        "bert_config_file", "vocab_file", "task_name", "data_dir", "input_file",
        "max_seq_length", "max_predictions_per_seq", "train_batch_size", "learning_rate")
        if getattr(options, name, None)]
    if command == "run_pretraining":
        flags += [f"--num_train_steps={NUM_STEPS}", "--num_warmup_steps=2"]
    else:  # 64 examples in batches of 16: 4 steps an epoch
        flags += [f"--num_train_epochs={NUM_STEPS // 4}", "--allow_random_encoder"]
    return [sys.executable, f"{command}.py", "--do_train", f"--output_dir={output_dir}",
            "--save_checkpoints_steps=100", "--steps_per_loop=3", "--seed=1",
            "--progress_every_seconds=0.01", *flags]  # a progress line every call


def _signal_while_training(command, signal_number, at_step, log_path):
    """Runs `command`, sends it `signal_number` once its log shows step `at_step` or
    later; returns (exit status, its stderr, the last step it logged before the signal)."""
    with open(log_path, "w", encoding="utf-8") as log:
        process = subprocess.Popen(command, cwd=REPO, env=ENV, stdout=subprocess.DEVNULL,
                                   stderr=log)
    deadline, logged = time.time() + 300, 0
    while process.poll() is None and time.time() < deadline:
        steps = [int(m[0]) for m in PROGRESS.findall(log_path.read_text(encoding="utf-8"))]
        if steps and steps[-1] >= at_step:
            logged = steps[-1]
            os.kill(process.pid, signal_number)
            break
        time.sleep(0.02)
    if not logged:
        process.kill()
    process.wait(timeout=300)
    stderr = log_path.read_text(encoding="utf-8")
    assert logged, f"the run ended before step {at_step}: {stderr[-2000:]}"
    return process.returncode, stderr, logged


def _check_stopped(returncode, stderr, logged, signal_number, output_dir):
    """The step and checkpoint a stopped run reports, checked against what it saved."""
    assert "Traceback" not in stderr, stderr[-3000:]
    last_line = stderr.strip().splitlines()[-1]
    match = STOPPED.search(last_line)
    assert match, f"not a one-line stop message: {last_line}"
    name, step, path = match[1], int(match[2]), match[3]
    assert name == signal.Signals(signal_number).name
    assert returncode == 128 + signal_number
    assert logged <= step <= NUM_STEPS  # no step done before the signal is lost
    assert path == os.path.join(output_dir, f"ckpt-{step}")
    assert tf.train.latest_checkpoint(output_dir) == path
    reader = tf.train.load_checkpoint(path)
    assert int(reader.get_tensor("global_step/.ATTRIBUTES/VARIABLE_VALUE")) == step
    assert int(reader.get_tensor("optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE")) == step
    return step, path


@pytest.mark.parametrize("command, seed", [("run_pretraining", 0)] + [
    pytest.param(command, seed, marks=pytest.mark.slow)
    for command in ("run_pretraining", "run_classifier") for seed in SEEDS
    if (command, seed) != ("run_pretraining", 0)])
@pytest.mark.slow
def test_a_training_runner_stopped_by_a_signal_saves_then_resumes(tmp_path, command, seed):
    rng = np.random.default_rng(seed)
    signal_number = (signal.SIGTERM, signal.SIGINT)[seed % 2]
    output_dir = str(tmp_path / "out")
    run = _training_command(command, tmp_path, output_dir)
    stopped = _signal_while_training(run, signal_number,
                                     int(rng.integers(1, NUM_STEPS * 0.6)),
                                     tmp_path / "stopped.log")
    step, path = _check_stopped(*stopped, signal_number, output_dir)
    rerun = subprocess.run(run, cwd=REPO, env=ENV, capture_output=True, text=True,
                           timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert f"Resumed from {path}" in rerun.stderr
    steps = [int(m[0]) for m in PROGRESS.findall(rerun.stderr)]
    if step < NUM_STEPS:  # its first loop starts at the step saved
        assert f"Training from step {step}: " in rerun.stderr, rerun.stderr[-2000:]
        assert step < steps[0], steps[:3]  # (how far the first line comes is timing)
    assert re.search(rf"Training done: global_step {NUM_STEPS} of {NUM_STEPS} planned "
                     rf"\({NUM_STEPS - step} steps "
                     r"this run\)", rerun.stderr), rerun.stderr[-2000:]
    assert not glob.glob(os.path.join(output_dir, "*_temp*"))
