"""A plain install (no extra) runs every command: optional packages are imported only
where their feature runs (`bert_tf.extras`), and a missing one ends that feature alone,
in one line naming the extra to install.

The commands run in subprocesses whose import system refuses every optional package
(a `sitecustomize` on PYTHONPATH), as on a machine that never installed them, whatever
this environment holds."""

import ast
import importlib.metadata
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import harness
import test_run_classifier
import test_run_multiple_choice
import test_run_ner
import test_run_pretraining
import test_run_squad
import test_sentence_embeddings
from bert_tf import extras
from bert_tf import options as options_lib
from bert_tf.models import BertEncoder

REPO = pathlib.Path(__file__).resolve().parents[1]
BIN = pathlib.Path(sys.executable).parent
# Refuses the optional packages before any other finder looks for them.
SITECUSTOMIZE = """
import importlib.abc, sys
HIDDEN = {hidden!r}
class _NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, _NotInstalled())
"""
# The Beam pipeline's own modules: they are the `beam` feature, imported by the two Beam
# commands only once apache_beam has imported.
BEAM_MODULES = {"data_prep.beam_chunks", "data_prep.beam_inputs"}
WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "to", "house", "red", "blue",
         "good", "bad", "film", ".", "mountain", "##side"]
TEXTS = ["the cat sat on the mat .", "a dog ran to the red house .",
         "the blue house is good .", "a bad film ."]


@pytest.fixture(scope="module")
def plain_env(tmp_path_factory):
    """The environment of a subprocess that cannot import any optional package."""
    folder = tmp_path_factory.mktemp("plain_site")
    (folder / "sitecustomize.py").write_text(
        SITECUSTOMIZE.format(hidden=sorted(extras.EXTRA_OF)))
    path = os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))
    return dict(os.environ, PYTHONPATH=path, TF_CPP_MIN_LOG_LEVEL="3")


def _run(args, env, cwd=REPO):
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def _console_scripts():
    """{script name: "module:function"} of the installed package (setup.py's list)."""
    try:
        points = importlib.metadata.distribution("bert_tf").entry_points
    except importlib.metadata.PackageNotFoundError:
        return {}
    return {point.name: point.value for point in points if point.group == "console_scripts"}


SCRIPTS = _console_scripts()
ROOT_SCRIPTS = sorted(path.name for path in REPO.glob("*.py") if path.name != "setup.py")


def _script(name):
    path = BIN / name
    if not path.exists():
        pytest.skip(f"console scripts are not installed next to {sys.executable}")
    return str(path)


def test_every_extra_of_setup_py_is_in_the_table():
    tree = ast.parse((REPO / "setup.py").read_text(encoding="utf-8"))
    declared = next(keyword.value for node in ast.walk(tree) if isinstance(node, ast.Call)
                    for keyword in node.keywords if keyword.arg == "extras_require")
    names = {ast.literal_eval(key) for key in declared.keys}
    assert set(extras.EXTRA_OF.values()) == names - {"test"}


