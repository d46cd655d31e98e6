"""The original BERT tokenizer as TensorFlow ops: fast, batched, savable.

The text rules (cleaning, CJK splitting, lowercasing with Python's final-sigma rule, NFD
and accent stripping, punctuation splitting) run on code points through the tables of
`bert_tf.text.wordpiece_tables`, derived from Python's `unicodedata`; only the WordPiece step
is `tensorflow_text.FastWordpieceTokenizer` (run on words that are already split, so its
own ICU-based pre-tokenization and normalisation, which differ from the original, are
never used). Words of more than 200 characters become `[UNK]` as in the original (the
tensorflow_text limit counts bytes, not characters).

`GraphWordpiece` is the engine behind `FullTokenizer.tokenize_batch`;
`BertTokenizerLayer` is the same graph as a Keras layer for SavedModels.
"""


import keras
import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf.io import fileio
from bert_tf.text import rules
from bert_tf.text import wordpiece_fast
from bert_tf.text.vocab import (SPECIAL_TOKENS, UNK_TOKEN, VocabFile, check_vocab_has_unk,
                                load_vocab)
from bert_tf.text import wordpiece_tables as tables

_MAX_BYTES_PER_WORD = 4 * rules.MAX_INPUT_CHARS_PER_WORD
_TOO_LONG_WORD = "x" * (_MAX_BYTES_PER_WORD + 1)  # FastWordpiece maps it to [UNK]


class _GraphTables(tf.Module):
    """The character tables as constants."""

    def __init__(self, do_lower_case):
        super().__init__(name="char_tables")
        char_tables = tables.char_tables(do_lower_case)
        self.info_index = tf.constant(char_tables.info.block_index)
        self.info_blocks = tf.constant(char_tables.info.blocks)
        self.delta_index = tf.constant(char_tables.delta.block_index)
        self.delta_blocks = tf.constant(char_tables.delta.blocks)
        self.expansions = tf.constant(char_tables.expansions)

    @staticmethod
    def _lookup(index, blocks, code_points):
        block = tf.gather(index, tf.bitwise.right_shift(code_points, tables.BLOCK_BITS))
        low = tf.bitwise.bitwise_and(code_points, (1 << tables.BLOCK_BITS) - 1)
        return tf.gather(blocks, block * (1 << tables.BLOCK_BITS) + low)

    def info(self, code_points):
        return self._lookup(self.info_index, self.info_blocks, code_points)

    def delta(self, code_points):
        return self._lookup(self.delta_index, self.delta_blocks, code_points)


def _field(info, shift, mask):
    return tf.bitwise.bitwise_and(tf.bitwise.right_shift(info, shift), mask)


def _final_sigma(code_points, case, rows):
    """True where U+03A3 ends a word by `str.lower`'s Final_Sigma rule. All args [N]."""
    not_ignorable = tf.cast(case != tables.CASE_IGNORABLE, tf.int32)  # [N]
    count = tf.cumsum(not_ignorable)  # [N] non-ignorables up to and including i
    positions = tf.cast(tf.where(not_ignorable > 0)[:, 0], tf.int32)  # [M]
    total = tf.shape(positions)[0]
    sigma = tf.cast(tf.where(code_points == tables.CAPITAL_SIGMA)[:, 0], tf.int32)  # [S]
    sigma_rows = tf.gather(rows, sigma)
    before = tf.gather(count, sigma) - 2  # index into positions of the one before
    prev = tf.gather(positions, tf.maximum(before, 0))
    prev_cased = ((before >= 0) & (tf.gather(rows, prev) == sigma_rows)
                  & (tf.gather(case, prev) == tables.CASE_CASED))
    after = tf.gather(count, sigma)
    nxt = tf.gather(positions, tf.minimum(after, total - 1))
    next_cased = ((after < total) & (tf.gather(rows, nxt) == sigma_rows)
                  & (tf.gather(case, nxt) == tables.CASE_CASED))
    final = prev_cased & ~next_cased  # [S]
    return tf.scatter_nd(sigma[:, None], final, tf.shape(code_points))


