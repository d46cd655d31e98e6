"""SQuAD v1.1 / v2.0 data side: JSON reading, examples and windowed features.

Behaves as google-research/bert `run_squad.py`:

* `read_squad_examples` splits each context on white space (space, tab, CR, LF and
  U+202F) into `doc_tokens` and keeps `char_to_word_offset`, so that an answer's
  `answer_start` maps to word indices.
* `convert_examples_to_features` splits words into WordPieces, projects the answer onto
  sub-tokens and tightens it to the annotated text (`_improve_answer_span`), truncates
  the question to `max_query_length` and cuts long contexts into windows of
  `max_seq_length - len(query) - 3` tokens that advance by at most `doc_stride`. Every
  context token records whether this window gives it its maximum context
  (`_check_is_max_context`). `[CLS] question [SEP] context [SEP]`, segment 0 / 1.
  During training an answer outside the window, and a v2.0 unanswerable question, point
  at `[CLS]` (position 0).

Differences from the original, all for input it would crash on: JSON that is not
SQuAD-shaped raises `SquadFormatError` naming the file and the path of the bad element
(`data[3].paragraphs[0].qas[5]: missing "id"`); a training question with several
answers (a dev file used for training) uses its first answer instead of raising; an
answer whose offsets fall outside the context is counted and skipped like an answer
whose text is not at `answer_start`.
"""

import collections
import dataclasses
import json
import logging
import os
from typing import Optional

from bert_tf.io import fileio
from bert_tf.text import input_layout
from bert_tf.train import progress
from bert_tf.text.windows import make_doc_spans

logger = logging.getLogger(__name__)

FIRST_UNIQUE_ID = 1000000000


class SquadFormatError(ValueError):
    """The JSON is not SQuAD-shaped; the message names the file and the element."""


@dataclasses.dataclass
class SquadExample:
    """One question with its white-space tokenised context.

    `start_position` / `end_position` are word indices into `doc_tokens` (training only;
    -1 for a v2.0 unanswerable question).
    """
    qas_id: str
    question_text: str
    doc_tokens: list
    orig_answer_text: Optional[str] = None
    start_position: Optional[int] = None
    end_position: Optional[int] = None
    is_impossible: bool = False


@dataclasses.dataclass
class InputFeatures:
    """One window of one example, ready for the model.

    `token_to_orig_map` and `token_is_max_context` are keyed by the position in `tokens`
    of each context token.
    """
    unique_id: int
    example_index: int
    doc_span_index: int
    tokens: list
    token_to_orig_map: dict
    token_is_max_context: dict
    input_ids: list
    input_mask: list
    segment_ids: list
    start_position: Optional[int] = None
    end_position: Optional[int] = None
    is_impossible: bool = False


def is_whitespace(char):
    """The original's white space for splitting contexts into words."""
    return char in (" ", "\t", "\r", "\n") or ord(char) == 0x202F


def split_context(paragraph_text):
    """Splits a context on white space.

    Returns:
      (doc_tokens, char_to_word_offset): the words, and for every character of the text
      the index of the word it belongs to (white space belongs to the word before it).
    """
    doc_tokens = []
    char_to_word_offset = []
    prev_is_whitespace = True
    for char in paragraph_text:
        if is_whitespace(char):
            prev_is_whitespace = True
        else:
            if prev_is_whitespace:
                doc_tokens.append(char)
            else:
                doc_tokens[-1] += char
            prev_is_whitespace = False
        char_to_word_offset.append(len(doc_tokens) - 1)
    return doc_tokens, char_to_word_offset


def require_field(container, key, expected_type, path, where):
    """Returns container[key], checking presence and type; errors name `where`."""
    if not isinstance(container, dict):
        raise SquadFormatError(f"{path}: {where}: expected a JSON object, "
                               f"got {type(container).__name__}")
    if key not in container:
        raise SquadFormatError(f'{path}: {where}: missing "{key}"')
    value = container[key]
    # bool is an int in Python; a JSON true is not an answer_start.
    if not isinstance(value, expected_type) or isinstance(value, bool) != (
            expected_type is bool):
        raise SquadFormatError(f'{path}: {where}: "{key}" must be '
                               f"{expected_type.__name__}, got {type(value).__name__}")
    return value