def test_a_missing_package_is_named_with_its_extra_and_other_errors_pass(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx now fails
    monkeypatch.setitem(sys.modules, "onnx.helper", None)  # also after a test imported it
    with pytest.raises(extras.MissingExtra, match=r"^--export_format=onnx needs onnx, which "
                       r"is not installed: install the onnx extra \(`pip install "
                       r"bert_tf\[onnx\]`, or `pip install -e \.\[onnx\]` in a checkout\)$"):
        extras.require("onnx.helper", "--export_format=onnx")
    with pytest.raises(ValueError, match=r"module='numpy': expected a module of an "
                                         r"optional package"):
        extras.missing("numpy", "x")


def test_the_hidden_packages_cannot_be_imported(plain_env):
    probe = ("import importlib, sys\nfor name in sys.argv[1:]:\n    try:\n"
             "        importlib.import_module(name)\n        print('imported', name)\n"
             "    except ModuleNotFoundError as error:\n        assert error.name == name\n")
    done = _run([sys.executable, "-c", probe, *extras.EXTRA_OF], plain_env)
    assert done.returncode == 0 and done.stdout == "", done.stdout + done.stderr[-2000:]


def _modules():
    """Every module of the library and the data tools, dotted."""
    names = []
    for package in ("bert_tf", "data_prep"):
        for path in sorted((REPO / package).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


IMPORT_ALL = """
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps(sorted(name for name in sys.modules if name.split(".")[0] in {optional})))
"""


def test_every_module_imports_without_the_extras_and_none_imports_them(plain_env):
    # Hidden: each module imports (the Beam pipeline's own modules are the beam feature).
    # Installed or not: importing every module of the commands loads no optional package
    # (only the Beam commands' modules load apache_beam, which is their feature).
    script = IMPORT_ALL.format(optional=sorted(extras.EXTRA_OF))
    modules = [name for name in _modules() if name not in BEAM_MODULES]
    hidden = _run([sys.executable, "-c", script, *modules], plain_env)
    assert hidden.returncode == 0, hidden.stderr[-3000:]
    assert json.loads(hidden.stdout.splitlines()[-1]) == []
    beam_commands = {"data_prep.beam_pipeline", "data_prep.beam_vocab"}
    installed = _run([sys.executable, "-c", script,
                      *[name for name in modules if name not in beam_commands]],
                     dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert installed.returncode == 0, installed.stderr[-3000:]
    assert json.loads(installed.stdout.splitlines()[-1]) == []


@pytest.mark.parametrize("name", sorted(SCRIPTS) + ROOT_SCRIPTS)
def test_help_of_every_command_without_the_extras(name, plain_env):
    command = [sys.executable, name] if name.endswith(".py") else [_script(name)]
    done = _run([*command, "--help"], plain_env)
    # The help alone, quietly: nothing on stderr (no TensorFlow start-up lines).
    assert (done.returncode, done.stderr) == (0, ""), done.stderr[-2000:]
    assert "  --" in done.stdout


# ------------------------------------------------------------ one real run of each
@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """A tiny released checkpoint folder (bert_config.json, vocab.txt, bert_model.ckpt)
    and a text file of TEXTS beside it."""
    folder = tmp_path_factory.mktemp("released")
    config = harness.tiny_config()
    model = harness.tiny_model(BertEncoder, config, seed=3)
    vocab = harness.SPECIAL_TOKENS + WORDS
    vocab += [f"[unused{i}]" for i in range(config.vocab_size - len(vocab))]
    harness.write_released_checkpoint(str(folder / "model"), model, vocab)
    (folder / "texts.txt").write_text("\n".join(TEXTS * 3) + "\n")
    # A corpus of documents (blank lines between), where "mountainside" is often split.
    (folder / "corpus.txt").write_text("".join(
        f"{TEXTS[i % 4]} the mountainside {i} .\n{TEXTS[(i + 1) % 4]}\n\n" for i in range(40)))
    return folder


# Runner commands: the tiny run of each task's tests, given as --config.
TASK_RUNS = {"bert-run-classifier": test_run_classifier,
             "bert-run-ner": test_run_ner,
             "bert-run-squad": test_run_squad,
             "bert-run-multiple-choice": test_run_multiple_choice,
             "bert-run-pretraining": test_run_pretraining,
             "bert-train": test_sentence_embeddings}


def _task_run(module, tmp_path):
    """(arguments, output_dir) of `module`'s tiny run of its task as a --config file."""
    module.write_tiny_inputs(tmp_path)
    options = module.tiny_options(tmp_path)
    config = tmp_path / "run_config.json"
    config.write_text(json.dumps(options_lib.options_to_dict(options)))
    return [f"--config={config}"], pathlib.Path(options.output_dir)


def _arguments(name, folder, out):
    """The arguments of a small real run of command `name`, on `folder` (`released`)."""
    model = folder / "model"
    return {
        "bert-build-vocab": [f"--input_file={folder / 'corpus.txt'}",
                             f"--output_file={out / 'vocab.txt'}", "--vocab_size=120",
                             "--num_unused=2", "--lower_thresh=1"],
        "bert-create-pretraining-data": [
            f"--input_file={folder / 'corpus.txt'}", f"--output_file={out / 'a.tfrecord'}",
            f"--vocab_file={model / 'vocab.txt'}", "--max_seq_length=16",
            "--max_predictions_per_seq=3", "--dupe_factor=1"],
        "bert-extend-vocab": [f"--input_file={folder / 'corpus.txt'}",
                              f"--init_checkpoint={model}", f"--output_dir={out}",
                              "--min_frequency=2"],
        "bert-extract-features": [f"--input_file={folder / 'texts.txt'}",
                                  f"--output_file={out / 'features.jsonl'}",
                                  "--layers=-1,-2",
                                  f"--init_checkpoint={model}", "--max_seq_length=16"],
        "bert-encode": [f"--input_file={folder / 'texts.txt'}", f"--init_checkpoint={model}",
                        f"--output_file={out / 'vectors.npy'}", "--max_seq_length=16"],
        "bert-export-model": [f"--init_checkpoint={model}", "--model_type=encoder",
                              f"--export_dir={out / 'saved_model'}", "--max_seq_length=16"],
    }[name]


def _check_outputs(name, out):
    """What a run of `name` wrote into `out`, read back."""
    if name == "bert-build-vocab":
        assert len((out / "vocab.txt").read_text().splitlines()) == 120
    elif name == "bert-create-pretraining-data":
        assert (out / "a.tfrecord").stat().st_size > 0
    elif name == "bert-extend-vocab":
        assert "mountainside" in (out / "vocab.txt").read_text().split()
    elif name == "bert-extract-features":
        assert len((out / "features.jsonl").read_text().splitlines()) == 12
    elif name == "bert-encode":
        assert np.load(out / "vectors.npy").shape == (12, 32)
    elif name == "bert-export-model":
        assert (out / "saved_model" / "saved_model.pb").is_file()


BEAM_COMMANDS = {"bert-create-pretraining-data-beam", "bert-build-vocab-beam"}
REAL_RUNS = sorted(set(TASK_RUNS) | {
    "bert-build-vocab", "bert-create-pretraining-data", "bert-extend-vocab",
    "bert-extract-features", "bert-encode", "bert-export-model"})


# Commands that are an optional feature as a whole: without their extra, one line.
EXTRA_COMMANDS = {"bert-search": ("optuna", "search")}


def test_every_console_script_has_a_run_here():
    if not SCRIPTS:
        pytest.skip("bert_tf is not installed (pip install -e .)")
    assert set(SCRIPTS) == set(REAL_RUNS) | BEAM_COMMANDS | set(EXTRA_COMMANDS)


# The multiple-choice run (a minute on 2 cores) is in the slow set; its console script
# imports the same modules as the other runners'.
@pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.slow) if name == "bert-run-multiple-choice"
    else name for name in REAL_RUNS])