def _words(graph_tables, texts, do_lower_case):
    """Splits texts [B] into normalised words. Returns a dict of flat tensors."""
    chars = tf.strings.unicode_decode(texts, "UTF-8", errors="replace",
                                      replacement_char=0xFFFD)  # [B, (C)]
    info = graph_tables.info(chars.values)  # [C]
    kind = _field(info, 0, tables.KIND_MASK)
    kept = tf.cast(tf.where(kind != tables.DROP)[:, 0], tf.int32)  # [K] index into C
    code_points = tf.gather(chars.values, kept)
    info = tf.gather(info, kept)
    kind = tf.gather(kind, kept)
    rows = tf.gather(tf.cast(chars.value_rowids(), tf.int32), kept)
    first = code_points + graph_tables.delta(code_points)
    if do_lower_case:
        final = _final_sigma(code_points, _field(info, tables.CASE_SHIFT, tables.CASE_MASK), rows)
        first = tf.where(final, tables.FINAL_SIGMA, first)
    # A word starts at a row start, after a space, at or after an isolated character.
    prev_kind = tf.concat([[tables.SPACE], kind[:-1]], 0)
    prev_row = tf.concat([[-1], rows[:-1]], 0)
    starts = ((prev_row != rows) | (prev_kind == tables.SPACE) | (prev_kind == tables.ISOLATE)
              | (kind == tables.ISOLATE))
    in_word = tf.cast(tf.where(kind != tables.SPACE)[:, 0], tf.int32)  # [L]
    word_of_char = tf.cumsum(tf.cast(tf.gather(starts, in_word), tf.int32)) - 1  # [L]
    lengths = _field(tf.gather(info, in_word), tables.LENGTH_SHIFT, tables.LENGTH_MASK)
    origin = tf.repeat(tf.range(tf.shape(in_word)[0]), lengths)  # [O] index into L
    slot = tf.range(tf.shape(origin)[0]) - tf.repeat(tf.cumsum(lengths, exclusive=True),
                                                     lengths)
    row_of_expansion = tf.gather(tf.bitwise.right_shift(tf.gather(info, in_word),
                                                        tables.EXPANSION_SHIFT), origin)
    expansion_index = tf.stack([row_of_expansion, tf.maximum(slot - 1, 0)], axis=1)
    normalised = tf.where(slot == 0, tf.gather(tf.gather(first, in_word), origin),
                          tf.gather_nd(graph_tables.expansions, expansion_index))  # [O]
    out_word = tf.gather(word_of_char, origin)  # [O]
    num_words = tf.reduce_max(tf.concat([[-1], word_of_char], 0)) + 1
    word_chars = tf.RaggedTensor.from_value_rowids(normalised, out_word, nrows=num_words)
    word_first = tf.gather(in_word, tf.math.unsorted_segment_min(
        tf.range(tf.shape(in_word)[0]), word_of_char, num_words))  # [W] index into K
    return {
        "chars": chars, "kept": kept, "in_word": in_word, "origin": origin,
        "word_chars": word_chars,  # [W, (chars)] normalised code points
        "word_rows": tf.gather(rows, word_first),  # [W]
    }


