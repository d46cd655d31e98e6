"""The commands: help that lists their own flags, and user errors as one line."""

import importlib
import importlib.metadata
import importlib.util
import os
import pathlib
import socket
import subprocess
import sys
import time

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
    assert quiet.stderr.strip().splitlines()[-1].startswith("bert-run-pretraining: error: ")
    assert "missing.json" in quiet.stderr and "Traceback" not in quiet.stderr
    loud = _run(command, "--verbose")
    assert loud.returncode == 1 and "Traceback" in loud.stderr


def test_missing_required_flag_and_stray_argument_are_one_line():
    missing = _run([sys.executable, "-m", "bert_tf.cli.run_ner", "--do_train"])
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines()[-1] == \
        "bert-run-ner: error: --output_dir is required"
    stray = _run([sys.executable, "run_classifier.py", "oops"])
    assert stray.stderr.strip().splitlines()[-1].startswith(
        "bert-run-classifier: error: unexpected arguments ['oops']")


def test_every_command_names_itself_in_errors_by_its_console_script():
    """`bert-run-ner: error: ...`, as the docs show, however the command was started
    (console script, `python -m`, root script)."""
    from bert_tf.commands import command_line  # pylint: disable=import-outside-toplevel
    scripts = {entry.value.split(":")[0]: entry.name for entry in
               importlib.metadata.entry_points(group="console_scripts")
               if entry.value.startswith(("bert_tf.", "data_prep."))}
    assert "bert_tf.cli.run_ner" in scripts, "bert_tf is not installed (pip install -e .)"
    for module_name, script in scripts.items():
        if "beam" in module_name:  # they name themselves (data_prep.beam_pipeline)
            continue
        module = importlib.import_module(module_name)
        assert command_line._program(module) == script, module_name


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
from bert_tf.commands import command_line
from bert_tf.io import fileio
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
@pytest.mark.slow
def test_errors_outside_the_user_error_types_and_signals_are_one_line(tmp_path, case,
                                                                     status, line):
    path = tmp_path / "out.txt"
    result = _run([sys.executable, "-c", SCRIPT, case, str(path)])
    assert result.returncode == status, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == line.format(path=path)
    assert not list(tmp_path.iterdir())  # the unfinished output was removed


# Every command's entry: (root script or module, what it is run as).
COMMANDS = [[sys.executable, script] for script in (
    "run_pretraining.py", "run_classifier.py", "run_squad.py", "run_ner.py",
    "run_multiple_choice.py", "extract_features.py", "export_model.py",
    "create_pretraining_data.py")] + [
    [sys.executable, "-m", f"bert_tf.cli.{name}"] for name in ("train", "encode", "search")]

# Runs a command's --help in this process and says whether TensorFlow was imported (any
# of its packages, as a module of its own: nothing stands in for them).
HELP_PROBE = """
import runpy, sys
sys.argv = [sys.argv[1], "--help"]
try:
    if sys.argv[0].endswith(".py"):
        runpy.run_path(sys.argv[0], run_name="__main__")
    else:
        runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
except SystemExit as done:
    status = done.code
imported = [name for name in ("tensorflow", "keras", "tensorflow_text")
            if name in sys.modules]
print("TENSORFLOW IMPORTED" if imported else "no tensorflow")
sys.exit(status)
"""
def test_every_command_is_listed_here():
    cli = {path.stem for path in (REPO / "bert_tf" / "cli").glob("*.py")} - {
        "__init__"}
    root = {path.name for path in REPO.glob("*.py")} - {"setup.py"}
    listed = {command[-1] for command in COMMANDS}
    assert root <= listed, root - listed
    assert {name for name in cli if f"{name}.py" not in root} <= {
        command[-1].rsplit(".", 1)[-1] for command in COMMANDS}


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: command[-1])
def test_help_exits_zero_without_tensorflow_and_groups_flags_with_defaults(command):
    target = command[-1]
    probe = subprocess.run([sys.executable, "-c", HELP_PROBE, target], cwd=REPO,
                           env=dict(os.environ), capture_output=True, text=True,
                           timeout=120)
    assert probe.returncode == 0, probe.stderr[-2000:]
    lines = probe.stdout.splitlines()
    assert lines[-1] == "no tensorflow", lines[-1]
    if target in ("bert_tf.cli.train", "bert_tf.cli.search"):  # no --task: the tasks
        assert "Tasks:" in lines and "  squad: " in probe.stdout
        return
    flag_lines = [line for line in lines if line.startswith("  --")]
    assert len(flag_lines) >= 5
    assert all("(default: " in line or line.endswith("(required)") for line in flag_lines)
    assert any(line.endswith("):") and "(" in line for line in lines)  # groups
    assert probe.stderr == ""


