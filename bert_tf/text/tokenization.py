"""WordPiece tokenization with the rules of google-research/bert, plus vocab I/O.

`FullTokenizer.tokenize` is the original pure-Python algorithm: clean the text (drop
U+0000, U+FFFD and control characters, map whitespace to a space), put spaces around
CJK ideographs, split on whitespace, lowercase + NFD + strip combining marks when
uncased, split on punctuation, then greedy longest-match-first WordPiece with `##`
continuations; a word longer than 200 characters becomes `[UNK]`.

`FullTokenizer.tokenize_batch` / `convert_texts_to_ids` / `tokenize_batch_with_offsets`
run the same rules as TensorFlow ops (see `bert_tf.text.wordpiece_graph`): many times faster
and token-for-token identical. `BertTokenizerLayer` is that graph as a Keras layer that
can live inside a SavedModel.

As in the original, special tokens such as `[MASK]` typed inside raw text are split like
any other text, so user text can never inject a real special token. Pass
`keep_special_tokens=True` to keep `[PAD] [UNK] [CLS] [SEP] [MASK]` whole instead.
"""

import collections
import os
import re
import unicodedata

from absl import logging

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
UNK_TOKEN = "[UNK]"
MAX_INPUT_CHARS_PER_WORD = 200


def convert_to_unicode(text):
    """Returns `text` (str or UTF-8 bytes) as str; raises on bytes that are not UTF-8."""
    if isinstance(text, str):
        return text
    if isinstance(text, (bytes, bytearray)):
        try:
            return bytes(text).decode("utf-8")
        except UnicodeDecodeError as err:
            raise ValueError(
                f"text is not valid UTF-8 at byte {err.start} "
                f"({bytes(text)[err.start:err.start + 4]!r}...): expected UTF-8 encoded text"
            ) from None
    raise TypeError(f"unsupported string type: {type(text).__name__}, expected str or bytes")


def printable_text(text):
    """Returns text encoded in a way suitable for print or logging (str in Python 3)."""
    if isinstance(text, str):
        return text
    if isinstance(text, (bytes, bytearray)):
        return bytes(text).decode("utf-8", "ignore")
    raise TypeError(f"unsupported string type: {type(text).__name__}")


def load_vocab(vocab_file):
    """Loads a vocab file (one token per line) into an OrderedDict token -> id.

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: the file is empty, not UTF-8, or lists a token twice (the message names
            the file and the lines).
    """
    vocab_file = os.fspath(vocab_file)
    if not os.path.isfile(vocab_file):
        raise FileNotFoundError(f"vocab file not found: {vocab_file}")
    with open(vocab_file, "rb") as reader:
        raw_lines = reader.read().split(b"\n")
    if raw_lines and raw_lines[-1] == b"":
        raw_lines.pop()  # the newline that ends the last line
    vocab = collections.OrderedDict()
    for line_number, raw in enumerate(raw_lines, start=1):
        try:
            token = raw.decode("utf-8").strip()
        except UnicodeDecodeError:
            raise ValueError(f"{vocab_file}:{line_number}: vocab line is not valid UTF-8: "
                             f"{raw[:40]!r}") from None
        if token in vocab:
            raise ValueError(
                f"{vocab_file}:{line_number}: duplicate vocab entry {token!r}, first seen on line "
                f"{vocab[token] + 1}; every token must appear once")
        vocab[token] = len(vocab)
    if not vocab:
        raise ValueError(f"vocab file is empty: {vocab_file}; expected one token per line")
    return vocab


def check_vocab_matches(num_tokens, vocab_file, vocab_size, config_source="the config"):
    """Refuses a vocab that cannot belong to a model with `vocab_size` embedding rows.

    More tokens than rows would index past the table; fewer than half the rows means a
    vocab of another model (a few spare rows, as padded tables have, only warn).

    Raises:
      ValueError: naming both files and both sizes.
    """
    if num_tokens > vocab_size or num_tokens < vocab_size // 2:
        raise ValueError(f"vocab_file {vocab_file} has {num_tokens} tokens but "
                         f"{config_source} has vocab_size {vocab_size}: the vocab and the "
                         "model come from different checkpoints; pass the vocab.txt that "
                         "was released with the checkpoint")
    if num_tokens < vocab_size:
        logging.warning("vocab_file %s has %d tokens, %s has vocab_size %d (spare "
                        "embedding rows)", vocab_file, num_tokens, config_source, vocab_size)


def check_vocab_has_unk(vocab, vocab_file):
    """Raises ValueError naming `vocab_file` when `vocab` lacks `[UNK]`."""
    if UNK_TOKEN not in vocab:
        raise ValueError(f"vocab file {vocab_file} has no {UNK_TOKEN} token; a WordPiece vocab "
                         f"needs one for words it cannot split")


def convert_by_vocab(vocab, items):
    """Maps each item through `vocab` (a dict); raises KeyError naming the missing item."""
    output = []
    for item in items:
        try:
            output.append(vocab[item])
        except KeyError:
            raise KeyError(f"{item!r} is not in the vocabulary") from None
    return output