class GraphWordpiece(tf.Module):
    """Tokenizes batches of texts with TensorFlow ops (see module docstring).

    Args:
        vocab_file: vocab.txt path, or a `VocabFile` already read.
        do_lower_case: uncased rules.
        keep_special_tokens: keep `[PAD] [UNK] [CLS] [SEP] [MASK]` in the text whole.
    """

    def __init__(self, vocab_file, do_lower_case=True, keep_special_tokens=False,
                 name="graph_wordpiece"):
        super().__init__(name=name)
        if isinstance(vocab_file, VocabFile):  # already read (a run reads its vocab once)
            vocab, vocab_file = vocab_file.tokens, vocab_file.path
        else:
            vocab = load_vocab(vocab_file)
        check_vocab_has_unk(vocab, vocab_file)
        self.do_lower_case = bool(do_lower_case)
        self.keep_special_tokens = bool(keep_special_tokens)
        self.unk_id = vocab[UNK_TOKEN]
        self.vocab_size = len(vocab)
        self.tables = _GraphTables(self.do_lower_case)
        self.fast_path = wordpiece_fast.FastPath(list(vocab), self.do_lower_case)
        self.wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=list(vocab), suffix_indicator="##", max_bytes_per_word=_MAX_BYTES_PER_WORD,
            token_out_type=tf.int64, unknown_token=UNK_TOKEN,
            no_pretokenization=True)
        specials = [token for token in SPECIAL_TOKENS if token in vocab]
        self.special_pattern = "|".join(t.replace("[", r"\[").replace("]", r"\]")
                                        for t in specials)
        self.special_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(specials), tf.constant([vocab[t] for t in specials], tf.int64)),
            default_value=-1)

    def _routed_ids(self, texts):
        """ids [N, (T)]: the fast path where it is exact, the code-point path elsewhere."""
        safe = self.fast_path.is_safe(texts)  # [N]
        safe_index = tf.where(safe)[:, 0]
        other_index = tf.where(~safe)[:, 0]
        ids = tf.concat([self.fast_path.tokenize_ids(tf.gather(texts, safe_index)),
                         self._pieces(tf.gather(texts, other_index), False)], 0)
        order = tf.math.invert_permutation(tf.concat([safe_index, other_index], 0))
        return tf.gather(ids, order)

    def _pieces(self, texts, with_offsets):
        """ids [N, (T)] (and char offsets) of texts [N] without special-token handling."""
        words = _words(self.tables, texts, self.do_lower_case)
        word_chars = words["word_chars"]
        too_long = word_chars.row_lengths() > rules.MAX_INPUT_CHARS_PER_WORD
        strings = tf.where(too_long, _TOO_LONG_WORD,
                           tf.strings.unicode_encode(word_chars, "UTF-8"))  # [W]
        num_texts = tf.shape(texts, out_type=tf.int64)[0]
        if not with_offsets:
            ids = self.wordpiece.tokenize(strings)  # [W, (P)]
            return tf.RaggedTensor.from_value_rowids(
                ids, tf.cast(words["word_rows"], tf.int64), nrows=num_texts).merge_dims(1, 2)
        ids, start_bytes, end_bytes = self.wordpiece.tokenize_with_offsets(strings)
        starts, ends = _piece_char_offsets(words, ids, start_bytes, end_bytes, self.unk_id)
        regroup = lambda t: tf.RaggedTensor.from_value_rowids(  # pylint: disable=g-long-lambda
            t, tf.cast(words["word_rows"], tf.int64), nrows=num_texts).merge_dims(1, 2)
        return regroup(ids), regroup(starts), regroup(ends)

    def tokenize_ids(self, texts, with_offsets=False):
        """texts [B] tf.string (valid UTF-8) -> ids [B, (T)] int64 (and char offsets)."""
        texts = tf.convert_to_tensor(texts, tf.string)
        tokenize = self._pieces if with_offsets else lambda t, _: self._routed_ids(t)
        if not self.keep_special_tokens:
            return tokenize(texts, with_offsets)
        # regex_split stops at U+0000; U+FFFD is dropped like it and is one character too.
        texts = tf.strings.regex_replace(texts, "\\x00", "\ufffd")
        pieces, _, _ = tf_text.regex_split_with_offsets(
            texts, self.special_pattern, self.special_pattern)  # [B, (P)]
        special_ids = self.special_table.lookup(pieces.values)  # [P]
        is_special = special_ids >= 0
        special = lambda values: tf.RaggedTensor.from_row_lengths(  # pylint: disable=g-long-lambda
            tf.boolean_mask(values, is_special), tf.cast(is_special, tf.int64))  # [P, (0|1)]
        regroup = lambda t: tf.RaggedTensor.from_row_splits(  # pylint: disable=g-long-lambda
            t, pieces.row_splits).merge_dims(1, 2)
        result = tokenize(tf.where(is_special, "", pieces.values), with_offsets)
        if not with_offsets:
            return regroup(tf.concat([result, special(special_ids)], 1))
        ids, starts, ends = result
        lengths = tf.strings.length(pieces.values, unit="UTF8_CHAR", name="piece_chars")
        lengths = tf.cast(lengths, tf.int64)
        ends_in_text = tf.cumsum(lengths)  # [P] flat over the batch
        piece_start = ends_in_text - lengths - tf.gather(
            tf.concat([[0], ends_in_text], 0), tf.gather(pieces.row_splits, pieces.value_rowids()))
        def shift(offsets):
            return offsets + tf.cast(piece_start, offsets.dtype)[:, None]
        return (regroup(tf.concat([ids, special(special_ids)], 1)),
                regroup(tf.concat([shift(starts), special(piece_start)], 1)),
                regroup(tf.concat([shift(ends), special(piece_start + lengths)], 1)))

    def ids_as_lists(self, texts):
        """Python list of texts -> list of lists of int ids."""
        ids = self._run(texts, False)
        return _split_rows(ids.values.numpy(), ids.row_splits.numpy())

    def ids_and_offsets_as_lists(self, texts):
        """Python list of texts -> (ids, start_chars, end_chars) lists of lists of ints."""
        ids, starts, ends = self._run(texts, True)
        splits = ids.row_splits.numpy()
        return tuple(_split_rows(t.values.numpy(), splits) for t in (ids, starts, ends))

    def _run(self, texts, with_offsets):
        texts = list(texts)
        if not hasattr(self, "_functions"):
            spec = [tf.TensorSpec([None], tf.string)]
            self._functions = {
                flag: tf.function(lambda t, flag=flag: self.tokenize_ids(t, flag),
                                  input_signature=spec, autograph=False)
                for flag in (False, True)}
        return self._functions[with_offsets](_utf8_tensor(texts))


