"""Shared fixtures: the real data beside the checkout, and tiny vocab files and tokenizers
over a test module's VOCAB (the tiny BERT itself and its files: tests/harness.py)."""

import logging
import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import pytest
from absl import logging as absl_logging

import harness
from bert_tf import extras
from bert_tf.text import tokenization

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED_DATA_DIR = pathlib.Path(
    os.environ.get("BERT_TF_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


@pytest.fixture(autouse=True)
def isolated_process_state(monkeypatch):
    """What a test may change for the whole process, put back after it: the environment,
    the working directory, absl's and Python's log levels and Keras's dtype policy. So
    the tests pass in any order (CI shuffles them: pytest-randomly, seed printed)."""
    environment, folder = dict(os.environ), os.getcwd()
    levels = {name: logging.getLogger(name).level for name in ("", "absl", "tensorflow")}
    verbosity, policy = absl_logging.get_verbosity(), keras.config.dtype_policy()
    yield
    os.chdir(folder)
    os.environ.clear()
    os.environ.update(environment)
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
    absl_logging.set_verbosity(verbosity)
    keras.config.set_dtype_policy(policy)


@pytest.fixture
def shared_data_dir():
    """../shared/data; tests that need it are skipped when it is absent."""
    if not SHARED_DATA_DIR.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA_DIR}")
    return SHARED_DATA_DIR


@pytest.fixture(scope="module")
def vocab_file(request, tmp_path_factory):
    """The test module's VOCAB as a vocab.txt shared by its tests; returns the path."""
    return harness.write_vocab(tmp_path_factory.mktemp("vocab") / "vocab.txt",
                               request.module.VOCAB)


@pytest.fixture
def tokenizer(request, tmp_path):
    """A lower-casing FullTokenizer over the test module's VOCAB (tmp_path / "vocab.txt")."""
    path = harness.write_vocab(tmp_path / "vocab.txt", request.module.VOCAB)
    return tokenization.FullTokenizer(path, do_lower_case=True)


def pytest_collection_modifyitems(config, items):
    """`@pytest.mark.extras("onnxruntime", ...)` (or a module's `pytestmark`): the test
    uses those optional packages, and skips (or does less) without them; `make
    test-extras` runs the marked tests again once every extra is installed. The names
    must be optional packages (`bert_tf.extras.EXTRA_OF`)."""
    del config
    for item in items:
        for mark in item.iter_markers("extras"):
            unknown = [name for name in mark.args
                       if name.split(".")[0] not in extras.EXTRA_OF]
            if unknown or not mark.args:
                raise pytest.UsageError(
                    f"{item.nodeid}: @pytest.mark.extras{mark.args}: expected the modules "
                    f"of optional packages, from {sorted(extras.EXTRA_OF)}")
