"""`FullTokenizer`'s rules in pure Python, fast on real text: the work per word is cached.

The original BasicTokenizer cleans the text character by character (drops controls,
U+0000 and U+FFFD, turns whitespace into spaces), puts spaces around CJK ideographs,
splits on whitespace, and then handles each whitespace-separated token on its own
(lowercase, strip accents, split on punctuation). So its output on a text is the
concatenation of its output on each token of the cleaned text, and WordPiece works word
by word after it. Here:

1. cleaning and CJK spacing are one `str.translate` with a table filled lazily from the
   original's own predicates (`bert_tf.text.rules`), character by character;
2. `str.split()` gives the tokens, as in the original;
3. each distinct token is tokenized once, by the original `BasicTokenizer` and
   `WordpieceTokenizer` (printable ASCII tokens by an exact regex shortcut of the
   same rules), and its ids are cached.

Every step is the original's or provably equal to it, so the ids are identical for any
text (tests compare with `FullTokenizer.tokenize` and tests/reference_tokenizer.py); no
TensorFlow is imported, which keeps processes small and quick to start. Real text repeats
its tokens: the 2.8 MB English Wikipedia sample has 446k whitespace tokens, 65k distinct.
The caches are bounded (`max_cached_tokens`, about 300 bytes an entry).
"""

import collections.abc
import os
import re
from typing import Dict, List, Sequence, Tuple, Union

import numpy as np

from bert_tf.text import rules
from bert_tf.text import vocab as vocab_lib

# Printable ASCII without space: lowercasing is str.lower, accent stripping a no-op, and
# the punctuation of the original rules is exactly the non-alphanumeric characters.
_PRINTABLE_ASCII_TOKEN = re.compile(r"[!-~]+")
_ASCII_WORDS = re.compile(r"[0-9A-Za-z]+|[^0-9A-Za-z]")
_ASCII_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # Cc but tab, LF, CR
# Cleaned text never holds U+0000: it marks the ends of texts and the typed special tokens.
_TEXT_END = "\x00"
_SPECIAL_KEY = "\x00"


class _CleaningTable(dict):
    """str.translate table of the original _clean_text + _tokenize_chinese_chars."""

    def __missing__(self, code_point):
        char = chr(code_point)
        if code_point in (0, 0xFFFD) or rules.is_control(char):
            value = None
        elif rules.is_whitespace(char):
            value = " "
        elif rules.is_chinese_char(code_point):
            value = f" {char} "
        else:
            value = code_point
        self[code_point] = value
        return value


class _GrowingArray:
    """An int array that grows by appending, with amortised doubling."""

    def __init__(self, dtype):
        self.values = np.zeros([1024], dtype=dtype)
        self.size = 0

    def extend(self, items: List[int]):
        end = self.size + len(items)
        if end > len(self.values):
            grown = np.zeros([max(end, 2 * len(self.values))], dtype=self.values.dtype)
            grown[:self.size] = self.values[:self.size]
            self.values = grown
        self.values[self.size:end] = items
        self.size = end


class _TokenIndex(dict):
    """Cleaned whitespace token -> row of the piece table, filled on first sight."""

    def __init__(self, tokenizer):
        super().__init__({_TEXT_END: 0})  # row 0: no pieces, marks the end of a text
        self.tokenizer = tokenizer
        self.num_pieces = 0
        self.pending_ids, self.pending_starts, self.pending_lengths = [], [0], [0]

    def __missing__(self, token):
        ids = self.tokenizer._ids_of_token(token)  # pylint: disable=protected-access
        row = len(self)
        self[token] = row
        self.pending_ids.extend(ids)
        self.pending_starts.append(self.num_pieces)
        self.pending_lengths.append(len(ids))
        self.num_pieces += len(ids)
        return row

    def flush(self, piece_ids, piece_starts, piece_lengths):
        """Moves the rows added since the last flush into the growing arrays."""
        piece_ids.extend(self.pending_ids)
        piece_starts.extend(self.pending_starts)
        piece_lengths.extend(self.pending_lengths)
        self.pending_ids, self.pending_starts, self.pending_lengths = [], [], []


def _vocab_and_name(vocab, vocab_file):
    """(token -> id mapping, name for messages) of a vocab.txt path or a mapping."""
    if isinstance(vocab, (str, bytes, os.PathLike)):
        path = os.fsdecode(vocab)
        return vocab_lib.load_vocab(path), vocab_file or path
    if not isinstance(vocab, collections.abc.Mapping):
        raise TypeError(f"CachedTokenizer: vocab must be a vocab.txt path or a dict "
                        f"token -> id, got {type(vocab).__name__}")
    return vocab, vocab_file or f"(a dict of {len(vocab)} tokens)"


