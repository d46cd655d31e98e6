"""The package layout: imports run one way, and no module imports inside a function."""

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "bert_tf"

# Lower layers never import higher ones: configs/layers -> models -> text / weights /
# train -> tasks / serving -> cli.
LAYERS = {"configs": 0, "fileio": 0, "layers": 0, "models": 1, "text": 2, "weights": 2,
          "train": 2, "tasks": 3, "serving": 3, "cli": 4}


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
                    "text/weights/train -> tasks/serving -> cli")


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_import_inside_a_function(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for function in ast.walk(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(function):
                assert not isinstance(node, (ast.Import, ast.ImportFrom)), (
                    f"{path.name}:{node.lineno}: import inside {function.name}(); import at "
                    "the top of the module (a circle means the code belongs elsewhere)")


def test_the_layers_table_knows_every_part():
    parts = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
             if not p.name.startswith("__")}
    assert parts == set(LAYERS)
