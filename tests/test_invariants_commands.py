"""Issue 38, invariant 6 for the data tools: every failure that is not a bug ends in one
line (`<command>: error: ...`, no traceback) and exit status 1, and leaves no output.

The cases are the bad inputs of invariants 1-3 and of the trial's findings, each run as
a command (the data tools import no TensorFlow, so a case takes about a second).
"""

import os
import pathlib
import subprocess
import sys

import pytest

import harness

REPO = pathlib.Path(__file__).resolve().parents[1]
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
CORPUS = "the cat sat on the mat .\na dog sat .\n\nthe dog sat on a cat .\nthe mat .\n"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("commands")
    (folder / "corpus.txt").write_text(CORPUS, encoding="utf-8")
    (folder / "binary.txt").write_bytes(b"\x7fELF\x02\x01\x01" + bytes(range(256)) * 8)
    (folder / "latin1.txt").write_bytes("caf\xe9 cr\xe8me\n".encode("latin-1") * 30)
    harness.write_vocab(folder / "vocab.txt", harness.SPECIAL_TOKENS + [
        "the", "cat", "sat", "on", "mat", ".", "a", "dog"])
    return folder


def _cases(d):
    """(module, arguments, the words of its one line) of each bad input."""
    cpd = ["data_prep.create_pretraining_data", f"--vocab_file={d}/vocab.txt",
           "--max_seq_length=16", "--max_predictions_per_seq=2"]
    return [
        (cpd + [f"--input_file={d}/corpus.txt", f"--output_file={d}/corpus.txt"],
         "an output never replaces an input"),
        (cpd + [f"--input_file={d}/corpus.txt", f"--output_file={d}/vocab.txt"],
         "an output never replaces an input"),
        (cpd + [f"--input_file={d}/corpus.txt", f"--output_file={d}/o,{d}/o"],
         "are one file"),
        (cpd + [f"--input_file={d}/binary.txt", f"--output_file={d}/o"],
         "binary.txt: not a text file: it holds an executable"),
        (cpd + [f"--input_file={d}/latin1.txt", f"--output_file={d}/o"],
         "text in another encoding than UTF-8"),
        (cpd + [f"--input_file={d}/none-*.txt", f"--output_file={d}/o"],
         "pattern " + f"{d}/none-*.txt matches no file"),
        (cpd + [f"--input_file={d}/corpus.txt", f"--output_file={d}/o",
                "--num_output_shards=500"], "would be empty"),
        (["data_prep.build_vocab", f"--input_file={d}/corpus.txt",
          f"--output_file={d}/corpus.txt"], "an output never replaces an input"),
        (["data_prep.build_vocab", f"--input_file={d}/binary.txt", f"--output_file={d}/v"],
         "not a text file"),
        (["data_prep.build_vocab", f"--input_file={d}", f"--output_file={d}/v"],
         "is a folder"),
    ]


@pytest.mark.slow
def test_every_bad_input_ends_in_one_line_and_leaves_nothing(files):
    before = sorted(p.name for p in files.iterdir())
    contents = {p.name: p.read_bytes() for p in files.iterdir()}
    failures = []
    for args, words in _cases(files):
        result = subprocess.run([sys.executable, "-m", *args], cwd=REPO, env=ENV,
                                capture_output=True, text=True, timeout=300)
        lines = [line for line in result.stderr.splitlines() if ": error: " in line]
        if (result.returncode != 1 or "Traceback" in result.stderr or len(lines) != 1
                or words not in lines[0]):
            failures.append((args, result.returncode, result.stderr[-400:]))
    assert not failures, failures
    assert sorted(p.name for p in files.iterdir()) == before
    assert {p.name: p.read_bytes() for p in files.iterdir()} == contents


def _runner_cases(d):
    """(command, arguments) of every command of tests/test_cli.COMMANDS, each pointed at
    files that do not exist (all named `absent...`)."""
    a = f"{d}/absent"
    out = f"{d}/out"
    common = [f"--output_dir={out}", f"--vocab_file={a}.txt", f"--bert_config_file={a}.json"]
    return {
        "run_pretraining.py": [f"--input_file={a}.tfrecord", "--do_train", *common],
        "run_classifier.py": ["--task_name=mrpc", f"--data_dir={a}", "--do_train", *common],
        "run_squad.py": [f"--train_file={a}.json", "--do_train", *common],
        "run_ner.py": [f"--data_dir={a}", "--do_train", *common],
        "run_multiple_choice.py": [f"--data_dir={a}", "--do_train", *common],
        "extract_features.py": [f"--input_file={a}.txt", f"--output_file={out}.jsonl",
                                f"--vocab_file={a}.txt", f"--bert_config_file={a}.json",
                                f"--init_checkpoint={a}"],
        "export_model.py": [f"--init_checkpoint={a}", f"--export_dir={out}"],
        "create_pretraining_data.py": [f"--input_file={a}.txt", f"--output_file={out}",
                                       f"--vocab_file={a}.txt"],
        "bert_tf.cli.train": ["--task=ner", f"--data_dir={a}", "--do_train", *common],
        "bert_tf.cli.encode": [f"--init_checkpoint={a}", f"--input_file={a}.txt",
                               f"--output_file={out}.npy"],
    }


@pytest.mark.slow
def test_every_command_given_missing_files_ends_in_one_line_naming_one(tmp_path):
    # Invariant 6 over every command (the table of test_cli, so a new command fails
    # here until it has a case): exit status 1, one `error:` line naming an absent
    # file, no traceback, nothing written.
    from test_cli import COMMANDS  # pylint: disable=import-outside-toplevel
    cases = _runner_cases(tmp_path)
    assert {command[-1] for command in COMMANDS} == set(cases)
    running = [(target, subprocess.Popen(
        [sys.executable, *(["-m"] if not target.endswith(".py") else []), target, *args],
        cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        for target, args in cases.items()]
    failures = []
    for target, process in running:
        _, stderr = process.communicate(timeout=300)
        lines = [line for line in stderr.splitlines() if "error: " in line]
        if (process.returncode != 1 or "Traceback" in stderr or len(lines) != 1
                or "absent" not in lines[0]):
            failures.append((target, process.returncode, stderr[-600:]))
    assert not failures, failures
    assert sorted(path.name for path in tmp_path.iterdir()) == []
