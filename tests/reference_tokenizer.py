"""An independent pure-Python statement of the original BERT tokenization rules.

Used only by the tests, as the yardstick for `bert_tf.text.tokenization`. It is written from
the rules (google-research/bert `tokenization.py`), not from our module, and favours
plainness over speed:

    1. drop U+0000, U+FFFD and every Cc/Cf character except tab, newline and return;
          turn space, tab, newline, return and every Zs character into a space;
    2. put spaces around every CJK ideograph of the original's ranges;
    3. split on whitespace (`str.split`);
    4. uncased: lowercase the piece (`str.lower`), NFD, drop the Mn characters;
    5. split off every punctuation character (ASCII non-alphanumeric printable, or a
          Unicode P* category) as a word of its own;
    6. WordPiece: greedy longest match first, `##` on continuations, a word of more than
          200 characters or with an unmatched rest becomes [UNK].
"""

import unicodedata

CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
              (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))
ASCII_PUNCTUATION = set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def _cleaned(text):
    out = []
    for ch in text:
        category = unicodedata.category(ch)
        if ch in "\t\n\r " or category == "Zs":
            out.append(" ")
        elif ord(ch) in (0, 0xFFFD) or category in ("Cc", "Cf"):
            continue
        elif any(lo <= ord(ch) <= hi for lo, hi in CJK_RANGES):
            out.append(" " + ch + " ")
        else:
            out.append(ch)
    return "".join(out)


def _is_punct(ch):
    return ch in ASCII_PUNCTUATION or unicodedata.category(ch)[0] == "P"


def basic_words(text, do_lower_case):
    """Steps 1-5: the list of words of `text`."""
    words = []
    for piece in _cleaned(text).split():
        if do_lower_case:
            piece = unicodedata.normalize("NFD", piece.lower())
            piece = "".join(ch for ch in piece if unicodedata.category(ch) != "Mn")
        current = ""
        for ch in piece:
            if _is_punct(ch):
                words.extend([current, ch] if current else [ch])
                current = ""
            else:
                current += ch
        if current:
            words.append(current)
    return " ".join(words).split()


def wordpiece(word, vocab):
    """Step 6 for one word."""
    if len(word) > 200:
        return ["[UNK]"]
    pieces, rest, first = [], word, True
    while rest:
        for end in range(len(rest), 0, -1):
            candidate = rest[:end] if first else "##" + rest[:end]
            if candidate in vocab:
                pieces.append(candidate)
                rest, first = rest[end:], False
                break
        else:
            return ["[UNK]"]
    return pieces


def reference_tokenize(text, vocab, do_lower_case=True):
    """Tokens of `text` under the original rules; `vocab` is any container of tokens."""
    return [p for w in basic_words(text, do_lower_case) for p in wordpiece(w, vocab)]
