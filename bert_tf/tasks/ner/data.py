"""Named-entity recognition data: CoNLL column files, IOB1/IOB2, sub-token alignment.

`read_tagged_file` reads CoNLL-2003 files (`-DOCSTART-` lines, blank lines between
sentences, the tag in the last column) and any token-per-line file with a chosen tag
column. Tags are converted to IOB2 for training (`to_iob2`); `detect_scheme` remembers
whether the file was IOB1 so predictions can be written back the same way (`to_iob1`).
conlleval reads both schemes into the same chunks.

`convert_sentences_to_features` puts each word's label on its first sub-token; the other
sub-tokens (and `[CLS]`, `[SEP]`, padding) get weight 0, so they count neither in the
loss nor in the predictions. A sentence longer than `max_seq_length - 2` sub-tokens is
split into overlapping windows of whole words (`plan_windows`); each word is scored in
exactly one window, the one where it has the most context on both sides, so
`decode_predictions` gives every word exactly one tag.
"""

import dataclasses
import os
from typing import Optional, Sequence

import numpy as np
from absl import logging

from bert_tf.io import fileio
from bert_tf.runs import column_roles
from bert_tf.text import input_layout
from bert_tf.train import progress

DOCSTART = "-DOCSTART-"


@dataclasses.dataclass
class Sentence:
    """Words of one sentence with their tags (None when the file has no tags)."""
    words: list
    tags: Optional[list]
    source: str  # file path
    lines: list  # line number of each word