def _console_scripts():
    """(script, module) of every installed console script of bert_tf and data_prep."""
    return sorted((entry.name, entry.value.split(":")[0]) for entry in
                  importlib.metadata.entry_points(group="console_scripts")
                  if entry.value.startswith(("bert_tf.", "data_prep.")))


# Calls a console script's run_main() with --help, as its generated wrapper does, and
# lists the TensorFlow packages imported meanwhile.
SCRIPT_HELP_PROBE = """
import importlib, sys
module_name, script = sys.argv[1:]
sys.argv = [script, "--help"]
status = None
try:
    importlib.import_module(module_name).run_main()
except SystemExit as done:
    status = done.code
print([name for name in ("tensorflow", "keras", "tensorflow_text") if name in sys.modules])
sys.exit(status)
"""


@pytest.mark.parametrize("script, module_name", _console_scripts() or [("none", "none")])
def test_every_console_script_help_imports_no_tensorflow(script, module_name):
    """`--help` runs on the options classes themselves: no TensorFlow, Keras or
    tensorflow-text is imported."""
    if script == "none":
        pytest.skip("bert_tf is not installed (pip install -e .)")
    if "beam" in module_name and importlib.util.find_spec("apache_beam") is None:
        pytest.skip("the beam extra is not installed")
    probe = subprocess.run([sys.executable, "-c", SCRIPT_HELP_PROBE, module_name, script],
                           cwd=REPO, env=dict(os.environ), capture_output=True, text=True,
                           timeout=120)
    assert probe.returncode == 0, probe.stderr[-2000:]
    assert "--help" in probe.stdout or "Flags are written" in probe.stdout or \
        "Tasks:" in probe.stdout, probe.stdout[-2000:]
    imported = probe.stdout.splitlines()[-1]
    assert imported == "[]", f"{script} --help imported {imported}"


def test_help_is_quick_and_choices_are_not_cut_mid_word():
    started = time.monotonic()
    done = _run([sys.executable, "-m", "bert_tf.cli.train", "--task=squad", "--help"])
    seconds = time.monotonic() - started
    assert done.returncode == 0 and seconds < 5.0, (seconds, done.stderr[-1000:])
    for choice in ("multiple_choice", "sentence_embeddings", "google_research"):
        assert choice in done.stdout, choice
    assert "--seed (default: unset)\n      Random seed" in done.stdout
    assert "Unset: a new random start each run" in " ".join(done.stdout.split())
    assert "--output_dir (required)" in done.stdout


def test_start_up_shows_no_tensorflow_lines_unless_asked(tmp_path):
    command = [sys.executable, "run_classifier.py", "--task_name=mrpc", "--do_train",
               f"--data_dir={tmp_path / 'none'}", f"--output_dir={tmp_path / 'out'}"]
    env = {key: value for key, value in os.environ.items()
           if key != "TF_CPP_MIN_LOG_LEVEL"}
    quiet = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True,
                           timeout=300)
    assert quiet.returncode == 1
    assert quiet.stderr.splitlines() == [
        f"bert-run-classifier: error: task mrpc: the train file was expected at "
        f"{tmp_path / 'none' / 'train.tsv'} (not found)"]
    asked = subprocess.run(command + ["--verbosity=1"], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=300)
    assert len(asked.stderr.splitlines()) > 1  # TensorFlow's own lines, as it prints them


