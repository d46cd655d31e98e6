"""Shared fixtures: the real data beside the checkout, and tiny vocab files and tokenizers
over a test module's VOCAB (the tiny BERT itself and its files: tests/harness.py)."""

import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest

import harness
from bert_tf.text import tokenization

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED_DATA_DIR = pathlib.Path(
    os.environ.get("BERT_TF_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


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
