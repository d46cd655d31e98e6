"""Fast path of the in-graph tokenizer: ICU string ops + FastBertTokenizer, made exact.

Bare `tensorflow_text.FastBertTokenizer` disagrees with the original BERT rules: its
normaliser is NFKC case folding (`²` -> `2`, `…` -> `...`, `ς` -> `σ`, fullwidth `，`
-> `,`, `ª` -> `a`), it turns control characters into word breaks where the original
deletes them, it limits words by bytes (default 100) instead of 200 characters, and its
ICU tables are an older Unicode version than Python's. This path keeps only its
pre-tokenization and WordPiece and feeds it text normalised like the original:

    1. uncased: `tf.strings.lower` (ICU full lowercase, with the same Final_Sigma rule as
       `str.lower`), `normalize_utf8(NFD)`, delete the Mn characters (Python's list);
    2. `FastBertTokenizer` without its own normalisation, words up to 800 bytes.

Where ICU and Python still differ (characters that Python's Unicode version knows and
ICU's does not, or the reverse) the outcome could differ, so a text containing any such
"risky" character, a character the original deletes (U+0000, U+FFFD, Cc/Cf: rare, and
deleting them would cost a pass over every text), or a run of more than 66 characters
without a separator (a word that might pass 200 characters once normalised), is routed
to the exact code-point path (`bert_tf.text.wordpiece_graph`). The risky set is
measured, not guessed: each code point is put through the ICU ops and FastBertTokenizer
once and compared with Python (a few seconds, cached per process and in ~/.cache/bert_tf).
"""

import dataclasses
import functools
import json
import os
import sys
import unicodedata

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf.io import fileio
from bert_tf.text import wordpiece_tables as tables

MAX_SAFE_RUN = 66  # 66 raw characters normalise to at most 198 (Hangul: x3)
MAX_BYTES_PER_WORD = 800
_PROBE_VOCAB = ["[UNK]", "x", "y", "##x", "##y"]
_SIGMA = "\u03a3"
_CACHE_VERSION = 3  # bump when the measurement changes


@dataclasses.dataclass(frozen=True)
class FastPathPatterns:
    marks: str      # RE2 class of Mn characters (uncased) or ""
    risky: str      # RE2 class of the characters that send a text to the exact path
    long_run: str   # RE2 pattern found in texts that might hold a word > 200 characters


def _re2_class(code_points, negate=False):
    """RE2 character class for a sorted iterable of code points."""
    ranges, start, prev = [], None, None
    for cp in code_points:
        if start is None:
            start = prev = cp
        elif cp == prev + 1:
            prev = cp
        else:
            ranges.append((start, prev))
            start = prev = cp
    if start is not None:
        ranges.append((start, prev))
    body = "".join(f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}"
                   for a, b in ranges)
    return "[" + ("^" if negate else "") + body + "]"


def _kinds(do_lower_case):
    char_tables = tables.char_tables(do_lower_case)
    info = char_tables.info.lookup(np.arange(tables.NUM_CODE_POINTS))
    return info & tables.KIND_MASK, char_tables


def _icu_case_class(chars):
    """Case class of each char as ICU's lowercasing sees it (same probes as Python's)."""
    def lower(texts):
        return tf.strings.lower(_encoded(texts), encoding="utf-8").numpy()
    alone = lower([c + _SIGMA for c in chars])
    after_cased = lower(["A" + c + _SIGMA for c in chars])
    final = "\u03c2".encode("utf-8")
    return np.where([a.endswith(final) for a in alone], tables.CASE_CASED,
                    np.where([a.endswith(final) for a in after_cased], tables.CASE_IGNORABLE,
                             tables.CASE_OTHER))


def _encoded(texts):
    return tf.constant([t.encode("utf-8") for t in texts])


def _python_bytes(texts):
    return np.array([t.encode("utf-8") for t in texts], dtype=object)