def load_squad_json(input_file):
    """Reads a SQuAD JSON file and returns its `data` list (file named on errors).

    Read through `fileio.iter_text_lines`: a file that is not UTF-8 text (binary) is
    named with line and byte, invalid JSON with its line and column.
    """
    if not os.path.isfile(input_file):
        raise FileNotFoundError(f"SQuAD file not found: {input_file}")
    try:
        text = "".join(line for _, line in fileio.iter_text_lines(input_file))
        input_json = json.loads(text)
    except json.JSONDecodeError as error:
        raise SquadFormatError(f"{input_file}: not valid JSON (line {error.lineno}, "
                               f"column {error.colno}: {error.msg})") from None
    except ValueError as error:  # not UTF-8 text
        raise SquadFormatError(str(error)) from None
    return require_field(input_json, "data", list, input_file, "top level")


def require_text(container, key, path, where):
    """`require_field` for a string that must hold more than white space."""
    value = require_field(container, key, str, path, where)
    if not value.strip():
        raise SquadFormatError(f'{path}: {where}: "{key}" is empty')
    return value


def _answer_word_span(qa, context, char_to_word_offset, doc_tokens, path, where):
    """Word span of the first answer, or None when its text is not at answer_start."""
    answers = require_field(qa, "answers", list, path, where)
    if not answers:
        hint = (" (an unanswerable SQuAD 2.0 question: set version_2_with_negative)"
                if qa.get("is_impossible") is True else "")
        raise SquadFormatError(f'{path}: {where}: "answers" is empty; training needs '
                               f"an answer{hint}")
    answer = answers[0]
    text = require_field(answer, "text", str, path, f"{where}.answers[0]")
    offset = require_field(answer, "answer_start", int, path, f"{where}.answers[0]")
    end_char = offset + len(text) - 1
    if not text or offset < 0 or end_char >= len(context):
        return None
    start_word = char_to_word_offset[offset]
    end_word = char_to_word_offset[end_char]
    actual_text = " ".join(doc_tokens[start_word:end_word + 1])
    cleaned_answer_text = " ".join(text.split())
    if actual_text.find(cleaned_answer_text) == -1:
        return None
    return text, start_word, end_word


def _paragraph_examples(paragraph, path, where, is_training, version_2_with_negative,
                        stats, seen_ids):
    """Examples of one paragraph (see `read_squad_examples`); `seen_ids` maps each id
    read so far to its element."""
    qas = require_field(paragraph, "qas", list, path, where)
    context = (require_text(paragraph, "context", path, where) if qas
               else require_field(paragraph, "context", str, path, where))
    doc_tokens, char_to_word_offset = split_context(context)
    examples = []
    for qa_index, qa in enumerate(qas):
        qa_where = f"{where}.qas[{qa_index}]"
        qas_id = require_text(qa, "id", path, qa_where)
        if qas_id in seen_ids:
            raise SquadFormatError(f'{path}: {qa_where}: "id" {qas_id!r} is also the id of '
                                   f"{seen_ids[qas_id]}; predictions are keyed by id, so "
                                   "each question needs its own")
        seen_ids[qas_id] = qa_where
        question_text = require_text(qa, "question", path, qa_where)
        stats["questions"] += 1
        example = SquadExample(qas_id, question_text, doc_tokens)
        if is_training:
            if version_2_with_negative and "is_impossible" in qa:
                example.is_impossible = require_field(qa, "is_impossible", bool,
                                                      path, qa_where)
            if example.is_impossible:
                example.start_position = example.end_position = -1
                example.orig_answer_text = ""
            else:
                if len(qa.get("answers") or []) > 1:
                    stats["first_of_several_answers"] += 1
                span = _answer_word_span(qa, context, char_to_word_offset, doc_tokens,
                                         path, qa_where)
                if span is None:
                    stats["skipped_answer_not_found"] += 1
                    logger.warning("%s: %s: answer text not found at answer_start; "
                                   "question skipped", path, qa_where)
                    continue
                (example.orig_answer_text, example.start_position,
                 example.end_position) = span
        examples.append(example)
    return examples


def read_squad_examples(input_file, is_training, version_2_with_negative=False,
                        stats=None):
    """Reads a SQuAD JSON file into `SquadExample`s.

    Args:
      input_file: path of a SQuAD v1.1 or v2.0 JSON file.
      is_training: read and project the answers (the first answer of each question).
        An answer whose text is not at its `answer_start` is counted in
        `stats["skipped_answer_not_found"]` and its question skipped.
      version_2_with_negative: honour `is_impossible` (training only).
      stats: optional `collections.Counter` that receives `questions`,
        `skipped_answer_not_found` and `first_of_several_answers`.

    Returns:
      The list of examples, in file order.

    Raises:
      SquadFormatError: the JSON is not SQuAD-shaped (message: file and element path).
    """
    return squad_examples(load_squad_json(input_file), input_file, is_training,
                          version_2_with_negative, stats)