def read_tagged_file(path: str, tag_column: int = -1, word_column: int = 0,
                     has_tags: bool = True) -> list:
    """Reads a token-per-line file into `Sentence`s.

    Args:
      path: the file; blank lines separate sentences, `-DOCSTART-` lines are skipped.
      tag_column: index of the tag column (negative counts from the end; CoNLL: -1).
      word_column: index of the word column.
      has_tags: False for files to tag (the tag column is not read).

    Raises:
      FileNotFoundError: naming the file.
      ValueError: naming file and line for a missing tag, a column outside the line, or a
        tag column that is the word column (`column_roles.check_distinct`).
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"tagged file not found: {path}")
    sentences, words, tags, lines = [], [], [], []

    def close_sentence():
        if words:
            sentences.append(Sentence(list(words), list(tags) if has_tags else None, path,
                                      list(lines)))
        words.clear(), tags.clear(), lines.clear()

    for line_number, line in fileio.iter_text_lines(path):
        fields = line.split()
        if not fields or fields[0] == DOCSTART:
            close_sentence()
            continue
        words.append(_field(fields, word_column, path, line_number, "word"))
        lines.append(line_number)
        if has_tags:
            if len(fields) < 2:
                raise ValueError(f"{path}:{line_number}: missing tag: the line holds only "
                                 f"{fields[0]!r}; expected the tag in column {tag_column}")
            tags.append(_field(fields, tag_column, path, line_number, "tag"))
            column_roles.check_distinct(  # -2 of a two-column line is the word column
                {"tag_column": tag_column, "word_column": word_column}, len(fields),
                f"{path}:{line_number}: ")
    close_sentence()
    return sentences


def _field(fields, index, path, line_number, what):
    if not -len(fields) <= index < len(fields):
        raise ValueError(f"{path}:{line_number}: {what} column {index} is outside the line, "
                         f"which has {len(fields)} columns")
    return fields[index]


def _split(tag: str):
    prefix, _, chunk_type = tag.partition("-")
    return (prefix, chunk_type) if chunk_type else (tag, "")


def _continues(previous: str, chunk_type: str) -> bool:
    """True when `previous` is a B-/I- tag of `chunk_type` (so I- continues a chunk)."""
    prefix, previous_type = _split(previous)
    return prefix in ("B", "I") and previous_type == chunk_type


def to_iob2(tags: Sequence[str]) -> list:
    """IOB1 (or IOB2) tags to IOB2: an I- tag that starts a chunk becomes B-."""
    output, previous = [], "O"
    for tag in tags:
        prefix, chunk_type = _split(tag)
        if prefix == "I" and chunk_type and not _continues(previous, chunk_type):
            tag = "B-" + chunk_type
        output.append(tag)
        previous = tag
    return output


def to_iob1(tags: Sequence[str]) -> list:
    """IOB2 tags to IOB1: B- stays only right after a chunk of the same type."""
    output, previous = [], "O"
    for tag in tags:
        prefix, chunk_type = _split(tag)
        if prefix == "B" and chunk_type and not _continues(previous, chunk_type):
            output.append("I-" + chunk_type)
        else:
            output.append(tag)
        previous = tag
    return output


def detect_scheme(sentences: Sequence[Sentence]) -> str:
    """"iob1" when some I- tag starts a chunk (as in the original CoNLL-2003 files)."""
    for sentence in sentences:
        if sentence.tags and to_iob2(sentence.tags) != sentence.tags:
            return "iob1"
    return "iob2"


CHUNK_PREFIXES = ("B", "I", "E", "S")


def has_chunk_prefixes(tags, source: str = "the tags") -> bool:
    """Whether `tags` mark chunks with B-/I- (E-, S-) prefixes, as CoNLL-2003's do.

    False for plain tags (`PER`, `LOC` and `O`): conlleval then scores each token as
    its own chunk (its raw mode, `-r`) instead of finding no chunk at all.

    Raises:
      ValueError: for prefixed and plain tags in one set (neither way reads both).
    """
    others = sorted(set(tags) - {"O"})
    prefixed = [tag for tag in others if _split(tag)[1] and _split(tag)[0] in CHUNK_PREFIXES]
    if prefixed and len(prefixed) != len(others):
        plain = next(tag for tag in others if tag not in prefixed)
        raise ValueError(f"{source}: tag {plain!r} has no B-/I- prefix but {prefixed[0]!r} "
                         "has one; use one scheme for every tag (IOB: B-X, I-X and O; or "
                         "plain tags without prefixes, scored token by token)")
    return bool(prefixed)


def build_label_list(sentences: Sequence[Sentence]) -> list:
    """Label list from training data (IOB2 tags): "O" first, then sorted."""
    found = {tag for sentence in sentences for tag in to_iob2(sentence.tags)}
    return (["O"] if "O" in found else []) + sorted(found - {"O"})


def plan_windows(piece_counts: Sequence[int], max_tokens: int, stride: int):
    """Windows of whole words and the window that scores each word.

    Args:
      piece_counts: sub-tokens per word (each at most `max_tokens`).
      max_tokens: sub-tokens per window (max_seq_length - 2).
      stride: sub-tokens between window starts (at least one word is always advanced).

    Returns:
      (windows, owner): `windows` is a list of (first_word, end_word) covering all words
      with overlaps; `owner[w]` is the index of the window where word `w` has the most
      context (ties: the earlier window).
    """
    offsets = np.concatenate([[0], np.cumsum(piece_counts)]).astype(int)
    num_words, windows, start = len(piece_counts), [], 0
    while True:
        end = start
        while end < num_words and offsets[end + 1] - offsets[start] <= max_tokens:
            end += 1
        windows.append((start, end))
        if end >= num_words:
            break
        next_start = start + 1
        while next_start < end and offsets[next_start] < offsets[start] + stride:
            next_start += 1
        start = next_start
    owner, best = [0] * num_words, [-1] * num_words
    for index, (first, end) in enumerate(windows):
        for word in range(first, end):
            context = min(offsets[word] - offsets[first], offsets[end] - offsets[word + 1])
            if context > best[word]:
                best[word], owner[word] = context, index
    return windows, owner


@dataclasses.dataclass
class NerFeatures:
    """Arrays of all windows: [N, S] ids/mask/labels/weights; `word_ids` -1 where unscored."""
    input_ids: np.ndarray
    input_mask: np.ndarray
    segment_ids: np.ndarray
    label_ids: np.ndarray
    label_weights: np.ndarray
    word_ids: np.ndarray
    sentence_index: np.ndarray  # [N]
    unknown_tags: list  # (source, line, tag) of gold tags outside the label list

    def model_inputs(self) -> dict:
        return {"input_ids": self.input_ids, "input_mask": self.input_mask,
                "segment_ids": self.segment_ids}


def _word_pieces(sentences, tokenizer, max_tokens):
    all_words = [word for sentence in sentences for word in sentence.words]
    pieces = tokenizer.tokenize_batch(all_words) if all_words else []
    # A word the tokenizer drops (control characters) still needs a position for its tag.
    pieces = [(word_pieces or ["[UNK]"])[:max_tokens] for word_pieces in pieces]
    output, position = [], 0
    for sentence in sentences:
        output.append(pieces[position:position + len(sentence.words)])
        position += len(sentence.words)
    return output


def convert_sentences_to_features(sentences, label_list, max_seq_length, tokenizer,
                                  doc_stride=64, phase="Building features") -> NerFeatures:
    """Windows of `[CLS] sub-tokens [SEP]` with labels on each word's first sub-token.

    Args:
      sentences: `Sentence`s (tags None where the file has none).
      label_list: The tags in label-id order; a gold tag outside it gets weight 0.
      max_seq_length: Window length in sub-tokens, `[CLS]` and `[SEP]` included.
      tokenizer: A `FullTokenizer` (or anything with `tokenize_batch` and
        `convert_tokens_to_ids`).
      doc_stride: Largest step, in sub-tokens, between the starts of a long sentence's
        windows.
      phase: How the progress lines start ("Building evaluation features"): one as the
        building starts, one every 10 s, one at the end (a CoNLL-2003 split takes tens
        of seconds).

    Returns:
      The `NerFeatures` of every window, in sentence order.
    """
    if max_seq_length < 3:
        raise ValueError(f"max_seq_length must be at least 3, got {max_seq_length}")
    max_tokens = max_seq_length - 2
    label_map = {label: index for index, label in enumerate(label_list)}
    cls_id, sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
    rows, unknown = [], []
    shown = progress.PhaseProgress(phase, len(sentences), unit="sentences",
                                   every_seconds=10.0)
    shown.start()  # the tokenizing comes first: no unit is counted before it ends
    for sentence_index, (sentence, pieces) in enumerate(
            zip(sentences, _word_pieces(sentences, tokenizer, max_tokens))):
        shown.update(1)
        tags = to_iob2(sentence.tags) if sentence.tags is not None else None
        windows, owner = plan_windows([len(p) for p in pieces], max_tokens,
                                      max(1, doc_stride))
        for window_index, (first, end) in enumerate(windows):
            ids, labels, weights, word_ids = [], [], [], []
            for word in range(first, end):
                scored = owner[word] == window_index
                ids.extend(tokenizer.convert_tokens_to_ids(pieces[word]))
                label, weight = 0, 0
                if scored and tags is not None:
                    if tags[word] in label_map:
                        label, weight = label_map[tags[word]], 1
                    else:
                        unknown.append((sentence.source, sentence.lines[word], tags[word]))
                labels.extend([label] + [0] * (len(pieces[word]) - 1))
                weights.extend([weight] + [0] * (len(pieces[word]) - 1))
                word_ids.extend([word if scored else -1] + [-1] * (len(pieces[word]) - 1))
            rows.append((sentence_index,
                         *input_layout.pack_segments([ids], cls_id, sep_id, max_seq_length),
                         input_layout.pack_values([labels], max_seq_length),
                         input_layout.pack_values([weights], max_seq_length),
                         input_layout.pack_values([word_ids], max_seq_length, fill=-1)))
    shown.finish()
    if unknown:
        source, line, tag = unknown[0]
        logging.warning("%d gold tags are not in the label list %s (first: %r at %s:%d); "
                        "they are left out of the loss but scored by conlleval",
                        len(unknown), label_list, tag, source, line)
    return _pack(rows, max_seq_length, unknown)


def _pack(rows, max_seq_length, unknown) -> NerFeatures:
    """NerFeatures of rows (sentence index, then the six packed lists of a window)."""
    columns = [np.array([row[index] for row in rows], np.int32).reshape(-1, max_seq_length)
               for index in range(1, 7)]
    return NerFeatures(*columns, np.array([row[0] for row in rows], np.int32), unknown)


def decode_predictions(features: NerFeatures, predicted_ids: np.ndarray,
                       sentences: Sequence[Sentence], label_list: Sequence[str]) -> list:
    """Tags per word of each sentence from per-position predicted label ids [N, S].

    Raises:
      ValueError: when a predicted id is outside the label list, or a word got no tag.
    """
    predicted_ids = np.asarray(predicted_ids)
    tags = [[None] * len(sentence.words) for sentence in sentences]
    for row, sentence_index in enumerate(features.sentence_index):
        positions = np.flatnonzero(features.word_ids[row] >= 0)
        for position in positions:
            label_id = int(predicted_ids[row, position])
            if not 0 <= label_id < len(label_list):
                raise ValueError(f"predicted label id {label_id} is not in the label list of "
                                 f"{len(label_list)} labels {list(label_list)}")
            tags[sentence_index][features.word_ids[row, position]] = label_list[label_id]
    for sentence, sentence_tags in zip(sentences, tags):
        if None in sentence_tags:
            word = sentence_tags.index(None)
            raise ValueError(f"{sentence.source}:{sentence.lines[word]}: word "
                             f"{sentence.words[word]!r} got no prediction")
    return tags


def format_predictions(sentences: Sequence[Sentence], predicted_tags: Sequence[list],
                       scheme: str = "iob2") -> str:
    """conlleval input: `word gold predicted` (or `word predicted` without gold tags).

    Predicted tags are written in `scheme` ("iob1" or "iob2"), the gold file's scheme.
    """
    lines = []
    for sentence, predicted in zip(sentences, predicted_tags):
        predicted = to_iob1(predicted) if scheme == "iob1" else to_iob2(predicted)
        for index, word in enumerate(sentence.words):
            gold = f" {sentence.tags[index]}" if sentence.tags is not None else ""
            lines.append(f"{word}{gold} {predicted[index]}\n")
        lines.append("\n")
    return "".join(lines)