def test_one_real_run_of_every_command_without_the_extras(name, released, plain_env,
                                                         tmp_path):
    if name in TASK_RUNS:
        arguments, out = _task_run(TASK_RUNS[name], tmp_path)
        if name == "bert-train":
            arguments.append("--task=sentence_embeddings")
    else:
        out = tmp_path / "out"
        out.mkdir()
        arguments = _arguments(name, released, out)
    done = _run([_script(name), *arguments], plain_env)
    assert done.returncode == 0, done.stderr[-3000:]
    if name in TASK_RUNS:
        assert json.loads((out / "config.json").read_text())["options"]
    else:
        _check_outputs(name, out)


@pytest.mark.parametrize("name", sorted(BEAM_COMMANDS))
def test_a_beam_command_without_beam_names_the_extra(name, released, plain_env, tmp_path):
    output = "vocab.txt" if "vocab" in name else "a.tfrecord"
    arguments = [f"--input_file={released / 'corpus.txt'}",
                 f"--output_file={tmp_path / output}"]
    if "vocab" not in name:
        arguments.append(f"--vocab_file={released / 'model' / 'vocab.txt'}")
    done = _run([_script(name), *arguments], plain_env)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1] == (
        f"{name}: error: this command needs apache_beam, which is not installed: "
        f"{extras.install_hint('beam')}")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("export_format, package, extra", [
    ("onnx", "tf2onnx", "onnx"), ("keras_hub", "keras_hub", "keras-hub")])
def test_an_export_format_without_its_extra_is_one_line_before_any_work(
        export_format, package, extra, released, plain_env, tmp_path):
    done = _run([_script("bert-export-model"), f"--init_checkpoint={released / 'model'}",
                 "--model_type=encoder", f"--export_format={export_format}",
                 f"--export_dir={tmp_path / 'out'}"], plain_env)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1] == (
        f"bert-export-model: error: --export_format={export_format} needs {package}, which is "
        f"not installed: {extras.install_hint(extra)}")
    assert list(tmp_path.iterdir()) == []


def test_a_search_without_optuna_names_the_extra_before_any_work(plain_env, tmp_path):
    arguments, out = _task_run(test_run_classifier, tmp_path)
    space = tmp_path / "space.json"
    space.write_text('{"learning_rate": {"low": 1e-5, "high": 1e-4, "log": true}}')
    done = _run([_script("bert-search"), "--task=classification", *arguments,
                 f"--search={space}", "--do_eval"], plain_env)
    package, extra = EXTRA_COMMANDS["bert-search"]
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1] == (
        f"bert-search: error: --search needs {package}, which is not installed: "
        f"{extras.install_hint(extra)}")
    assert not out.exists()
