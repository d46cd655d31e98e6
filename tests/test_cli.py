"""The commands: help that lists their own flags, and user errors as one line."""

import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")


def _run(command, *args):
    return subprocess.run([*command, *args], cwd=REPO, env=ENV, capture_output=True,
                          text=True, timeout=300)


def test_console_script_help_lists_its_flags_and_keeps_the_example_lines():
    script = pathlib.Path(sys.executable).parent / "bert-run-squad"
    if not script.exists():
        pytest.skip(f"console scripts are not installed next to {sys.executable}")
    result = _run([str(script)], "--help")
    assert "--doc_stride" in result.stdout and "--learning_rate" in result.stdout
    assert "--[no]verbose" in result.stdout
    assert "bert-run-squad --vocab_file=uncased_L-12_H-768_A-12/vocab.txt \\\n" \
        in result.stdout


def test_user_error_is_one_line_and_verbose_shows_the_traceback(tmp_path):
    command = [sys.executable, "run_pretraining.py", "--do_train",
               f"--bert_config_file={tmp_path / 'missing.json'}",
               f"--input_file={tmp_path / 'x.tfrecord'}", f"--output_dir={tmp_path / 'out'}"]
    quiet = _run(command)
    assert quiet.returncode == 1
    assert quiet.stderr.strip().splitlines()[-1].startswith("run_pretraining: error: ")
    assert "missing.json" in quiet.stderr and "Traceback" not in quiet.stderr
    loud = _run(command, "--verbose")
    assert loud.returncode == 1 and "Traceback" in loud.stderr


def test_missing_required_flag_and_stray_argument_are_one_line():
    missing = _run([sys.executable, "-m", "bert_tf.cli.run_ner", "--do_train"])
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines()[-1] == \
        "run_ner: error: --output_dir is required"
    stray = _run([sys.executable, "run_classifier.py", "oops"])
    assert stray.stderr.strip().splitlines()[-1].startswith(
        "run_classifier: error: unexpected arguments ['oops']")


def test_successful_command_exits_zero_and_prints_nothing_on_stdout(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"the cat number {i} sat on the mat .\n" for i in range(50)))
    done = _run([sys.executable, "-m", "data_prep.build_vocab", f"--input_file={corpus}",
                 f"--output_file={tmp_path / 'vocab.txt'}", "--vocab_size=120",
                 "--num_unused=2", "--lower_thresh=1"])
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == "" and (tmp_path / "vocab.txt").exists()


SCRIPT = """
import errno, os, signal, sys
import tensorflow as tf
from absl import flags
from bert_tf import command_line, fileio
flags.FLAGS(["tool"])
case, path = sys.argv[1], sys.argv[2]

def run():
    if case == "data_loss":
        raise tf.errors.DataLossError(None, None, f"corrupted record in {path}\\n\\t [[op]]")
    if case == "disk_full":
        raise OSError(errno.ENOSPC, "No space left on device", path)
    if case == "ctrl_c":
        raise KeyboardInterrupt()
    with fileio.atomic_output(path) as temporary:
        with open(temporary, "w") as file:
            file.write("half")
        os.kill(os.getpid(), signal.SIGTERM)
        signal.pause()

command_line.run_reporting_user_errors("tool", run)
"""


@pytest.mark.parametrize("case, status, line", [
    ("data_loss", 1, "tool: error: corrupted record in {path}"),
    ("disk_full", 1, "tool: error: [Errno 28] No space left on device: '{path}'"),
    ("ctrl_c", 130, "tool: error: stopped by SIGINT (Ctrl-C)"),
    ("sigterm", 143, "tool: error: stopped by SIGTERM"),
])
def test_errors_outside_the_user_error_types_and_signals_are_one_line(tmp_path, case,
                                                                     status, line):
    path = tmp_path / "out.txt"
    result = _run([sys.executable, "-c", SCRIPT, case, str(path)])
    assert result.returncode == status, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == line.format(path=path)
    assert not list(tmp_path.iterdir())  # the unfinished output was removed
