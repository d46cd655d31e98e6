"""In-graph text preprocessing and answer decoding for the exported SavedModels.

Everything here runs as TensorFlow / tensorflow_text ops, so a SavedModel built from it
serves with tensorflow + tensorflow_text alone (TF Serving, `saved_model_cli`), never
importing `bert_tf`. `bert_tf.serving.export` assembles the signatures from these pieces.

Text is packed by `bert_tf.text.input_layout_graph`, exactly as the fine-tuning features are:
`[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`, padded with 0 to `max_seq_length`; a pair
that is too long is cut longest-first (the original `_truncate_seq_pair`), a question to
`max_query_length` tokens, each NER word to `max_seq_length - 2` pieces. A classifier
trained on long documents in windows (`bert_tf.text.windows`) is served the same way:
`encode_windowed_texts` cuts each text into its windows and `pool_windows` combines their
logits per text.

Offsets are character offsets into the original (un-normalized) string: Unicode code
points, end exclusive, the indices a Python `str` uses (tensorflow_text's byte offsets
go through `byte_to_char_offsets`).
"""

import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf.models.encoder import assert_inputs_agree, check_input_shapes
from bert_tf.serving.signature_inputs import check_text_rank
from bert_tf.text import input_layout_graph, windows, windows_graph, wordpiece_graph
from bert_tf.text.rules import MAX_INPUT_CHARS_PER_WORD
from bert_tf.text.vocab import load_vocab

# Mirrors FullTokenizer's 200-character limit (counted in bytes in-graph: equal for ASCII).
MAX_BYTES_PER_WORD = MAX_INPUT_CHARS_PER_WORD
REQUIRED_TOKENS = ("[UNK]", "[CLS]", "[SEP]")
ENGINES = ("fast_bert", "graph_wordpiece")
DEFAULT_ENGINE = "graph_wordpiece"
NO_ANSWER_SCORE = -1e30  # `score` of a SQuAD answer when the context has no token
FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids")
# Every code point where Python's str.isspace() holds (all lie below U+3001).
SPACE_CODE_POINTS = tuple(cp for cp in range(0x3001) if chr(cp).isspace())


class ServingTokenizer(tf.Module):
    """WordPiece with the BERT rules inside the graph; the vocab file is an asset.

    `tokenize` maps a tf.string tensor [B] to int64 ids [B, (T)];
    `tokenize_with_offsets` also returns each token's character offsets (start, end
    exclusive) in the original string, ragged [B, (T)].

    Engines: "graph_wordpiece" (default) is `bert_tf.text.wordpiece_graph.GraphWordpiece`,
    the engine of `BertTokenizerLayer`: token-for-token `FullTokenizer`, offsets
    included. "fast_bert" is `tensorflow_text.FastBertTokenizer`: a smaller graph, the
    same tokens on common text, but it splits words at zero-width / control characters
    that the original deletes.

    Args:
        vocab_file: vocab.txt, one token per line; needs [UNK], [CLS] and [SEP].
        do_lower_case: lowercase + strip accents (uncased models).
        engine: "fast_bert" or "graph_wordpiece" (default `DEFAULT_ENGINE`).
    """

    def __init__(self, vocab_file, do_lower_case, engine=None, name="tokenizer"):
        super().__init__(name=name)
        vocab = load_vocab(vocab_file)
        missing = [token for token in REQUIRED_TOKENS if token not in vocab]
        if missing:
            raise ValueError(f"vocab file {vocab_file} lacks {missing}; a BERT vocab needs "
                             f"{list(REQUIRED_TOKENS)}")
        self.vocab_size = len(vocab)
        self.do_lower_case = bool(do_lower_case)
        self.unk_id, self.cls_id, self.sep_id = (vocab[token] for token in REQUIRED_TOKENS)
        # Shipped in assets/ so that clients can map ids back to tokens.
        self.vocab_asset = tf.saved_model.Asset(vocab_file)
        engine = engine or DEFAULT_ENGINE
        if engine == "graph_wordpiece":
            self._graph = wordpiece_graph.GraphWordpiece(vocab_file,
                                                         do_lower_case=self.do_lower_case)
        elif engine == "fast_bert":
            self._fast = tf_text.FastBertTokenizer(
                vocab=list(vocab), token_out_type=tf.int64, unknown_token="[UNK]",
                lower_case_nfd_strip_accents=self.do_lower_case,
                max_bytes_per_word=MAX_BYTES_PER_WORD)
        else:
            raise ValueError(f"unknown tokenizer engine {engine!r}; expected one of "
                             f"{list(ENGINES)}")

    def tokenize(self, texts):
        if hasattr(self, "_graph"):
            return self._graph.tokenize_ids(texts)
        return self._fast.tokenize(texts)

    def tokenize_with_offsets(self, texts):
        if hasattr(self, "_graph"):
            return self._graph.tokenize_ids(texts, with_offsets=True)
        ids, byte_starts, byte_ends = self._fast.tokenize_with_offsets(texts)
        return ids, ragged_byte_to_char(texts, byte_starts), ragged_byte_to_char(
            texts, byte_ends)


