"""The documentation's commands name real programs and only flags those programs define.

The pages are README.md and every docs/*.md (demo/check_readme.py's `pages()`). Every
`bert-*` console script and `python -m bert_tf...` module in their bash blocks is looked
up, and every `--flag` it is given must be one its absl flags define (for the Beam tools:
or a Beam pipeline option). The Python examples' imports must resolve, and the links
between pages must point at files and headings that exist. (Running every command on
bundled data takes minutes: `make check-readme`, demo/check_readme.py.)
"""

import ast
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
    for name in ("create_pretraining_data.py", "build_vocab.py", "extend_vocab.py")
    for p in (REPO_ROOT / "data_prep").glob(name)})


def _beam_scripts():
    """setup.py's BEAM_CLIS: the Beam tools' console scripts -> modules."""
    tree = ast.parse((REPO_ROOT / "setup.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                getattr(t, "id", None) == "BEAM_CLIS" for t in node.targets):
            return ast.literal_eval(node.value)
    return {}


BEAM_SCRIPT_MODULES = _beam_scripts()
# bert-train takes the flags of the task it names: one listing per registered task.
TRAIN_TASKS = [f"bert_tf.cli.train:{name}" for name in re.findall(
    r'TaskEntry\("(\w+)"', (REPO_ROOT / "bert_tf" / "runs" / "registry.py").read_text())]
HAVE_BEAM = importlib.util.find_spec("apache_beam") is not None
if HAVE_BEAM:  # without the extra their flags cannot be listed; `make install-extras`
    SCRIPT_MODULES.update(BEAM_SCRIPT_MODULES)

# Runs in a fresh interpreter: imports each CLI module in turn and lists the absl flags it
# defines (module-level DEFINEs; `define_flags()` called by `run_main`; or the options
# dataclass `OPTIONS` that `run_main` hands to `bert_tf.commands.command_line.define_flags`).
LIST_FLAGS = """
import importlib, json, sys
from absl import flags
FLAGS = flags.FLAGS
builtin = set(FLAGS)
result = {}
for module_name in sys.argv[1:]:
    module = importlib.import_module(module_name.split(":")[0])
    if ":" in module_name:  # bert-train: the flags of the task it names
        module.define_flags(module_name.split(":")[1])
    elif hasattr(module, "define_flags"):
        module.define_flags()
    elif hasattr(module, "OPTIONS"):
        from bert_tf.commands import command_line
        command_line.define_flags(module.OPTIONS, module_name)
    result[module_name] = sorted(FLAGS)
    for name in set(FLAGS) - builtin:
        delattr(FLAGS, name)
print(json.dumps(result))
"""

# Runs in a fresh interpreter: every option name of Beam's pipeline options (what the Beam
# tools pass through to the runner: --runner, --project, --direct_num_workers, ...).
LIST_BEAM_OPTIONS = """
import json
from apache_beam.options import pipeline_options
parser = pipeline_options._BeamArgumentParser(allow_abbrev=False)
for options_class in pipeline_options.PipelineOptions.__subclasses__():
    options_class._add_argparse_args(parser)
print(json.dumps(sorted(s.lstrip("-") for s in parser._option_string_actions)))
"""

# Runs in a fresh interpreter: each (module, name) of the pages' Python examples must import.
CHECK_IMPORTS = """
import importlib, json, sys
missing = []
for module_name, name in json.loads(sys.argv[1]):
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        missing.append(f"{module_name}: {error}")
        continue
    if name and not hasattr(module, name):
        try:
            importlib.import_module(f"{module_name}.{name}")
        except ImportError:
            missing.append(f"{module_name}.{name}")
print(json.dumps(missing))
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
    """Each command of the bash blocks of every page, continuation lines joined."""
    return [command for _, command in _check_readme_module().all_commands(REPO_ROOT)]


def page_texts():
    """page (relative to the repo root) -> its text, for every page check_readme reads."""
    return {page: (REPO_ROOT / page).read_text(encoding="utf-8")
            for page in _check_readme_module().pages(REPO_ROOT)}


def without_code(text):
    """The text with its fenced code blocks blanked out (their `#` lines are no headings)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def github_anchor(heading):
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to -."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(text):
    """The anchors of a page's headings (a repeated heading gets -1, -2, ...)."""
    seen = {}
    result = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*$", without_code(text), flags=re.M):
        anchor = github_anchor(heading)
        if anchor in seen:
            seen[anchor] += 1
            anchor = f"{anchor}-{seen[anchor]}"
        else:
            seen[anchor] = 0
        result.add(anchor)
    return result


def flags_of(command):
    """Flag names passed in a command (`--x=1`, `--x`, `[--x=1]`, `--nox`)."""
    return re.findall(r"(?:^|[\s\[])--([A-Za-z_][\w]*)", command)


def test_readme_shows_the_two_commands():
    commands = _check_readme_module().readme_commands(REPO_ROOT / "README.md")
    assert "make demo" in commands and "make test" in commands


def test_readme_is_a_front_page_with_one_example_per_command():
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) < 300, "README.md is the front page: move details to docs/"
    commands = _check_readme_module().readme_commands(REPO_ROOT / "README.md")
    shown = {c.split()[0] for c in commands}
    expected = set(SCRIPT_MODULES) - set(BEAM_SCRIPT_MODULES) | {
        "bert-create-pretraining-data-beam"}
    assert expected <= shown, f"README.md lacks an example of {sorted(expected - shown)}"
    for page in (REPO_ROOT / "docs").glob("*.md"):
        if page.name != "README.md":
            assert f"(docs/{page.name}" in text, f"README.md does not link docs/{page.name}"


def test_every_docs_page_is_read_and_listed():
    check = _check_readme_module()
    pages = check.pages(REPO_ROOT)
    docs = sorted(f"docs/{p.name}" for p in (REPO_ROOT / "docs").glob("*.md"))
    assert pages[0] == "README.md" and sorted(pages[1:]) == docs
    assert len(pages) == len(set(pages))
    index = (REPO_ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    for page in docs:
        name = page.split("/")[1]
        assert name == "README.md" or f"]({name})" in index, f"docs/README.md lacks {name}"


def test_bash_blocks_of_docs_pages_are_found_and_sh_blocks_are_not():
    commands = _check_readme_module().all_commands(REPO_ROOT)
    pages_with_commands = {page for page, _ in commands}
    for page in ("docs/data_prep.md", "docs/pretraining.md", "docs/finetuning.md",
                 "docs/serving.md"):
        assert page in pages_with_commands, f"no bash command found in {page}"
    assert any(page == "docs/finetuning.md" and "--pack_sequences" in command
               for page, command in commands)
    assert any(page == "docs/data_prep.md" and command.startswith("bert-build-vocab-beam")
               for page, command in commands)
    # The Flink and Spark commands of docs/data_prep.md are in an sh block: shown, not run.
    assert not any("FlinkRunner" in command or "SparkRunner" in command
                   for _, command in commands)


def test_pages_order_and_blocks_on_a_made_up_tree(tmp_path):
    check = _check_readme_module()
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("```bash\nmake demo\n```\n", encoding="utf-8")
    (tmp_path / "docs" / "README.md").write_text(
        "[B](b.md), [A](a.md#x), [B again](b.md)\n", encoding="utf-8")
    (tmp_path / "docs" / "a.md").write_text(
        "# A\n```bash\nbert-x --a=1 \\\n  --b=2   # a comment\n# a comment line\n```\n"
        "```sh\nbert-not-run\n```\n", encoding="utf-8")
    (tmp_path / "docs" / "b.md").write_text("no commands\n", encoding="utf-8")
    (tmp_path / "docs" / "c.md").write_text("```bash\nbert-c\n```\n", encoding="utf-8")
    assert check.pages(str(tmp_path)) == ["README.md", "docs/b.md", "docs/a.md",
                                          "docs/c.md", "docs/README.md"]
    assert check.all_commands(str(tmp_path)) == [
        ("README.md", "make demo"), ("docs/a.md", "bert-x --a=1 --b=2"),
        ("docs/c.md", "bert-c")]


def test_run_all_labels_pages_and_runs_a_repeated_command_once(tmp_path, capsys):
    check = _check_readme_module()
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    commands = [("README.md", "true"), ("docs/a.md", "echo hi"), ("docs/a.md", "true"),
                ("docs/a.md", "false"), ("docs/a.md", "docker run image")]
    results = check.run_all(commands, str(tmp_path), str(log_dir))
    assert [r[0] for r in results] == ["ok", "ok", "repeated", "failed", "skipped"]
    out = capsys.readouterr().out
    assert "== docs/a.md: 4 commands" in out and "[docs/a.md 1] $ echo hi" in out
    assert "[docs/a.md 2] repeated: the same as [README.md 1]" in out
    assert (log_dir / "docs_a_01.log").read_text().endswith("hi\n")
    assert check.summary(results, ["README.md", "docs/a.md", "docs/b.md"]) == [
        "README.md: 1 ran, 0 failed, 0 skipped, 0 repeated",
        "docs/a.md: 1 ran, 1 failed, 1 skipped, 1 repeated",
        "docs/b.md: 0 ran, 0 failed, 0 skipped, 0 repeated",
        "all 3 pages: 2 ran, 1 failed, 1 skipped, 1 repeated"]


@pytest.mark.extras("apache_beam")  # the Beam tools' flags are checked when it is installed
def test_readme_programs_exist_and_take_the_flags_shown():
    commands = [c for c in readme_commands() if c.split()[0] in SCRIPT_MODULES]
    assert len(commands) >= 6, "the pages should show the runners' commands"
    modules = sorted(({SCRIPT_MODULES[c.split()[0]] for c in commands}
                      - {SCRIPT_MODULES["bert-train"]}) | set(TRAIN_TASKS))
    listing = subprocess.run([sys.executable, "-c", LIST_FLAGS, *modules], cwd=REPO_ROOT,
                             capture_output=True, text=True, timeout=300)
    assert listing.returncode == 0, listing.stderr[-3000:]
    defined = json.loads(listing.stdout.strip().splitlines()[-1])
    beam_options = set()
    if HAVE_BEAM:
        beam_listing = subprocess.run([sys.executable, "-c", LIST_BEAM_OPTIONS],
                                      cwd=REPO_ROOT, capture_output=True, text=True,
                                      timeout=300)
        assert beam_listing.returncode == 0, beam_listing.stderr[-3000:]
        beam_options = set(json.loads(beam_listing.stdout.strip().splitlines()[-1]))
    for command in commands:
        script = command.split()[0]
        if script == "bert-train":  # the named task's flags; with --config alone, any's
            task = re.search(r"--task=(\S+)", command)
            known = set().union(*(defined[key] for key in TRAIN_TASKS
                                  if not task or key.endswith(":" + task.group(1))))
        else:
            known = set(defined[SCRIPT_MODULES[script]])
        if script in BEAM_SCRIPT_MODULES:
            known |= beam_options
        for flag in flags_of(command):
            assert flag in known or (flag.startswith("no") and flag[2:] in known), (
                f"documented command `{command[:80]}...` uses --{flag}, which "
                f"{script} does not define")


def test_python_examples_import():
    """Every `import` / `from ... import` of the pages' python blocks resolves."""
    wanted = set()
    for page, text in page_texts().items():
        for block in re.findall(r"```python\n(.*?)```", text, flags=re.S):
            for node in ast.walk(ast.parse(block, filename=page)):
                if isinstance(node, ast.ImportFrom):
                    wanted.update((node.module, alias.name) for alias in node.names)
                elif isinstance(node, ast.Import):
                    wanted.update((alias.name, "") for alias in node.names)
    assert ("bert_tf", "BertConfig") in wanted
    result = subprocess.run([sys.executable, "-c", CHECK_IMPORTS, json.dumps(sorted(wanted))],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []


def test_links_between_pages_resolve():
    texts = page_texts()
    for page, text in texts.items():
        folder = (REPO_ROOT / page).parent
        for target in re.findall(r"\]\(([^)\s]+)\)", without_code(text)):
            if re.match(r"[a-z]+:", target):
                continue  # http(s): and other schemes
            path, _, anchor = target.partition("#")
            resolved = (folder / path).resolve() if path else REPO_ROOT / page
            assert resolved.exists(), f"{page}: link to {target}: no such file"
            if anchor and resolved.suffix == ".md":
                assert anchor in anchors(resolved.read_text(encoding="utf-8")), (
                    f"{page}: link to {target}: no heading with that anchor")


def test_github_anchors():
    assert github_anchor("GLUE / your own data") == "glue--your-own-data"
    assert github_anchor("`--pack_sequences`") == "--pack_sequences"
    assert github_anchor("SQuAD v1.1") == "squad-v11"
    assert anchors("# A\n```\n# not a heading\n```\n## A\n") == {"a", "a-1"}


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
