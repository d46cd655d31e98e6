"""Shared fixtures: the real data beside the checkout, and a tiny BERT config."""

import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED_DATA_DIR = pathlib.Path(
    os.environ.get("BERT_TF_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


@pytest.fixture
def shared_data_dir():
    """../shared/data; tests that need it are skipped when it is absent."""
    if not SHARED_DATA_DIR.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA_DIR}")
    return SHARED_DATA_DIR
