"""SQuAD v1.1 / v2.0 data side: JSON reading into examples.

Behaves as google-research/bert `run_squad.py`'s `read_squad_examples`: it splits each
context on white space (space, tab, CR, LF and U+202F) into `doc_tokens` and keeps
`char_to_word_offset`, so that an answer's `answer_start` maps to word indices. The
windowed features of the examples are `features.convert_examples_to_features`'.

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
# Re-exported: docs/library.md and docs/finetuning.md name this module for the features.
from bert_tf.tasks.squad.features import (  # noqa: F401
    InputFeatures, convert_examples_to_features)

logger = logging.getLogger(__name__)


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
