"""Per-code-point tables of the original BERT text rules, for the in-graph tokenizer.

Everything here is derived from Python's own `unicodedata` and `str.lower`, the exact
functions the original tokenizer calls, so the TensorFlow graph built on these tables
(`bert_tf.text.wordpiece_graph`) follows the same Unicode version as `FullTokenizer.tokenize`
and never depends on ICU's idea of punctuation, case or decomposition.

For each code point the tables give:
    kind: DROP (control, U+0000, U+FFFD; and in uncased mode characters that become
        empty after accent stripping), SPACE (separates words), ISOLATE (a word on its own:
        CJK ideographs, and characters whose normalised form is punctuation) or WORD.
    the normalised characters it becomes (1 to 3 code points): a delta for the first one,
        a row of `expansions` for the others (Hangul syllables decompose into jamo).
    the case class the final-sigma rule of `str.lower` needs: cased, case-ignorable or
        neither. Python lowercases U+03A3 to U+03C2 at the end of a word, else U+03C3.
"""

import dataclasses
import functools
import os
import sys
import unicodedata

import numpy as np

from bert_tf.io import fileio
from bert_tf.text import rules

DROP, SPACE, ISOLATE, WORD = 0, 1, 2, 3
CASE_OTHER, CASE_CASED, CASE_IGNORABLE = 0, 1, 2
CAPITAL_SIGMA, SMALL_SIGMA, FINAL_SIGMA = 0x3A3, 0x3C3, 0x3C2
NUM_CODE_POINTS = 0x110000
BLOCK_BITS = 8

# Bit layout of the packed `info` value of a code point.
KIND_MASK = 0x3
LENGTH_SHIFT, LENGTH_MASK = 2, 0x3
CASE_SHIFT, CASE_MASK = 4, 0x3
EXPANSION_SHIFT = 6


@dataclasses.dataclass(frozen=True)
class TwoLevelTable:
    """A [0x110000] int32 array stored as block index + unique 256-entry blocks."""
    block_index: np.ndarray  # [0x110000 >> 8] int32
    blocks: np.ndarray       # [num_unique_blocks << 8] int32

    @classmethod
    def from_dense(cls, dense):
        blocks = dense.astype(np.int32).reshape(-1, 1 << BLOCK_BITS)
        unique, index = {}, []
        for block in blocks:
            index.append(unique.setdefault(block.tobytes(), len(unique)))
        stacked = np.frombuffer(b"".join(unique), dtype=np.int32)
        return cls(np.asarray(index, dtype=np.int32), stacked.copy())

    def lookup(self, code_points):
        """NumPy lookup (the graph does the same with tf.gather)."""
        code_points = np.asarray(code_points)
        block = self.block_index[code_points >> BLOCK_BITS]
        return self.blocks[(block << BLOCK_BITS) + (code_points & ((1 << BLOCK_BITS) - 1))]


@dataclasses.dataclass(frozen=True)
class CharTables:
    info: TwoLevelTable    # packed kind | length | case class | expansion row
    delta: TwoLevelTable   # first normalised code point minus the code point
    expansions: np.ndarray  # [num_rows, 2] int32: 2nd and 3rd normalised code points


def _case_class(char):
    """Case class by probing `str.lower`'s final-sigma rule itself (Python internals)."""
    if (char + "\u03a3").lower()[-1] == "\u03c2":
        return CASE_CASED  # cased and not case-ignorable
    if ("A" + char + "\u03a3").lower()[-1] == "\u03c2":
        return CASE_IGNORABLE
    return CASE_OTHER


def normalised(char, do_lower_case):
    """The original's normalisation of one character (lower, NFD, drop Mn if uncased)."""
    if not do_lower_case:
        return char
    return rules.strip_accents(char.lower())


def _kind(char, normalised):
    code_point = ord(char)
    if code_point in (0, 0xFFFD) or rules.is_control(char):
        return DROP
    if rules.is_whitespace(char) or char.isspace():
        return SPACE
    if not normalised:
        return DROP
    if rules.is_chinese_char(code_point):
        if len(normalised) != 1:
            raise AssertionError(f"CJK U+{code_point:04X} normalises to {normalised!r}")
        return ISOLATE
    if len(normalised) == 1 and rules.is_punctuation(normalised):
        return ISOLATE
    if any(rules.is_punctuation(c) or c.isspace() for c in normalised):
        raise AssertionError(f"U+{code_point:04X} normalises to {normalised!r} with a separator")
    return WORD