def tokenize_texts(tokenizer, text_a, text_b=None):
    """Ids ragged [B, (T)] of raw text [B] and of its pair (None without one).

    A pair of different batch sizes fails (when run) naming `text_a` and `text_b`."""
    if text_b is None:
        text_a = check_text_rank({"text_a": text_a})["text_a"]
    else:
        texts = assert_inputs_agree(check_text_rank({"text_a": text_a, "text_b": text_b}),
                                    1, "batch sizes")
        text_a, text_b = texts["text_a"], texts["text_b"]
    return tokenizer.tokenize(text_a), None if text_b is None else tokenizer.tokenize(text_b)


def encode_texts(tokenizer, max_seq_length, text_a, text_b=None):
    """Raw text [B] (and its pair) -> model inputs, as the classifier was trained.

    A pair of different batch sizes fails (when run) naming `text_a` and `text_b`."""
    ids_a, ids_b = tokenize_texts(tokenizer, text_a, text_b)  # [B, (T)]
    segments = input_layout_graph.truncate_ragged_segments(ids_a, ids_b, max_seq_length)
    return input_layout_graph.pack_inputs(segments, tokenizer.cls_id, tokenizer.sep_id,
                                     max_seq_length)


def encode_windowed_texts(tokenizer, max_seq_length, doc_stride, text_a, text_b=None):
    """Raw text [B] (and its pair) -> the model inputs of every window of every text, as
    a long-document classifier was trained (`bert_tf.text.windows`).

    Returns:
        (features int32 [N, max_seq_length], document int64 [N]: the text each window
        belongs to; N >= B, every text has at least one window).
    """
    ids_a, ids_b = tokenize_texts(tokenizer, text_a, text_b)  # [B, (T)]
    segments, document = windows_graph.window_ragged_segments(ids_a, ids_b, max_seq_length,
                                                              doc_stride)
    return (input_layout_graph.pack_inputs(segments, tokenizer.cls_id, tokenizer.sep_id,
                                           max_seq_length), document)


def pool_windows(logits, document, num_documents, pooling):
    """The logits of each text from those of its windows: float [N, C] -> [B, C].

    Args:
        pooling: "mean" or "max" over a text's windows (`windows.POOLINGS`).
    """
    document = tf.cast(document, tf.int32)
    if pooling == "mean":
        return tf.math.unsorted_segment_mean(logits, document, num_documents)
    if pooling == "max":
        return tf.math.unsorted_segment_max(logits, document, num_documents)
    raise ValueError(f"unknown window pooling {pooling!r}; expected one of "
                     f"{list(windows.POOLINGS)}")


def multi_label_outputs(logits, label_names, threshold):
    """What a multi-label classifier serves for its logits float [B, C].

    Returns:
        dict `probabilities` [B, C] (sigmoid, one per label), `predicted` int32 [B, C]
        (1 where the probability is at least `threshold`), `labels` string [B, C] (the
        label's name where predicted, "" elsewhere), `label_names` string [B, C] (the
        name of each column) and `logits`.
    """
    probabilities = tf.sigmoid(logits)
    predicted = probabilities >= threshold
    names = tf.broadcast_to(label_names[None, :], tf.shape(logits))
    return {"probabilities": probabilities, "predicted": tf.cast(predicted, tf.int32),
            "labels": tf.where(predicted, names, ""), "label_names": names,
            "logits": logits}


def byte_to_char_offsets(texts, byte_offsets):
    """Character offsets of UTF-8 byte offsets (dense int [B, N]) into `texts` [B].

    A byte offset that starts a character maps to that character's index; the byte
    length of a text maps to its character length (end offsets are exclusive).
    """
    _, char_starts = tf.strings.unicode_decode_with_offsets(
        texts, "UTF-8", errors="replace")  # [B, (C)] byte offset of each character
    beyond = tf.fill([tf.shape(texts)[0], 1], tf.constant(2**62, tf.int64))
    starts = tf.concat([char_starts.to_tensor(2**62), beyond], axis=1)  # [B, C + 1]
    return tf.searchsorted(starts, tf.cast(byte_offsets, tf.int64), side="left",
                           out_type=tf.int32)


def ragged_byte_to_char(texts, byte_offsets):
    """`byte_to_char_offsets` for ragged offsets [B, (T)]."""
    chars = byte_to_char_offsets(texts, byte_offsets.to_tensor(0))
    return tf.RaggedTensor.from_tensor(tf.cast(chars, tf.int64),
                                       lengths=byte_offsets.row_lengths())