def squad_examples(data, path, is_training, version_2_with_negative=False, stats=None):
    """`read_squad_examples` of a SQuAD file's `data` list already in memory (`path`
    names it in errors and warnings)."""
    stats = collections.Counter() if stats is None else stats
    examples, seen_ids = [], {}
    for entry_index, entry in enumerate(data):
        where = f"data[{entry_index}]"
        paragraphs = require_field(entry, "paragraphs", list, path, where)
        for paragraph_index, paragraph in enumerate(paragraphs):
            examples.extend(_paragraph_examples(
                paragraph, path, f"{where}.paragraphs[{paragraph_index}]",
                is_training, version_2_with_negative, stats, seen_ids))
    if stats["skipped_answer_not_found"]:
        logger.warning("%s: %d of %d questions skipped: answer text not found at "
                       "answer_start", path, stats["skipped_answer_not_found"],
                       stats["questions"])
    return examples


def _improve_answer_span(doc_tokens, input_start, input_end, tokenizer,
                         orig_answer_text):
    """Tightens a sub-token span to the one that tokenises like the answer text.

    The word-level span of "(1895-1943)." for the answer "1895" covers the whole word;
    this finds the smallest sub-span whose tokens equal the answer's tokens.
    """
    tok_answer_text = " ".join(tokenizer.tokenize(orig_answer_text))
    for new_start in range(input_start, input_end + 1):
        for new_end in range(input_end, new_start - 1, -1):
            text_span = " ".join(doc_tokens[new_start:(new_end + 1)])
            if text_span == tok_answer_text:
                return new_start, new_end
    return input_start, input_end


def _check_is_max_context(doc_spans, cur_span_index, position):
    """Whether `cur_span_index` is the window with the most context around `position`.

    Score of a window: min(left context, right context) + 0.01 * window length; the
    first best window wins ties.
    """
    best_score = None
    best_span_index = None
    for span_index, doc_span in enumerate(doc_spans):
        end = doc_span.start + doc_span.length - 1
        if position < doc_span.start or position > end:
            continue
        num_left_context = position - doc_span.start
        num_right_context = end - position
        score = min(num_left_context, num_right_context) + 0.01 * doc_span.length
        if best_score is None or score > best_score:
            best_score = score
            best_span_index = span_index
    return cur_span_index == best_span_index


def _tokenize_words(tokenizer, texts):
    """WordPieces of every text; repeated texts are tokenised once.

    Per-word calls of the Python tokenizer with a cache beat the batch (graph) path
    here: context words repeat a lot and are short.
    """
    cache = {}
    pieces = []
    for text in texts:
        if text not in cache:
            cache[text] = tokenizer.tokenize(text)
        pieces.append(cache[text])
    return pieces


def _sub_token_contexts(tokenizer, examples):
    """Sub-token view of every distinct context, keyed by its words.

    Returns:
      dict: tuple(doc_tokens) -> (tok_to_orig_index, orig_to_tok_index, all_doc_tokens).
    """
    keys = list(dict.fromkeys(tuple(example.doc_tokens) for example in examples))
    pieces = _tokenize_words(tokenizer, [word for key in keys for word in key])
    contexts = {}
    offset = 0
    for key in keys:
        tok_to_orig_index, orig_to_tok_index, all_doc_tokens = [], [], []
        for i, sub_tokens in enumerate(pieces[offset:offset + len(key)]):
            orig_to_tok_index.append(len(all_doc_tokens))
            tok_to_orig_index.extend([i] * len(sub_tokens))
            all_doc_tokens.extend(sub_tokens)
        offset += len(key)
        contexts[key] = (tok_to_orig_index, orig_to_tok_index, all_doc_tokens)
    return contexts


def _answer_sub_token_span(example, tokenizer, orig_to_tok_index, all_doc_tokens):
    """The training answer as (start, end) sub-token indices; (-1, -1) if impossible."""
    if example.is_impossible:
        return -1, -1
    tok_start = orig_to_tok_index[example.start_position]
    if example.end_position < len(example.doc_tokens) - 1:
        tok_end = orig_to_tok_index[example.end_position + 1] - 1
    else:
        tok_end = len(all_doc_tokens) - 1
    return _improve_answer_span(all_doc_tokens, tok_start, tok_end, tokenizer,
                                example.orig_answer_text)