def _is_chinese_array():
    is_chinese = np.zeros(NUM_CODE_POINTS, dtype=bool)
    for first, last in ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF),
                        (0x2A700, 0x2B73F), (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF),
                        (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)):
        is_chinese[first:last + 1] = True
    assert all(rules.is_chinese_char(cp) == is_chinese[cp]
               for cp in range(0, NUM_CODE_POINTS, 97))
    return is_chinese


def _packed(char, do_lower_case, expansions):
    """(info, delta) of one code point; appends to `expansions` when it expands."""
    normalised_chars = normalised(char, do_lower_case)
    kind = _kind(char, normalised_chars)
    length = len(normalised_chars) if kind in (WORD, ISOLATE) else (1 if kind == SPACE else 0)
    if length > 3:
        raise AssertionError(f"U+{ord(char):04X} normalises to {length} characters")
    row = 0
    if length > 1:
        row = len(expansions)
        expansions.append(tuple(ord(c) for c in normalised_chars[1:]) + (0,) * (3 - length))
    case = _case_class(char) if do_lower_case else CASE_OTHER
    info = kind | length << LENGTH_SHIFT | case << CASE_SHIFT | row << EXPANSION_SHIFT
    delta = ((ord(normalised_chars[0]) if kind != SPACE else 0x20) - ord(char)) if length else 0
    return info, delta


_CACHE_VERSION = 1  # bump when the tables change


def _cache_file(do_lower_case):
    root = os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))
    name = (f"char_tables_v{_CACHE_VERSION}_py{sys.version_info[0]}{sys.version_info[1]}"
            f"_ucd{unicodedata.unidata_version}_{'uncased' if do_lower_case else 'cased'}.npz")
    return os.path.join(root, "bert_tf", name)


@functools.lru_cache(maxsize=2)
def char_tables(do_lower_case):
    """The tables for cased or uncased text: from the disk cache, else built and cached."""
    path = _cache_file(do_lower_case)
    try:
        with np.load(path) as arrays:
            return CharTables(TwoLevelTable(arrays["info_index"], arrays["info_blocks"]),
                              TwoLevelTable(arrays["delta_index"], arrays["delta_blocks"]),
                              arrays["expansions"])
    except (OSError, KeyError, ValueError):
        pass
    tables = build_char_tables(do_lower_case)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with fileio.atomic_output(path) as temporary, open(temporary, "wb") as writer:
            np.savez(writer, info_index=tables.info.block_index, info_blocks=tables.info.blocks,
                     delta_index=tables.delta.block_index, delta_blocks=tables.delta.blocks,
                     expansions=tables.expansions)
    except OSError:
        pass  # a read-only home only costs the next process the build
    return tables


def build_char_tables(do_lower_case):
    """Builds the tables for cased or uncased text (a second or two; cached)."""
    plain = WORD | (1 << LENGTH_SHIFT)
    info = np.full(NUM_CODE_POINTS, plain, dtype=np.int64)
    delta = np.zeros(NUM_CODE_POINTS, dtype=np.int64)
    is_chinese = _is_chinese_array()
    expansions = [(0, 0)]
    category = unicodedata.category
    for code_point in range(NUM_CODE_POINTS):
        char = chr(code_point)
        cat = category(char)
        if cat == "Cs":
            info[code_point] = DROP
            continue
        if is_chinese[code_point]:
            info[code_point], delta[code_point] = _packed(char, do_lower_case, expansions)
            continue
        if cat in ("Cn", "Co") or (cat in ("Lo", "Nd") and code_point >= 0x80 and not (
            do_lower_case and not unicodedata.is_normalized("NFD", char))):
            # Nothing changes: no case mapping, no decomposition, not a separator.
            if do_lower_case and cat == "Lo":
                info[code_point] |= _case_class(char) << CASE_SHIFT
            continue
        info[code_point], delta[code_point] = _packed(char, do_lower_case, expansions)
    return CharTables(TwoLevelTable.from_dense(info), TwoLevelTable.from_dense(delta),
                      np.asarray(expansions, dtype=np.int32))