def encode_question_context(tokenizer, max_seq_length, max_query_length, question,
                            context):
    """`[CLS] question [SEP] context [SEP]`; the context is cut to what fits.

    Returns:
        (features, context_start [B] position of the first context token,
         context_length [B], char_starts, char_ends [B, max_seq_length] of the kept
         context tokens, padded with 0). A `question` and `context` of different batch
        sizes fail (when run) naming both.
    """
    texts = assert_inputs_agree(check_text_rank({"question": question, "context": context}),
                                1, "batch sizes")
    question, context = texts["question"], texts["context"]
    query_ids = tokenizer.tokenize(question)
    keep_query = tf.minimum(query_ids.row_lengths(), max_query_length)
    context_ids, starts, ends = tokenizer.tokenize_with_offsets(context)
    keep_context = tf.minimum(context_ids.row_lengths(), max_seq_length - 3 - keep_query)
    segments = [input_layout_graph.truncate_rows(query_ids, keep_query),
                input_layout_graph.truncate_rows(context_ids, keep_context)]
    features = input_layout_graph.pack_inputs(segments, tokenizer.cls_id, tokenizer.sep_id,
                                         max_seq_length)
    shape = [None, max_seq_length]
    char_starts = input_layout_graph.truncate_rows(starts, keep_context).to_tensor(0, shape=shape)
    char_ends = input_layout_graph.truncate_rows(ends, keep_context).to_tensor(0, shape=shape)
    return (features, tf.cast(keep_query + 2, tf.int32), tf.cast(keep_context, tf.int32),
            char_starts, char_ends)