def whitespace_tokenize(text):
    """Strips and splits `text` on whitespace."""
    return text.split()


def is_whitespace(char):
    """Space, tab, newline, carriage return and category Zs count as whitespace."""
    if char in (" ", "\t", "\n", "\r"):
        return True
    return unicodedata.category(char) == "Zs"


def is_control(char):
    """Categories Cc and Cf, except tab, newline and carriage return (whitespace)."""
    if char in ("\t", "\n", "\r"):
        return False
    return unicodedata.category(char) in ("Cc", "Cf")


def is_punctuation(char):
    """Every non-alphanumeric printable ASCII character and every Unicode P* character."""
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def is_chinese_char(cp):
    """True for a code point in the CJK Unified Ideographs blocks the original lists."""
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F
            or 0x2B820 <= cp <= 0x2CEAF or 0xF900 <= cp <= 0xFAFF
            or 0x2F800 <= cp <= 0x2FA1F)


def strip_accents(text):
    """NFD, then drops the nonspacing marks (category Mn)."""
    text = unicodedata.normalize("NFD", text)
    return "".join(char for char in text if unicodedata.category(char) != "Mn")


class BasicTokenizer:
    """Cleaning, CJK splitting, lowercasing/accent stripping and punctuation splitting."""

    def __init__(self, do_lower_case=True):
        self.do_lower_case = do_lower_case

    def tokenize(self, text):
        """Returns the list of words (before WordPiece) of `text`."""
        text = self._clean_text(convert_to_unicode(text))
        text = self._tokenize_chinese_chars(text)
        split_tokens = []
        for token in whitespace_tokenize(text):
            if self.do_lower_case:
                token = strip_accents(token.lower())
            split_tokens.extend(self._split_on_punctuation(token))
        return whitespace_tokenize(" ".join(split_tokens))

    @staticmethod
    def _split_on_punctuation(text):
        output = []
        start_new_word = True
        for char in text:
            if is_punctuation(char):
                output.append([char])
                start_new_word = True
            else:
                if start_new_word:
                    output.append([])
                start_new_word = False
                output[-1].append(char)
        return ["".join(chars) for chars in output]

    @staticmethod
    def _tokenize_chinese_chars(text):
        output = []
        for char in text:
            if is_chinese_char(ord(char)):
                output.extend((" ", char, " "))
            else:
                output.append(char)
        return "".join(output)

    @staticmethod
    def _clean_text(text):
        output = []
        for char in text:
            cp = ord(char)
            if cp == 0 or cp == 0xFFFD or is_control(char):
                continue
            output.append(" " if is_whitespace(char) else char)
        return "".join(output)


def _lowered_chars(chars):
    """Lowercases [(char, index)] as one string (final sigma!), keeping each char's index."""
    lowered = "".join(char for char, _ in chars).lower()
    output, position = [], 0
    for char, index in chars:
        width = len(char.lower())
        output.extend((out, index) for out in lowered[position:position + width])
        position += width
    return output


def _accent_stripped_chars(chars):
    """NFD + drop Mn on [(char, index)], keeping indices.

    NFD of the whole token can reorder combining marks (two Mc marks of non-zero class in
    non-canonical order); then each output character takes the index of the first unused
    input character that produced the same character.
    """
    output = [(out, index) for char, index in chars
              for out in unicodedata.normalize("NFD", char)
              if unicodedata.category(out) != "Mn"]
    whole = strip_accents("".join(char for char, _ in chars))
    if whole == "".join(char for char, _ in output):
        return output
    unused = list(output)
    aligned = []
    for out in whole:
        match = next(k for k, (char, _) in enumerate(unused) if char == out)
        aligned.append((out, unused.pop(match)[1]))
    return aligned


def basic_words_with_offsets(text, do_lower_case):
    """BasicTokenizer rules with offsets: yields (word, start_chars, end_chars) per word.

    start_chars[k] / end_chars[k] are the offsets in `text` of the character that produced
    the k-th character of `word` (end exclusive).
    """
    tokens, current = [], []
    for index, char in enumerate(text):
        cp = ord(char)
        if cp == 0 or cp == 0xFFFD or is_control(char):
            continue
        if is_whitespace(char) or char.isspace() or is_chinese_char(cp):
            if current:
                tokens.append(current)
            current = []
            if is_chinese_char(cp):
                tokens.append([(char, index)])
            continue
        current.append((char, index))
    if current:
        tokens.append(current)
    for chars in tokens:
        if do_lower_case:
            chars = _accent_stripped_chars(_lowered_chars(chars))
        word = []
        for char, index in chars + [(" ", -1)]:
            if char.isspace() or is_punctuation(char):
                if word:
                    yield ("".join(c for c, _ in word), [i for _, i in word],
                           [i + 1 for _, i in word])
                word = []
                if not char.isspace():
                    yield char, [index], [index + 1]
            else:
                word.append((char, index))


