"""The package layout: imports run one way, and no module imports inside a function."""

import ast
import importlib
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "bert_tf"

# Lower layers never import higher ones: configs/layers -> models -> text / weights /
# train -> serving -> runs -> tasks -> cli. `runs` (the driver, the run's context and
# config, options, the registry, export, seeds and search) runs any task and names none:
# it loads a task by its "module:Class" name. `commands` (flags from options, `--help`, start-up)
# is for the commands only: cli and data_prep import it, the library never does; it sits
# on layer 0 so that it imports no TensorFlow (a command's `--help` runs on it alone).
# `process` (stop signals, the multi-worker supervisor) is below the library, which uses
# it: a training loop's stop requests, a multi-worker strategy that tells its
# supervising parent it joined.
COMMAND_ONLY = {"commands"}
LAYERS = {"configs": 0, "extras": 0, "library_logs": 0, "io": 0, "options": 0,
          "process": 0, "commands": 0,
          "layers": 0, "models": 1, "text": 2, "weights": 2, "train": 2, "serving": 3,
          "runs": 4, "tasks": 5, "text_models": 6, "compat": 6, "cli": 6}
REPO = PACKAGE.parent


def _modules():
    return sorted(p for p in PACKAGE.rglob("*.py"))


def _part(dotted):
    """The top-level part of `bert_tf.<part>...` (a package or module)."""
    return dotted.split(".")[1] if dotted.startswith("bert_tf.") else None


def _imports(tree):
    """(node, imported dotted names) for every import statement."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield node, [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [f"{node.module}.{alias.name}" if node.module == "bert_tf" else node.module
                     for alias in node.names]
            yield node, names


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_run_one_way(path):
    own = _part("bert_tf." + str(path.relative_to(PACKAGE).with_suffix("")).replace("/", "."))
    if own == "__init__":
        return
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node, names in _imports(tree):
        for name in names:
            target = _part(name)
            if target in LAYERS and target != own:
                assert LAYERS[target] <= LAYERS[own], (
                    f"{path.name}:{node.lineno} ({own}, layer {LAYERS[own]}) imports {name} "
                    f"(layer {LAYERS[target]}): imports must run configs/layers -> models -> "
                    "text/weights/train -> serving -> runs -> tasks -> cli")


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_import_inside_a_function(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for function in ast.walk(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(function):
                assert not isinstance(node, (ast.Import, ast.ImportFrom)), (
                    f"{path.name}:{node.lineno}: import inside {function.name}(); import at "
                    "the top of the module (a circle means the code belongs elsewhere)")


def test_tasks_holds_task_folders_only():
    # The run machinery is bert_tf.runs; bert_tf/tasks/ has one folder a task.
    modules = sorted(p.name for p in (PACKAGE / "tasks").glob("*.py")
                     if p.name != "__init__.py")
    assert not modules, f"bert_tf/tasks/ holds modules that are no task folder: {modules}"


def test_the_earlier_paths_of_the_run_modules_still_import():
    tasks = importlib.import_module("bert_tf.tasks")
    for name in tasks.MOVED_TO_RUNS:
        assert getattr(tasks, name) is importlib.import_module(f"bert_tf.runs.{name}")
    with pytest.raises(AttributeError):
        getattr(tasks, "nope")
    pretraining = importlib.import_module("bert_tf.tasks.pretraining")
    assert pretraining.run_pretraining is importlib.import_module(
        "bert_tf.tasks.pretraining.task").run_pretraining


def test_the_layers_table_knows_every_part():
    parts = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
             if not p.name.startswith("__")}
    assert parts == set(LAYERS)


def _package_imports(folder, prefix):
    """{part: parts of bert_tf it imports} over the modules of `folder`."""
    edges = {}
    for path in sorted(folder.rglob("*.py")):
        own = _part(prefix + str(path.relative_to(folder).with_suffix("")).replace("/", "."))
        for _, names in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            for name in names:
                target = _part(name)
                if target and target != own:
                    edges.setdefault(own, set()).add(target)
    return edges


def test_no_two_packages_import_each_other():
    # Packages as nodes: a cycle of any length (tasks -> serving -> tasks) is refused,
    # even between parts that sit on one layer.
    edges = _package_imports(PACKAGE, "bert_tf.")

    def reaches(start, goal, seen):
        for nxt in edges.get(start, ()):
            if nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})):
                return True
        return False

    cycles = sorted(f"{a} -> {b} -> ... -> {a}" for a in edges for b in edges[a]
                    if reaches(b, a, {b}))
    assert not cycles, f"packages import each other: {cycles}"


def test_the_library_never_imports_the_command_line():
    for own, targets in _package_imports(PACKAGE, "bert_tf.").items():
        if own not in {"cli"} | COMMAND_ONLY:
            assert not targets & COMMAND_ONLY, f"bert_tf.{own} imports {targets & COMMAND_ONLY}"


def test_data_tools_need_nothing_from_cli():
    for path in sorted((REPO / "data_prep").rglob("*.py")):
        for node, names in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            assert not any(_part(name) == "cli" for name in names), (
                f"data_prep/{path.name}:{node.lineno} imports {names}: the data tools use "
                "bert_tf.commands.command_line, never the runners' cli package")


# TensorFlow's and Keras's implementation packages: not API, they move between releases.
# (tensorflow.core's generated `*_pb2` protocol buffers are the wire formats, which
# tf.* re-exports, e.g. tf.compat.v1.SummaryMetadata; the rest of tensorflow.core is not.)
PRIVATE_MODULES = ("tensorflow.python", "tensorflow.core", "tensorflow.compiler",
                   "tensorflow.tsl", "tensorflow.lite.python", "tensorflow._api",
                   "tensorflow.dtensor.python", "keras.src", "tf_keras.src",
                   "tensorflow_text.python", "tensorflow_text.core")


@pytest.mark.parametrize("folder", ["bert_tf", "data_prep"])
def test_no_private_tensorflow_imports(folder):
    root = PACKAGE.parent / folder
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            for name in names:
                private = any(name == m or name.startswith(m + ".") for m in PRIVATE_MODULES)
                proto = name.startswith("tensorflow.core.") and any(
                    part.endswith("_pb2") for part in name.split("."))
                if private and not proto:
                    found.append(f"{folder}/{path.relative_to(root)}:{node.lineno} {name}")
    assert not found, f"imports of TensorFlow / Keras internals (use the tf.* API): {found}"