def _utf8_tensor(texts):
    """A [B] tf.string of UTF-8 texts; raises ValueError naming a text that is not UTF-8."""
    if all(type(text) is str for text in texts):  # pylint: disable=unidiomatic-typecheck
        try:
            return tf.constant(texts, tf.string, shape=[len(texts)])  # encodes to UTF-8
        except (UnicodeError, ValueError, TypeError):
            pass  # a lone surrogate: find and name it below
    encoded = []
    for index, text in enumerate(texts):
        try:
            encoded.append(rules.convert_to_unicode(text).encode("utf-8"))
        except (ValueError, UnicodeEncodeError) as err:
            raise ValueError(f"text {index} of the batch: {err}") from None
    return tf.constant(encoded, tf.string, shape=[len(encoded)])


def _split_rows(values, row_splits):
    values, row_splits = values.tolist(), row_splits.tolist()
    return [values[start:end] for start, end in zip(row_splits, row_splits[1:])]


def _piece_char_offsets(words, ids, start_bytes, end_bytes, unk_id):
    """Character offsets in the input text of each piece. Returns starts, ends [W, (P)]."""
    chars, word_chars = words["chars"], words["word_chars"]
    code_points = word_chars.values  # [O]
    char_bytes = (1 + tf.cast(code_points >= 0x80, tf.int64)
                  + tf.cast(code_points >= 0x800, tf.int64)
                  + tf.cast(code_points >= 0x10000, tf.int64))
    byte_start = tf.cumsum(char_bytes, exclusive=True)  # [O]
    word_first = tf.cast(word_chars.row_starts(), tf.int64)  # [W]
    word_last = tf.cast(word_chars.row_limits(), tf.int64) - 1  # [W]
    piece_word = ids.value_rowids()  # [Pn]
    base = tf.gather(tf.gather(byte_start, word_first), piece_word)
    locate = lambda b: tf.searchsorted(  # pylint: disable=g-long-lambda
        byte_start[None], b[None], side="right", out_type=tf.int64)[0] - 1
    first = locate(base + start_bytes.values)
    last = locate(base + end_bytes.values - 1)
    is_unk = ids.values == unk_id
    first = tf.where(is_unk, tf.gather(word_first, piece_word), first)
    last = tf.where(is_unk, tf.gather(word_last, piece_word), last)
    kept_rows = tf.gather(chars.value_rowids(), words["kept"])
    position = (tf.cast(words["kept"], tf.int64)
                - tf.cast(tf.gather(chars.row_splits, kept_rows), tf.int64))  # [K]
    to_text = lambda o: tf.gather(position, tf.gather(  # pylint: disable=g-long-lambda
        words["in_word"], tf.gather(words["origin"], o)))
    return (ids.with_flat_values(to_text(first)), ids.with_flat_values(to_text(last) + 1))


@keras.saving.register_keras_serializable(package="bert_tf")
class BertTokenizerLayer(keras.layers.Layer):
    """In-graph BERT tokenizer: tf.string [B] -> RaggedTensor of int64 ids [B, (T)].

    The same tokens as `FullTokenizer.tokenize`. Savable in a SavedModel: the vocab file is
    tracked as an asset (`vocab_asset`, copied to `assets/`), the WordPiece model and the
    character tables are part of the graph, and the loaded model needs only TensorFlow and
    tensorflow-text. Invalid UTF-8 bytes are dropped, as the original does.

    Args:
        vocab_file: vocab.txt path (must contain `[UNK]`).
        do_lower_case: uncased rules.
        keep_special_tokens: keep `[PAD] [UNK] [CLS] [SEP] [MASK]` typed in the text whole.
        **kwargs: Keras layer arguments (`name`, ...).
    """

    def __init__(self, vocab_file, do_lower_case=True, keep_special_tokens=False, **kwargs):
        kwargs.setdefault("name", "bert_tokenizer")
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        self.vocab_file = fileio.existing_file(vocab_file, "vocab_file")
        self.do_lower_case = bool(do_lower_case)
        self.keep_special_tokens = bool(keep_special_tokens)
        self.engine = GraphWordpiece(self.vocab_file, self.do_lower_case, self.keep_special_tokens)
        self.vocab_asset = tf.saved_model.Asset(self.vocab_file)
        self.vocab_size = self.engine.vocab_size

    @staticmethod
    def _valid_texts(texts):
        texts = tf.reshape(tf.convert_to_tensor(texts, tf.string), [-1])  # [B]
        # Invalid bytes become U+FFFD, which the rules drop (the original ignores them).
        return tf_text.coerce_to_structurally_valid_utf8(texts)

    def call(self, texts):
        return self.engine.tokenize_ids(self._valid_texts(texts))

    def tokenize_with_offsets(self, texts):
        """texts [B] -> (ids, start_chars, end_chars), each [B, (T)] int64."""
        return self.engine.tokenize_ids(self._valid_texts(texts), with_offsets=True)

    def get_config(self):
        config = super().get_config()
        config.update(vocab_file=self.vocab_file, do_lower_case=self.do_lower_case,
                      keep_special_tokens=self.keep_special_tokens)
        return config
