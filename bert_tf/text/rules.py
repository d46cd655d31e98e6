"""The text rules of google-research/bert's tokenizer, in pure Python.

Clean the text (drop U+0000, U+FFFD and control characters, map whitespace to a space),
put spaces around CJK ideographs, split on whitespace, lowercase + NFD + strip combining
marks when uncased, split on punctuation (`BasicTokenizer`), then greedy
longest-match-first WordPiece with `##` continuations (`WordpieceTokenizer`); a word
longer than 200 characters becomes `[UNK]`. The in-graph path
(`bert_tf.text.wordpiece_graph`) follows the same rules.
"""

import unicodedata

from bert_tf.text.vocab import UNK_TOKEN

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


def check_texts(texts, name="texts"):
    """Refuses a single string where a sequence of texts is expected (it would be read
    one character a text), and items that are not text.

    Raises:
      TypeError: naming the parameter and what it got.
    """
    if isinstance(texts, (str, bytes, bytearray)):
        raise TypeError(f"{name} must be a list of texts, got one {type(texts).__name__} "
                        f"({str(texts)[:40]!r}): wrap it in a list")
    for text in texts:
        if not isinstance(text, (str, bytes, bytearray)):
            raise TypeError(f"{name} must hold texts (str), got {type(text).__name__}: "
                            f"{str(text)[:40]!r}")


def printable_text(text):
    """Returns text encoded in a way suitable for print or logging (str in Python 3)."""
    if isinstance(text, str):
        return text
    if isinstance(text, (bytes, bytearray)):
        return bytes(text).decode("utf-8", "ignore")
    raise TypeError(f"unsupported string type: {type(text).__name__}")


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
