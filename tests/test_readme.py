"""The README's commands name real programs and only flags those programs define.

Every `bert-*` console script and `python -m bert_tf...` module in the README's bash blocks
is looked up, and every `--flag` it is given must be one its absl flags define. (The
end-to-end run of the commands on bundled data is `make demo`, which uses the same CLIs.)
"""

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
    "bert-" + p.stem.replace("_", "-"): p.stem
    for pattern in ("run_*.py", "export_model.py", "extract_features.py")
    for p in REPO_ROOT.glob(pattern)}
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


def readme_commands():
    """Each command of the README's bash blocks, continuation lines joined."""
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.split(" #")[0].strip()
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


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
