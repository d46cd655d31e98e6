"""CachedTokenizer: the ids of FullTokenizer's rules for any text, without TensorFlow.

The yardsticks are tests/reference_tokenizer.py (an independent statement of the rules)
and `FullTokenizer.tokenize` (the original algorithm in Python).
"""

import ast
import pathlib
import pickle
import random
import re
import shutil
import subprocess
import sys
import unicodedata

import numpy as np
import pytest

import reference_tokenizer
from bert_tf.text import cached_tokenizer
from bert_tf.text import tokenization
from bert_tf.text.vocab import load_vocab
from test_tokenization import GOLDEN, REAL_VOCAB, VOCAB, wikipedia_lines  # noqa: F401


def _reference_ids(texts, vocab, lower):
    return [[vocab[token] for token in reference_tokenizer.reference_tokenize(t, set(vocab), lower)]
            for t in texts]


@pytest.fixture(scope="module")
def vocab(vocab_file):
    return load_vocab(vocab_file)


@pytest.mark.parametrize("lower", [True, False])
def test_golden_texts(vocab, lower):
    texts = [text for text, _, _ in GOLDEN]
    expected = [[vocab[t] for t in (uncased if lower else cased)] for _, uncased, cased in GOLDEN]
    tokenizer = cached_tokenizer.CachedTokenizer(vocab, lower)
    assert tokenizer.convert_texts_to_ids(texts) == expected
    assert tokenizer.convert_texts_to_ids(texts) == expected  # from the cache
    flat, lengths = tokenizer.ids_and_lengths(texts)
    assert lengths.tolist() == [len(ids) for ids in expected]
    assert flat.dtype == np.int32 and flat.tolist() == sum(expected, [])


@pytest.mark.parametrize("lower", [True, False])
def test_code_point_sample(vocab, lower):
    """Every code point in a sample, between letters, alone and doubled."""
    step = 1 if lower else 5  # cased: a sparser sample, to keep the test quick
    code_points = [cp for cp in list(range(0, 0x3000, step)) + list(range(0x3000, 0x110000, 211))
                   if unicodedata.category(chr(cp)) != "Cs"]
    texts = [f"x{chr(cp)}y {chr(cp)} {chr(cp)}{chr(cp)}a" for cp in code_points]
    tokenizer = cached_tokenizer.CachedTokenizer(vocab, lower)
    assert tokenizer.convert_texts_to_ids(texts) == _reference_ids(texts, vocab, lower)


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("keep_special_tokens", [False, True])
def test_random_mixtures_and_special_tokens(vocab_file, lower, keep_special_tokens):
    alphabet = list("axyéfoxhello ΣσςΑΟ.'\u00ad\u0301\u0316\u200b\x00\x07\t\n\u3000"
                    "\u2028\u0085İ가中，…²ﬁǅ-#[]\U0001d165\U0001d16d\u1b44🙂\ufffd\u0345")
    alphabet += ["[MASK]", " the ", "[SEP]", "[MA", "SK]", "ASK]"]
    rng = random.Random(1234)
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
             for _ in range(800)]
    full = tokenization.FullTokenizer(vocab_file, lower, keep_special_tokens=keep_special_tokens)
    expected = [full.convert_tokens_to_ids(full.tokenize(t)) for t in texts]
    tokenizer = cached_tokenizer.CachedTokenizer(
        full.vocab, lower, keep_special_tokens=keep_special_tokens)
    assert tokenizer.convert_texts_to_ids(texts) == expected
    assert [tokenizer.convert_texts_to_ids([t])[0] for t in texts] == expected