class CachedTokenizer:
    """Token ids identical to `FullTokenizer(vocab_file, do_lower_case).tokenize` + ids.

    Args:
        vocab: a vocab.txt path (one token per line, read as `FullTokenizer` reads it)
            or a token -> id mapping; it must contain `[UNK]`.
        do_lower_case: lowercase and strip accents (uncased models).
        keep_special_tokens: keep `[PAD] [UNK] [CLS] [SEP] [MASK]` typed in the text
            whole, as `FullTokenizer(keep_special_tokens=True)` does.
        max_cached_tokens: the caches are emptied when one grows past this many entries
            (a bound on memory; the ids do not depend on it).
        vocab_file: the vocab's file name, for messages (default: the path given as
            `vocab`).

    Raises:
        TypeError: `vocab` is neither a path nor a mapping.
        FileNotFoundError, ValueError: the vocab file is missing or malformed, or the
            vocab lacks `[UNK]` (naming the file).
    """

    def __init__(self, vocab: Union[str, os.PathLike, Dict[str, int]],
                 do_lower_case: bool = True, keep_special_tokens: bool = False,
                 max_cached_tokens: int = 250_000, vocab_file: str = None):
        vocab, vocab_file = _vocab_and_name(vocab, vocab_file)
        vocab_lib.check_vocab_has_unk(vocab, vocab_file)
        self.vocab = vocab
        self.vocab_file = vocab_file
        self.do_lower_case = bool(do_lower_case)
        self.keep_special_tokens = bool(keep_special_tokens)
        self.max_cached_tokens = max_cached_tokens
        self._basic = rules.BasicTokenizer(do_lower_case=self.do_lower_case)
        self._wordpiece = rules.WordpieceTokenizer(vocab=vocab)
        self._cleaning = _CleaningTable()
        specials = [token for token in vocab_lib.SPECIAL_TOKENS if token in vocab]
        self._special_pattern = re.compile("(" + "|".join(map(re.escape, specials)) + ")")
        self._clear_caches()

    def _clear_caches(self):
        self._word_ids = {}  # word after BasicTokenizer -> tuple of ids
        self._token_index = _TokenIndex(self)
        self._piece_ids = _GrowingArray(np.int32)      # ids of every cached token, by row
        self._piece_starts = _GrowingArray(np.int64)   # first piece of each row
        self._piece_lengths = _GrowingArray(np.int64)  # pieces of each row

    @classmethod
    def from_vocab_file(cls, vocab_file, do_lower_case=True, **kwargs) -> "CachedTokenizer":
        """Loads vocab.txt (one token per line) as FullTokenizer does."""
        return cls(os.fspath(vocab_file), do_lower_case, **kwargs)

    def __getstate__(self):
        state = {key: value for key, value in self.__dict__.items()
                 if key not in ("_word_ids", "_token_index", "_piece_ids", "_piece_starts",
                                "_piece_lengths")}
        return state  # caches are not worth sending

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._clear_caches()

    def _ids_of_word(self, word: str) -> Tuple[int, ...]:
        """WordPiece ids of one word after BasicTokenizer (cached)."""
        ids = self._word_ids.get(word)
        if ids is None:
            whole = self.vocab.get(word)  # the first piece greedy longest-match tries
            if whole is not None and len(word) <= rules.MAX_INPUT_CHARS_PER_WORD:
                ids = (whole,)
            else:
                ids = tuple(self.vocab[piece] for piece in self._wordpiece.tokenize(word))
            self._word_ids[word] = ids
        return ids

    def _ids_of_token(self, token: str) -> Sequence[int]:
        """Ids of one cleaned whitespace token, by the original rules (a cache miss)."""
        if token.startswith(_SPECIAL_KEY):
            return [self.vocab[token[1:]]]
        if token.isascii() and token.isalnum():  # one word: no punctuation to split off
            word = token.lower() if self.do_lower_case else token
            return self._word_ids.get(word) or self._ids_of_word(word)
        if _PRINTABLE_ASCII_TOKEN.fullmatch(token):
            words = _ASCII_WORDS.findall(token.lower() if self.do_lower_case else token)
        else:
            words = self._basic.tokenize(token)
        ids = []
        for word in words:
            ids.extend(self._word_ids.get(word) or self._ids_of_word(word))
        return ids

    def _clean(self, text: str) -> str:
        # ASCII without the controls that the original deletes: cleaning could only turn
        # tab, newline and return into spaces, and str.split() splits there anyway.
        if text.isascii() and not _ASCII_CONTROLS.search(text):
            return text
        return text.translate(self._cleaning)

    def _cleaned(self, text: str) -> str:
        """Cleaned text (special tokens typed in it replaced by their cache keys)."""
        if not self.keep_special_tokens:
            return self._clean(text)
        pieces = self._special_pattern.split(text)
        return " ".join(f" {_SPECIAL_KEY}{piece} " if index % 2 else self._clean(piece)
                        for index, piece in enumerate(pieces))

    def ids_and_lengths(self, texts: Sequence[str]) -> Tuple[np.ndarray, np.ndarray]:
        """Ids of many texts at once: (flat [T] int32 ids, [len(texts)] int64 lengths)."""
        rules.check_texts(texts)
        if max(len(self._token_index), len(self._word_ids)) > self.max_cached_tokens:
            self._clear_caches()
        if not texts:
            return np.zeros([0], np.int32), np.zeros([0], np.int64)
        joined = f" {_TEXT_END} ".join(map(self._cleaned, texts))
        rows = np.fromiter(map(self._token_index.__getitem__, joined.split()), dtype=np.int64)
        self._token_index.flush(self._piece_ids, self._piece_starts, self._piece_lengths)
        token_lengths = self._piece_lengths.values[rows]  # [N] pieces per token, 0 at text ends
        token_ends = np.cumsum(token_lengths)
        total = int(token_ends[-1]) if len(token_ends) else 0
        first_piece = np.repeat(self._piece_starts.values[rows] - (token_ends - token_lengths),
                                token_lengths)
        flat = self._piece_ids.values[first_piece + np.arange(total)]
        text_ends = np.append(token_ends[rows == 0], total)
        return flat, np.diff(text_ends, prepend=0)

    def convert_texts_to_ids(self, texts: Sequence[str]) -> List[List[int]]:
        """Token ids of many texts: list of lists of ints (as FullTokenizer's fast path)."""
        flat, lengths = self.ids_and_lengths(texts)
        bounds = np.concatenate([[0], np.cumsum(lengths)]).tolist()
        values = flat.tolist()
        return [values[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
