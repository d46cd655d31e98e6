"""The README's commands name real programs and only flags those programs define.

Every `bert-*` console script and `python -m bert_tf...` module in the README's bash blocks
is looked up, and every `--flag` it is given must be one its absl flags define. (Running
every command on bundled data takes minutes: `make check-readme`, demo/check_readme.py.)
"""

import functools
import importlib.util
import json
import pathlib
import re
import subprocess
import sys

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]

# Console script -> module path, as setup.py names them.
SCRIPT_MODULES = {
    "bert-" + p.stem.replace("_", "-"): f"bert_tf.cli.{p.stem}"
    for p in (REPO_ROOT / "bert_tf" / "cli").glob("*.py")
    if p.stem not in ("__init__", "common")}
SCRIPT_MODULES.update({
    "bert-" + p.stem.replace("_", "-"): f"data_prep.{p.stem}"
    for name in ("create_pretraining_data.py", "build_vocab.py")
    for p in (REPO_ROOT / "data_prep").glob(name)})

# Runs in a fresh interpreter: imports each CLI module in turn and lists the absl flags it
# defines (module-level DEFINEs, or `define_flags()` called by `run_main`).
LIST_FLAGS = """
import importlib, json, sys
from absl import flags
FLAGS = flags.FLAGS
builtin = set(FLAGS)
result = {}
for module_name in sys.argv[1:]:
    module = importlib.import_module(module_name)
    if hasattr(module, "define_flags"):
        module.define_flags()
    result[module_name] = sorted(FLAGS)
    for name in set(FLAGS) - builtin:
        delattr(FLAGS, name)
print(json.dumps(result))
"""


@functools.lru_cache(maxsize=None)
def _check_readme_module():
    """demo/check_readme.py, loaded once as a module (it is a script, not a package module)."""
    spec = importlib.util.spec_from_file_location(
        "check_readme", REPO_ROOT / "demo" / "check_readme.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def readme_commands():
    """Each command of the README's bash blocks, continuation lines joined."""
    return _check_readme_module().readme_commands(REPO_ROOT / "README.md")


def flags_of(command):
    """Flag names passed in a command (`--x=1`, `--x`, `[--x=1]`, `--nox`)."""
    return re.findall(r"(?:^|[\s\[])--([A-Za-z_][\w]*)", command)


def test_readme_shows_the_two_commands():
    commands = readme_commands()
    assert "make demo" in commands and "make test" in commands


def test_readme_programs_exist_and_take_the_flags_shown():
    commands = [c for c in readme_commands() if c.split()[0] in SCRIPT_MODULES]
    assert len(commands) >= 6, "the README should show the runners' commands"
    modules = sorted({SCRIPT_MODULES[c.split()[0]] for c in commands})
    listing = subprocess.run([sys.executable, "-c", LIST_FLAGS, *modules], cwd=REPO_ROOT,
                             capture_output=True, text=True, timeout=300)
    assert listing.returncode == 0, listing.stderr[-3000:]
    defined = json.loads(listing.stdout.strip().splitlines()[-1])
    for command in commands:
        known = set(defined[SCRIPT_MODULES[command.split()[0]]])
        for flag in flags_of(command):
            assert flag in known or (flag.startswith("no") and flag[2:] in known), (
                f"README command `{command[:80]}...` uses --{flag}, which "
                f"{command.split()[0]} does not define")


@pytest.mark.parametrize("module", sorted({
    m for c in readme_commands() for m in re.findall(r"python -m ([\w.]+)", c)}))
def test_readme_python_modules_exist(module):
    assert importlib.util.find_spec(module) is not None, f"README runs missing module {module}"


def test_check_readme_rewrites_outputs_and_overrides_pod_flags():
    check = _check_readme_module()
    command = ("bert-run-pretraining --input_file='/data/w.tfrecord-*' --output_dir=/runs/x "
               "--num_train_steps=1000000 --num_gpus=8 --bert_config_file=bert_config.json")
    adapted, overrides = check.adapt(command, "/w")
    assert "--input_file='/w/data/w.tfrecord-*'" in adapted
    assert "--output_dir=/w/runs/x" in adapted and "--bert_config_file=bert_config.json" in adapted
    assert "--num_train_steps=1000000" not in adapted and "--num_gpus=8" not in adapted
    assert adapted.endswith(" ".join(overrides)) and "--num_gpus=0" in overrides
    assert check.variants("bert-x --a=1 [--b=2 --c] --d") == ["bert-x --a=1 --d",
                                                              "bert-x --a=1 --b=2 --c --d"]
    assert check.variants("bert-x --a=1") == ["bert-x --a=1"]
    assert check.variants("bert-x --output_dir=/t/s [--b]") == [
        "bert-x --output_dir=/t/s", "bert-x --output_dir=/t/s_options --b"]


def test_check_readme_stand_ins_parse_with_the_readers(tmp_path):
    """The dump, MRPC, CoNLL and SQuAD stand-ins are what the runners' readers accept."""
    from bert_tf.tasks.classification import data as classification_data
    from bert_tf.tasks.ner import data as ner_data
    from bert_tf.tasks.squad import data as squad_data
    from data_prep import wikipedia
    check = _check_readme_module()
    documents = check._corpus_documents()
    dump = tmp_path / "enwiki-1.xml.bz2"
    check._write_wiki_dump(documents[:5], str(dump))
    parsed = list(wikipedia.iter_documents(str(dump)))
    assert len(parsed) == 5 and parsed[0][0].startswith(documents[0][0][:20])
    check._write_mrpc(str(tmp_path / "MRPC"))
    processor = classification_data.get_processor("MRPC")
    train = processor.get_examples(str(tmp_path / "MRPC"), "train")
    assert len(train) == 48 and {e.label for e in train} == {"0", "1"}
    assert len(processor.get_examples(str(tmp_path / "MRPC"), "test")) == 16
    check._write_conll(documents, str(tmp_path / "conll"))
    sentences = ner_data.read_tagged_file(str(tmp_path / "conll" / "eng.train"))
    assert len(sentences) > 30 and any("I-LOC" in s.tags for s in sentences)
    check._write_squad(documents[:4], str(tmp_path / "dev-v2.0.json"), v2=True)
    examples = squad_data.read_squad_examples(str(tmp_path / "dev-v2.0.json"), is_training=True,
                                              version_2_with_negative=True)
    assert any(e.is_impossible for e in examples) and not all(e.is_impossible
                                                              for e in examples)