def best_span(start_logits, end_logits, context_start, context_length, max_answer_length):
    """Best (start <= end < start + max_answer_length) span of context tokens.

    Returns:
        (start_token, end_token) int32 [B] indices into the context tokens, score
        (start + end logit) [B]; (0, 0, NO_ANSWER_SCORE) when the context is empty.
    """
    seq_length = tf.shape(start_logits)[1]
    positions = tf.range(seq_length)
    in_context = ((positions[None, :] >= context_start[:, None])
                  & (positions[None, :] < (context_start + context_length)[:, None]))
    span_length = positions[None, :] - positions[:, None]  # [S, S] end - start
    valid = (in_context[:, :, None] & in_context[:, None, :]
             & (span_length >= 0)[None] & (span_length < max_answer_length)[None])
    scores = start_logits[:, :, None] + end_logits[:, None, :]  # [B, S, S]
    scores = tf.where(valid, scores, tf.constant(NO_ANSWER_SCORE, scores.dtype))
    flat = tf.reshape(scores, [tf.shape(scores)[0], -1])
    best = tf.argmax(flat, axis=1, output_type=tf.int32)
    has_answer = context_length > 0
    start = tf.where(has_answer, best // seq_length - context_start, 0)
    end = tf.where(has_answer, best % seq_length - context_start, 0)
    score = tf.where(has_answer, tf.reduce_max(flat, axis=1),
                     tf.constant(NO_ANSWER_SCORE, flat.dtype))
    return start, end, score


def decode_answer(context, char_starts, char_ends, start, end, context_length):
    """Answer text and character offsets in `context` of context tokens start..end.

    Returns:
        dict `answer_start`, `answer_end` (characters, end exclusive; -1 without an
        answer) int32 [B] and `answer_text` string [B].
    """
    first = tf.cast(tf.gather(char_starts, start, batch_dims=1), tf.int32)  # [B]
    last = tf.cast(tf.gather(char_ends, end, batch_dims=1), tf.int32)
    has_answer = context_length > 0
    text = tf.strings.substr(context, first, last - first, unit="UTF8_CHAR")
    return {
        "answer_start": tf.where(has_answer, first, -1),
        "answer_end": tf.where(has_answer, last, -1),
        "answer_text": tf.where(has_answer, text, ""),
    }


def whitespace_words(texts):
    """Python's `str.split()` in core TF ops: words [B, (W)] and their character offsets.

    Returns:
        (words string, starts, ends int32 (end exclusive)), each ragged [B, (W)].
    """
    chars = tf.strings.unicode_decode(texts, "UTF-8", errors="replace")  # [B, (C)]
    code_points = chars.values  # [N]
    spaces = tf.constant(SPACE_CODE_POINTS, tf.int32)
    is_space = tf.reduce_any(tf.equal(code_points[:, None], spaces[None, :]), axis=1)
    rows = tf.cast(chars.value_rowids(), tf.int32)
    positions = tf.range(tf.size(code_points)) - tf.gather(
        tf.cast(chars.row_splits, tf.int32), rows)  # [N] index in its text
    after_space = tf.concat([[True], is_space[:-1]], 0) | tf.equal(positions, 0)
    starts = ~is_space & after_space  # [N] first character of a word
    word_of_char = tf.cumsum(tf.cast(starts, tf.int64)) - 1
    in_word = tf.where(~is_space)[:, 0]
    num_words = tf.reduce_sum(tf.cast(starts, tf.int64))
    word_chars = tf.RaggedTensor.from_value_rowids(
        tf.gather(code_points, in_word), tf.gather(word_of_char, in_word), nrows=num_words)
    first = tf.where(starts)[:, 0]
    word_rows = tf.cast(tf.gather(rows, first), tf.int64)
    word_starts = tf.gather(positions, first)
    word_ends = word_starts + tf.cast(word_chars.row_lengths(), tf.int32)
    nrows = tf.shape(texts, out_type=tf.int64)[0]
    regroup = lambda values: tf.RaggedTensor.from_value_rowids(  # noqa: E731
        values, word_rows, nrows=nrows)
    return (regroup(tf.strings.unicode_encode(word_chars, "UTF-8")), regroup(word_starts),
            regroup(word_ends))


def encode_words(tokenizer, max_seq_length, text):
    """Whitespace words -> pieces, `[CLS] pieces [SEP]`, as the NER task packs a sentence.

    A word the tokenizer drops becomes `[UNK]`; each word keeps at most
    `max_seq_length - 2` pieces; words whose first piece does not fit get no tag.

    Returns:
        (features, words string [B, W], word character starts / ends int32 [B, W],
         first_positions int32 [B, W] (position of each word's first piece in
         input_ids), tagged bool [B, W]) with W = max_seq_length - 2.
    """
    max_tokens = max_seq_length - 2
    words, word_starts, word_ends = whitespace_words(check_text_rank({"text": text})["text"])
    pieces = tokenizer.tokenize(words.values)  # [N_words, (P)]
    unk = tf.fill([pieces.nrows(), 1], tf.constant(tokenizer.unk_id, tf.int64))
    pieces = tf.concat([pieces, tf.RaggedTensor.from_tensor(unk)], axis=1)
    piece_counts = tf.clip_by_value(pieces.row_lengths() - 1, 1, max_tokens)
    pieces = input_layout_graph.truncate_rows(pieces, piece_counts)
    sentence_pieces = tf.RaggedTensor.from_row_splits(pieces, words.row_splits)
    sentence_pieces = sentence_pieces.merge_dims(1, 2)  # [B, (T)]
    features = input_layout_graph.pack_inputs(
        input_layout_graph.truncate_ragged_segments(sentence_pieces, None, max_seq_length),
        tokenizer.cls_id, tokenizer.sep_id, max_seq_length)
    counts = tf.RaggedTensor.from_row_splits(piece_counts, words.row_splits)
    counts = counts.to_tensor(0)  # [B, W_batch]
    first = tf.math.cumsum(counts, axis=1, exclusive=True)
    shape = [None, max_tokens]
    present = tf.ones_like(words.values, tf.bool)
    present = tf.RaggedTensor.from_row_splits(present, words.row_splits).to_tensor(
        False, shape=shape)
    first = tf.RaggedTensor.from_tensor(first).to_tensor(0, shape=shape)
    tagged = present & (first < max_tokens)
    return (features, words.to_tensor("", shape=shape), word_starts.to_tensor(0, shape=shape),
            word_ends.to_tensor(0, shape=shape),
            tf.cast(tf.where(tagged, first + 1, 0), tf.int32), tagged)


def ids_spec(max_seq_length, dtype=tf.int32):
    """TensorSpecs of the three model inputs [B, max_seq_length]."""
    return {name: tf.TensorSpec([None, max_seq_length], dtype, name)
            for name in FEATURE_NAMES}


def parse_examples(serialized, max_seq_length):
    """Serialized tf.Examples [B] -> int32 model inputs (int64 features of length S)."""
    spec = {name: tf.io.FixedLenFeature([max_seq_length], tf.int64) for name in FEATURE_NAMES}
    features = tf.io.parse_example(serialized, spec)
    return {name: tf.cast(value, tf.int32) for name, value in features.items()}


def id_signatures(module, max_seq_length):
    """`serve_ids` and `serve_examples` concrete functions of `module.logits`.

    `serve_ids` inputs of different batch sizes fail (when run) naming both."""
    @tf.function(autograph=False, input_signature=[ids_spec(max_seq_length)])
    def serve_ids(features):
        return module.logits(check_input_shapes(features))

    @tf.function(autograph=False,
                 input_signature=[tf.TensorSpec([None], tf.string, "examples")])
    def serve_examples(examples):
        return module.logits(parse_examples(examples, max_seq_length))

    return {"serve_ids": serve_ids.get_concrete_function(),
            "serve_examples": serve_examples.get_concrete_function()}