def test_tensorflow_lines_are_told_from_ours():
    from bert_tf.commands import startup
    text = ("WARNING: All log messages before absl::InitializeLog() is called are written "
            "to STDERR\n"
            "I0000 00:00:1795772945.716176   26561 port.cc:153] oneDNN custom operations\n"
            "I0000 00:00:1795772946.1   26561 cpu_feature_guard.cc:227] This TensorFlow "
            "binary is optimized\n"
            "To enable the following instructions: AVX2 FMA, in other operations, rebuild\n"
            "E0000 00:00:1795772948.135688   26561 cuda_platform.cc:52] failed call to "
            "cuInit\n"
            "a warning of ours\n")
    assert startup.drop_tensorflow_lines(text) == "a warning of ours\n"
    assert startup.wants_tensorflow_lines(["x", "--verbosity=1"], {})
    assert startup.wants_tensorflow_lines(["x"], {"TF_CPP_MIN_LOG_LEVEL": "0"})
    assert not startup.wants_tensorflow_lines(["x", "--verbosity", "0"], {})


def test_create_pretraining_data_root_script_writes_records(tmp_path):
    """The original keeps create_pretraining_data.py at its root: so do we."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"the cat number {i} sat on the mat .\nit was warm .\n\n"
                              for i in range(20)))
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat",
                                "number", "sat", "on", "mat", ".", "it", "was", "warm"]
                               + [str(i) for i in range(20)]) + "\n")
    output = tmp_path / "out.tfrecord"
    done = _run([sys.executable, "create_pretraining_data.py", f"--input_file={corpus}",
                 f"--output_file={output}", f"--vocab_file={vocab}", "--max_seq_length=32",
                 "--max_predictions_per_seq=5", "--dupe_factor=1"])
    assert done.returncode == 0, done.stderr[-2000:]
    assert output.exists() and output.stat().st_size > 0


def two_worker_tf_config():
    """TF_CONFIG of worker 0 of a two-worker cluster on free localhost ports (the
    supervisor's signal cases, tests/test_signals.py, run worker 0 alone)."""
    ports = []
    for _ in range(2):
        with socket.socket() as probe:
            probe.bind(("localhost", 0))
            ports.append(probe.getsockname()[1])
    return ('{"cluster": {"worker": ["localhost:%d", "localhost:%d"]}, '
            '"task": {"type": "worker", "index": 0}}' % tuple(ports))


def test_an_eval_run_reads_a_run_folder_written_before_newer_options(tmp_path):
    """A run folder's config.json from before an option existed (progress_every_seconds)
    still gives an evaluation run its options; another command's run gives none."""
    import json
    from absl import flags
    from bert_tf.commands import command_line
    from bert_tf import options as options_lib
    from bert_tf.tasks.classification.options import ClassifierOptions
    from bert_tf.tasks.ner.options import NerOptions
    saved = options_lib.options_to_dict(ClassifierOptions(
        task_name="mrpc", data_dir="glue/MRPC", max_seq_length=96))
    del saved["progress_every_seconds"]
    (tmp_path / "config.json").write_text(json.dumps({"options": saved}))

    def parsed(options_class):
        flag_values = flags.FlagValues()
        command_line.define_flags(options_class, "test_cli", flag_values)
        flag_values(["prog", f"--output_dir={tmp_path}", "--do_eval"])
        return command_line.options_from_flags(options_class, flag_values)
    options = parsed(ClassifierOptions)
    assert (options.task_name, options.data_dir, options.max_seq_length,
            options.progress_every_seconds) == ("mrpc", "glue/MRPC", 96, 30.0)
    assert parsed(NerOptions).max_seq_length == NerOptions().max_seq_length
