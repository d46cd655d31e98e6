"""Optional packages: each is imported only where its feature runs, and a missing one is
named with the extra of setup.py that installs it.

    onnx = extras.require("onnx", "--export_format=onnx")

A plain `pip install bert_tf` imports none of them: every command runs, and only the
feature that needs a missing package ends, in one line (`MissingExtra`, a user error of
the commands) that says what to install.
"""

import importlib

# The top-level module of each optional package -> the extra that installs it. The
# extras of setup.py (all but `test`) are exactly the values (tests/test_plain_install.py).
EXTRA_OF = {
    "apache_beam": "beam",
    "jieba": "chinese",
    "keras_hub": "keras-hub",
    "onnx": "onnx", "tf2onnx": "onnx", "onnxruntime": "onnx",
    "optuna": "search",
    "tensorflow_hub": "tfhub-test", "tf_keras": "tfhub-test",
    "ai_edge_litert": "litert-test",
    "torch": "huggingface-test", "transformers": "huggingface-test",
}


class MissingExtra(ImportError):
    """An optional package a feature needs is not installed (the message names the extra)."""


def install_hint(extra: str) -> str:
    """How to install `extra`, from the package index or in a checkout."""
    return f"install the {extra} extra (`pip install bert_tf[{extra}]`, or " \
           f"`pip install -e .[{extra}]` in a checkout)"


def missing(module: str, feature: str) -> MissingExtra:
    """The error for `feature`, which needs the optional `module` that is not installed."""
    package = module.split(".")[0]
    if package not in EXTRA_OF:
        raise ValueError(f"module={module!r}: expected a module of an optional package, "
                         f"one of {sorted(EXTRA_OF)}")
    return MissingExtra(f"{feature} needs {package}, which is not installed: "
                        f"{install_hint(EXTRA_OF[package])}", name=package)


def require(module: str, feature: str):
    """Imports and returns `module` of an optional package.

    Args:
        module: a dotted module name whose top-level package is a key of `EXTRA_OF`.
        feature: what needs it, as the user asked for it (a flag, a format).

    Raises:
        MissingExtra: the package is not installed (an installed package that fails to
            import for another reason raises its own error).
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        if (error.name or "").split(".")[0] != module.split(".")[0]:
            raise
        raise missing(module, feature) from None