def test_bounded_cache_and_pickling_keep_the_ids(vocab):
    texts = [text for text, _, _ in GOLDEN] * 3
    expected = _reference_ids(texts, vocab, True)
    small = cached_tokenizer.CachedTokenizer(vocab, True, max_cached_tokens=3)
    for start in range(0, len(texts), 5):  # the caches are emptied between batches
        assert small.convert_texts_to_ids(texts[start:start + 5]) == expected[start:start + 5]
    assert len(small._token_index) <= 3 + 1 + 5 * 10  # pylint: disable=protected-access
    copy = pickle.loads(pickle.dumps(small))
    assert len(copy._token_index) == 1  # pylint: disable=protected-access
    assert copy.convert_texts_to_ids(texts) == expected
    assert small.convert_texts_to_ids([]) == [] and small.ids_and_lengths([])[0].size == 0


def test_missing_unk_is_refused():
    with pytest.raises(ValueError, match="v.txt has no \\[UNK\\]"):
        cached_tokenizer.CachedTokenizer({"a": 0}, vocab_file="v.txt")


def test_a_vocab_file_path_is_read_and_named():
    # CachedTokenizer("vocab.txt", True) used to treat the path as the vocab (a str):
    # "vocab file vocab has no [UNK] token".
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        cached_tokenizer.CachedTokenizer("missing.txt", True)
    with pytest.raises(TypeError, match="vocab.txt path or a dict"):
        cached_tokenizer.CachedTokenizer(["[UNK]"], True)


DOCS_LIBRARY = pathlib.Path(__file__).resolve().parents[1] / "docs" / "library.md"


def _run_documented_example(folder, vocab_file):
    """Runs docs/library.md's CachedTokenizer example as written, in `folder` with
    `vocab_file` as its uncased_L-12_H-768_A-12/vocab.txt.

    Returns:
        (ids its last line computes, the ids its comment shows).
    """
    blocks = re.findall(r"```python\n(.*?)```", DOCS_LIBRARY.read_text(encoding="utf-8"),
                        re.S)
    snippet = next(block for block in blocks if "CachedTokenizer(" in block)
    (folder / "uncased_L-12_H-768_A-12").mkdir()
    shutil.copy(vocab_file, folder / "uncased_L-12_H-768_A-12" / "vocab.txt")
    *body, last = snippet.strip().splitlines()
    expression, comment = last.split("#", 1)
    namespace = {}
    exec("\n".join(body), namespace)  # pylint: disable=exec-used
    return eval(expression, namespace), ast.literal_eval(comment.strip())  # pylint: disable=eval-used


def test_documented_example_runs_as_written(vocab_file, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ids, _ = _run_documented_example(tmp_path, vocab_file)
    full = tokenization.FullTokenizer(vocab_file, True)
    assert ids == [full.convert_tokens_to_ids(full.tokenize("Héllo, [MASK]!"))]


def test_documented_example_shows_the_real_ids(shared_data_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ids, shown = _run_documented_example(tmp_path, shared_data_dir / REAL_VOCAB)
    assert ids == shown


def test_imports_no_tensorflow():
    code = ("import sys; from bert_tf.text import cached_tokenizer; "
            "from data_prep import create_pretraining_data, pretraining_pipeline; "
            "print('tensorflow' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "False"


@pytest.mark.parametrize("lower", [True, False])
def test_wikipedia_sample(shared_data_dir, lower):
    vocab = load_vocab(str(shared_data_dir / REAL_VOCAB))
    lines = wikipedia_lines(shared_data_dir, max_bytes=30_000)
    tokenizer = cached_tokenizer.CachedTokenizer(vocab, lower)
    assert tokenizer.convert_texts_to_ids(lines) == _reference_ids(lines, vocab, lower)


@pytest.mark.slow
@pytest.mark.parametrize("lower", [True, False])
def test_wikipedia_full(shared_data_dir, lower):
    vocab_file = str(shared_data_dir / REAL_VOCAB)
    full = tokenization.FullTokenizer(vocab_file, lower)
    lines = wikipedia_lines(shared_data_dir)
    tokenizer = cached_tokenizer.CachedTokenizer(full.vocab, lower)
    assert tokenizer.convert_texts_to_ids(lines) == [
        full.convert_tokens_to_ids(full.tokenize(line)) for line in lines]