def _window_context(doc_spans, doc_span_index, tok_to_orig_index, num_query_tokens):
    """token_to_orig_map, token_is_max_context of one window's context tokens, keyed by
    their position in `[CLS] question [SEP] context [SEP]`."""
    doc_span = doc_spans[doc_span_index]
    doc_offset = num_query_tokens + 2
    token_to_orig_map = {}
    token_is_max_context = {}
    for i in range(doc_span.length):
        split_token_index = doc_span.start + i
        token_to_orig_map[doc_offset + i] = tok_to_orig_index[split_token_index]
        token_is_max_context[doc_offset + i] = _check_is_max_context(
            doc_spans, doc_span_index, split_token_index)
    return token_to_orig_map, token_is_max_context


def _window_positions(doc_span, answer_span, num_query_tokens):
    """Training target of one window: answer positions, or (0, 0) = [CLS] when the
    answer is not wholly inside the window or the question is unanswerable."""
    tok_start, tok_end = answer_span
    doc_end = doc_span.start + doc_span.length - 1
    if tok_start < 0 or not (tok_start >= doc_span.start and tok_end <= doc_end):
        return 0, 0
    doc_offset = num_query_tokens + 2
    return (tok_start - doc_span.start + doc_offset,
            tok_end - doc_span.start + doc_offset)


def check_lengths(max_seq_length, max_query_length):
    """Rejects lengths that leave no room for the question or the context."""
    if max_query_length < 1:
        raise ValueError(f"max_query_length must be at least 1, got {max_query_length}: "
                         "with none, every question would be empty")
    if max_seq_length <= max_query_length + 3:
        raise ValueError(
            f"max_seq_length ({max_seq_length}) must be greater than max_query_length "
            f"({max_query_length}) + 3 so that windows hold context tokens")


def convert_examples_to_features(examples, tokenizer, max_seq_length, doc_stride,
                                 max_query_length, is_training):
    """Turns examples into windowed `InputFeatures` (see the module docstring).

    Args:
      examples: `SquadExample`s; for training they carry word-level answer positions.
      tokenizer: a `FullTokenizer` (or anything with `tokenize` and
        `convert_tokens_to_ids`).
      max_seq_length: window length in tokens, `[CLS]` and both `[SEP]` included.
      doc_stride: largest step between the starts of consecutive windows.
      max_query_length: questions are truncated to this many tokens.
      is_training: fill `start_position` / `end_position`.

    Returns:
      A list of features with unique ids from 1000000000, in example order.
    """
    check_lengths(max_seq_length, max_query_length)
    features = []
    shown = progress.PhaseProgress(  # before evaluation too: never silent for long
        f"Building {'training' if is_training else 'prediction'} features", len(examples),
        unit="questions", every_seconds=10.0)
    shown.start()
    contexts = _sub_token_contexts(tokenizer, examples)
    query_tokens_all = _tokenize_words(tokenizer, [e.question_text for e in examples])
    for example_index, example in enumerate(examples):
        shown.update(1)
        query_tokens = query_tokens_all[example_index][:max_query_length]
        tok_to_orig_index, orig_to_tok_index, all_doc_tokens = contexts[
            tuple(example.doc_tokens)]
        answer_span = None
        if is_training:
            answer_span = _answer_sub_token_span(example, tokenizer, orig_to_tok_index,
                                                 all_doc_tokens)
        max_tokens_for_doc = max_seq_length - len(query_tokens) - 3
        doc_spans = make_doc_spans(len(all_doc_tokens), max_tokens_for_doc, doc_stride)
        for doc_span_index, doc_span in enumerate(doc_spans):
            window = all_doc_tokens[doc_span.start:doc_span.start + doc_span.length]
            tokens, (input_ids, input_mask, segment_ids) = input_layout.pack_tokens(
                [query_tokens, window], tokenizer.convert_tokens_to_ids, max_seq_length)
            token_to_orig_map, token_is_max_context = _window_context(
                doc_spans, doc_span_index, tok_to_orig_index, len(query_tokens))
            start_position = end_position = None
            if is_training:
                start_position, end_position = _window_positions(
                    doc_span, answer_span, len(query_tokens))
            features.append(InputFeatures(
                unique_id=FIRST_UNIQUE_ID + len(features), example_index=example_index,
                doc_span_index=doc_span_index, tokens=tokens,
                token_to_orig_map=token_to_orig_map,
                token_is_max_context=token_is_max_context,
                input_ids=input_ids, input_mask=input_mask, segment_ids=segment_ids,
                start_position=start_position,
                end_position=end_position, is_impossible=example.is_impossible))
    shown.finish()
    return features

