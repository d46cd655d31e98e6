"""WordPiece tokenization with the rules of google-research/bert: `FullTokenizer`.

`FullTokenizer.tokenize` is the original pure-Python algorithm (the rules are in
`bert_tf.text.rules`, vocab files in `bert_tf.text.vocab`).

`FullTokenizer.tokenize_batch` / `convert_texts_to_ids` / `tokenize_batch_with_offsets`
run the same rules as TensorFlow ops (see `bert_tf.text.wordpiece_graph`): many times faster
and token-for-token identical. `BertTokenizerLayer` is that graph as a Keras layer that
can live inside a SavedModel. Both import TensorFlow on first use, so that this module
(and the data tools' `--help`, which import it) imports none.

As in the original, special tokens such as `[MASK]` typed inside raw text are split like
any other text, so user text can never inject a real special token. Pass
`keep_special_tokens=True` to keep `[PAD] [UNK] [CLS] [SEP] [MASK]` whole instead.
"""

import importlib
import re

from bert_tf.text import rules
from bert_tf.text.rules import (
    BasicTokenizer, WordpieceTokenizer, basic_words_with_offsets, convert_to_unicode)
from bert_tf.text.vocab import SPECIAL_TOKENS, VocabFile, check_vocab_has_unk, convert_by_vocab

# The TensorFlow graph of the same rules, imported on first use (`_graph`,
# `BertTokenizerLayer`, which docs/library.md imports from this module).
WORDPIECE_GRAPH = "bert_tf.text.wordpiece_graph"


def __getattr__(name):
    if name == "BertTokenizerLayer":
        return importlib.import_module(WORDPIECE_GRAPH).BertTokenizerLayer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class FullTokenizer:
    """End-to-end tokenizer: `BasicTokenizer` then `WordpieceTokenizer`.

    Args:
        vocab_file: path of vocab.txt (one token per line; must contain `[UNK]`), or a
            `VocabFile` already read (a run reads its vocab once).
        do_lower_case: lowercase and strip accents (uncased models).
        keep_special_tokens: keep `[PAD] [UNK] [CLS] [SEP] [MASK]` typed in the text whole
            instead of splitting them like any other text (the original splits them).
    """

    def __init__(self, vocab_file, do_lower_case=True, keep_special_tokens=False):
        if not isinstance(vocab_file, VocabFile):
            vocab_file = VocabFile.read(vocab_file)
        self._vocab_read = vocab_file
        self.vocab_file = vocab_file.path
        self.vocab_sha256 = vocab_file.sha256
        self.vocab = vocab_file.tokens
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
            self._graph_tokenizer = importlib.import_module(WORDPIECE_GRAPH).GraphWordpiece(
                self._vocab_read, self.do_lower_case, self.keep_special_tokens)
        return self._graph_tokenizer

    def convert_texts_to_ids(self, texts):
        """Token ids of many texts at once (fast path): list of lists of ints."""
        rules.check_texts(texts)
        return self._graph().ids_as_lists(texts)

    def tokenize_batch(self, texts):
        """Tokens of many texts at once (fast path), identical to `tokenize` on each."""
        inv = self.inv_vocab
        return [[inv[i] for i in row] for row in self.convert_texts_to_ids(texts)]

    def tokenize_batch_with_offsets(self, texts):
        """Fast path: (ids, start_chars, end_chars), each a list (per text) of int lists."""
        rules.check_texts(texts)
        return self._graph().ids_and_offsets_as_lists(texts)