class WordpieceTokenizer:
    """Greedy longest-match-first WordPiece over words that are already split."""

    def __init__(self, vocab, unk_token=UNK_TOKEN,
                 max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD):
        self.vocab = vocab
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word

    def tokenize_word_spans(self, word):
        """Returns [(piece, start, end)] for one word; [(unk, 0, len)] if it cannot split."""
        if len(word) > self.max_input_chars_per_word:
            return [(self.unk_token, 0, len(word))]
        pieces = []
        start = 0
        while start < len(word):
            end = len(word)
            current = None
            while start < end:
                piece = word[start:end]
                if start > 0:
                    piece = "##" + piece
                if piece in self.vocab:
                    current = piece
                    break
                end -= 1
            if current is None:
                return [(self.unk_token, 0, len(word))]
            pieces.append((current, start, end))
            start = end
        return pieces

    def tokenize(self, text):
        """Returns the WordPiece tokens of whitespace-separated `text`."""
        output = []
        for word in whitespace_tokenize(convert_to_unicode(text)):
            output.extend(piece for piece, _, _ in self.tokenize_word_spans(word))
        return output


class FullTokenizer:
    """End-to-end tokenizer: `BasicTokenizer` then `WordpieceTokenizer`.

    Args:
        vocab_file: path of vocab.txt (one token per line; must contain `[UNK]`).
        do_lower_case: lowercase and strip accents (uncased models).
        keep_special_tokens: keep `[PAD] [UNK] [CLS] [SEP] [MASK]` typed in the text whole
            instead of splitting them like any other text (the original splits them).
    """

    def __init__(self, vocab_file, do_lower_case=True, keep_special_tokens=False):
        self.vocab_file = os.fspath(vocab_file)
        self.vocab = load_vocab(self.vocab_file)
        check_vocab_has_unk(self.vocab, self.vocab_file)
        self.inv_vocab = {index: token for token, index in self.vocab.items()}
        self.do_lower_case = bool(do_lower_case)
        self.keep_special_tokens = bool(keep_special_tokens)
        self.basic_tokenizer = BasicTokenizer(do_lower_case=self.do_lower_case)
        self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)
        specials = [token for token in SPECIAL_TOKENS if token in self.vocab]
        self._special_pattern = re.compile("(" + "|".join(map(re.escape, specials)) + ")")
        self._graph_tokenizer = None

    def _split_special(self, text):
        """Yields (piece, char_offset, is_special) for `text`."""
        if not self.keep_special_tokens:
            yield text, 0, False
            return
        offset = 0
        for index, piece in enumerate(self._special_pattern.split(text)):
            if piece:
                yield piece, offset, index % 2 == 1
            offset += len(piece)

    def tokenize(self, text):
        """Returns the WordPiece tokens of one text, by the original Python rules."""
        text = convert_to_unicode(text)
        tokens = []
        for piece, _, is_special in self._split_special(text):
            if is_special:
                tokens.append(piece)
                continue
            for word in self.basic_tokenizer.tokenize(piece):
                tokens.extend(self.wordpiece_tokenizer.tokenize(word))
        return tokens

    def tokenize_with_offsets(self, text):
        """Returns (tokens, start_chars, end_chars): offsets into `text`, end exclusive."""
        text = convert_to_unicode(text)
        tokens, starts, ends = [], [], []
        for piece, offset, is_special in self._split_special(text):
            if is_special:
                tokens.append(piece)
                starts.append(offset)
                ends.append(offset + len(piece))
                continue
            for word, word_starts, word_ends in basic_words_with_offsets(
                piece, self.do_lower_case):
                for token, start, end in self.wordpiece_tokenizer.tokenize_word_spans(word):
                    tokens.append(token)
                    starts.append(offset + min(word_starts[start:end]))
                    ends.append(offset + max(word_ends[start:end]))
        return tokens, starts, ends

    def convert_tokens_to_ids(self, tokens):
        return convert_by_vocab(self.vocab, tokens)

    def convert_ids_to_tokens(self, ids):
        return convert_by_vocab(self.inv_vocab, ids)

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_graph_tokenizer"] = None  # TensorFlow objects do not pickle; rebuilt lazily
        return state

    def _graph(self):
        if self._graph_tokenizer is None:
            from bert_tf.text import wordpiece_graph  # pylint: disable=import-outside-toplevel
            self._graph_tokenizer = wordpiece_graph.GraphWordpiece(
                self.vocab_file, self.do_lower_case, self.keep_special_tokens)
        return self._graph_tokenizer

    def convert_texts_to_ids(self, texts):
        """Token ids of many texts at once (fast path): list of lists of ints."""
        return self._graph().ids_as_lists(texts)

    def tokenize_batch(self, texts):
        """Tokens of many texts at once (fast path), identical to `tokenize` on each."""
        inv = self.inv_vocab
        return [[inv[i] for i in row] for row in self.convert_texts_to_ids(texts)]

    def tokenize_batch_with_offsets(self, texts):
        """Fast path: (ids, start_chars, end_chars), each a list (per text) of int lists."""
        return self._graph().ids_and_offsets_as_lists(texts)



def __getattr__(name):
    if name == "BertTokenizerLayer":
        from bert_tf.text import wordpiece_graph  # pylint: disable=import-outside-toplevel
        return wordpiece_graph.BertTokenizerLayer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