def _risky_code_points(assigned, cased_kind, do_lower_case):
    """Code points where the ICU-based path may not follow Python's rules."""
    chars = [chr(cp) for cp in assigned]
    risky = set()
    # Word breaking of FastBertTokenizer on "x<c>y" against the original's classes.
    probe = tf_text.FastBertTokenizer(_PROBE_VOCAB, max_bytes_per_word=MAX_BYTES_PER_WORD)
    got = probe.tokenize(_encoded(["x" + c + "y" for c in chars]))
    values, splits = got.flat_values.numpy().tolist(), got.row_splits.numpy().tolist()
    expected = {tables.SPACE: [1, 2], tables.ISOLATE: [1, 0, 2], tables.WORD: [0]}
    for i, (cp, char) in enumerate(zip(assigned, chars)):
        kind = cased_kind[cp]
        if (kind != tables.DROP and char not in "xy"
                and values[splits[i]:splits[i + 1]] != expected[kind]):
            risky.add(cp)
    if not do_lower_case:
        return risky
    def nfd(text):
        return unicodedata.normalize("NFD", text)

    def icu_nfd(texts):
        return tf_text.normalize_utf8(_encoded(texts), "NFD").numpy()

    lowered = tf.strings.lower(_encoded(chars), encoding="utf-8").numpy()
    decomposed = icu_nfd(chars)
    mark_before = icu_nfd(["a\u0301" + c for c in chars])  # canonical order of marks
    mark_after = icu_nfd(["a" + c + "\u0316" for c in chars])
    info = tables.char_tables(True).info.lookup(np.asarray(assigned))
    python_case = (info >> tables.CASE_SHIFT) & tables.CASE_MASK
    differs = ((lowered != _python_bytes([c.lower() for c in chars]))
               | (decomposed != _python_bytes([nfd(c) for c in chars]))
               | (mark_before != _python_bytes([nfd("a\u0301" + c) for c in chars]))
               | (mark_after != _python_bytes([nfd("a" + c + "\u0316") for c in chars]))
               | (_icu_case_class(chars) != python_case))
    risky.update(np.asarray(assigned)[differs].tolist())
    # Characters whose normalised form contains a character FastBert splits differently.
    for cp, char in zip(assigned, chars):
        if any(ord(c) in risky for c in tables.normalised(char, True)):
            risky.add(cp)
    return risky


def _compute_patterns(do_lower_case):
    kind, _ = _kinds(do_lower_case)
    cased_kind, _ = _kinds(False)
    categories = [unicodedata.category(chr(cp)) for cp in range(tables.NUM_CODE_POINTS)]
    assigned = [cp for cp, cat in enumerate(categories) if cat not in ("Cn", "Cs") and cp]
    risky = _risky_code_points(assigned, cased_kind, do_lower_case)
    risky.update(cp for cp, cat in enumerate(categories) if cat == "Cn")
    risky.update(cp for cp in range(tables.NUM_CODE_POINTS)
                 if cased_kind[cp] == tables.DROP and categories[cp] != "Cs")
    marks = ([cp for cp, cat in enumerate(categories) if cat == "Mn"]
             if do_lower_case else [])
    # Separators in both modes, within the blocks where they are dense: a small class.
    separators = [cp for cp in list(range(0x80)) + list(range(0x2000, 0x2070))
                  + list(range(0x3000, 0xA000)) + list(range(0xFF00, 0xFF66))
                  if kind[cp] in (tables.SPACE, tables.ISOLATE)
                  and cased_kind[cp] in (tables.SPACE, tables.ISOLATE)]
    not_separator = _re2_class(separators, negate=True)
    return FastPathPatterns(
        marks=_re2_class(marks) if marks else "",
        risky=_re2_class(sorted(risky)),
        long_run=not_separator + "{%d}" % (MAX_SAFE_RUN + 1))


def _cache_file(do_lower_case):
    root = os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))
    key = (f"v{_CACHE_VERSION}-py{sys.version_info[0]}{sys.version_info[1]}"
           f"-ucd{unicodedata.unidata_version}-tf{tf.__version__}"
           f"-tftext{getattr(tf_text, '__version__', '')}")
    mode = "uncased" if do_lower_case else "cased"
    return os.path.join(root, "bert_tf", f"fast_path_{key}_{mode}.json")


@functools.lru_cache(maxsize=2)
def fast_path_patterns(do_lower_case):
    """The patterns for cased or uncased text, measured once and cached on disk."""
    path = _cache_file(do_lower_case)
    try:
        with open(path, encoding="utf-8") as reader:
            return FastPathPatterns(**json.load(reader))
    except (OSError, ValueError, TypeError):
        pass
    patterns = _compute_patterns(do_lower_case)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fileio.write_text_atomic(path, json.dumps(dataclasses.asdict(patterns)))
    except OSError:
        pass  # a read-only home only costs the next process the measurement
    return patterns


class FastPath(tf.Module):
    """ICU ops + FastBertTokenizer on texts that `is_safe` accepts."""

    def __init__(self, vocab_list, do_lower_case, unknown_token="[UNK]"):
        super().__init__(name="fast_path")
        self.do_lower_case = bool(do_lower_case)
        self.patterns = fast_path_patterns(self.do_lower_case)
        self.tokenizer = tf_text.FastBertTokenizer(
            vocab_list, suffix_indicator="##", max_bytes_per_word=MAX_BYTES_PER_WORD,
            token_out_type=tf.int64, unknown_token=unknown_token,
            lower_case_nfd_strip_accents=False)

    def is_safe(self, texts):
        """[B] bool: the text takes the fast path. Expects valid UTF-8."""
        return ~tf.strings.regex_full_match(
            texts, f"(?s).*(?:{self.patterns.risky}|{self.patterns.long_run}).*")

    def tokenize_ids(self, texts):
        """texts [B] -> ids [B, (T)] int64; only valid where `is_safe`."""
        if self.do_lower_case:
            texts = tf.strings.lower(texts, encoding="utf-8")
            texts = tf_text.normalize_utf8(texts, "NFD")
            texts = tf.strings.regex_replace(texts, self.patterns.marks, "")
        return self.tokenizer.tokenize(texts)
