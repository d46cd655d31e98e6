"""What `TextQuestionAnswerer` takes, checked before any work, as the SQuAD reader's input.

Questions and contexts are columns of non-empty texts of one length (a list, numpy array
or pandas column; a str is one row). An answer to train on is its text and the index of
its first character in its context, as SQuAD's `{"text": ..., "answer_start": ...}` (a
dict whose values may be lists, as SQuAD's and Hugging Face datasets' answers: the first
is used, as bert-run-squad trains on the first answer), a tuple `(text, answer_start)`,
or, for a SQuAD 2.0 model only, None (no answer). `answers` may also be a dict of two
columns, `{"text": [...], "answer_start": [...]}`.

The rows become the `data` list of a SQuAD file (`squad_json_data`), which the runner's
own reader (`bert_tf.tasks.squad.data.squad_examples`) turns into its examples.
"""

import collections.abc

import numpy as np

from bert_tf.tasks.squad import data as squad_data
from bert_tf.text_models import inputs

ROW_ID = "row{}"  # the question ids of the in-memory SQuAD data: row0, row1, ...


def question_columns(questions, contexts):
    """`questions` and `contexts` as two lists of non-empty str of one length.

    Raises:
      TypeError / ValueError: naming the column, the row and what was expected.
    """
    questions = inputs.text_column(questions, "questions")
    contexts = inputs.text_column(contexts, "contexts")
    if len(questions) != len(contexts):
        raise ValueError(f"questions has {len(questions)} texts but contexts has "
                         f"{len(contexts)}: expected one context per question")
    return questions, contexts


def answer_rows(answers, num_rows):
    """`answers` as a list of one answer per row (a dict of columns: zipped)."""
    if isinstance(answers, collections.abc.Mapping):
        answers = _zipped(answers)
    if answers is None or isinstance(answers, (str, bytes)) or not hasattr(answers, "__len__"):
        raise TypeError(f"answers is {type(answers).__name__}: expected a list (or array, "
                        "pandas column) of answers, one per question")
    rows = list(answers)
    if len(rows) != num_rows:
        raise ValueError(f"answers has {len(rows)} answers but questions has {num_rows}: "
                         "expected one answer per question")
    return rows


def _zipped(columns):
    """A dict of columns ("text", and "answer_start" to train on) as a list of rows."""
    texts = columns.get("text")
    starts = columns.get("answer_start", [None] * len(texts or ()))
    if any(isinstance(column, (str, bytes)) or not hasattr(column, "__len__")
           for column in (texts, starts)) or len(texts) != len(starts):
        raise ValueError("answers is a dict: expected two columns of one length, "
                         "{'text': [...], 'answer_start': [...]}, one answer a row")
    return [{"text": text, "answer_start": start} for text, start in zip(texts, starts)]


def training_answers(answers, contexts, no_answer_allowed):
    """(text, answer_start) of each row's answer, or None for no answer (SQuAD 2.0).

    Raises:
      TypeError / ValueError: an answer of another shape, empty, or whose text is not
        at its answer_start in its context (naming the row and what is there).
    """
    checked = []
    for row, answer in enumerate(answer_rows(answers, len(contexts))):
        text, start = _text_and_start(answer, row)
        if text is None:
            if not no_answer_allowed:
                raise ValueError(
                    f"answers[{row}] is {answer!r}: no answer, but this model answers "
                    "every question (SQuAD 1.1); load it with version_2_with_negative=True "
                    "to train on questions without answers")
            checked.append(None)
            continue
        context = contexts[row]
        if context[start:start + len(text)] != text:
            found = context.find(text)
            hint = (f" (it is at {found})" if found >= 0 else
                    f" (it is nowhere in contexts[{row}])")
            raise ValueError(f"answers[{row}]: {text!r} is not at answer_start={start} of "
                             f"contexts[{row}], which reads "
                             f"{context[start:start + len(text)]!r} there{hint}: expected "
                             "the index of the answer's first character in its context")
        checked.append((text, start))
    return checked


def _text_and_start(answer, row):
    """(text, start) of one answer; (None, None) for no answer."""
    if answer is None or (isinstance(answer, collections.abc.Mapping)
                          and _first(answer.get("text")) is None):
        return None, None
    if isinstance(answer, collections.abc.Mapping):
        text, start = _first(answer.get("text")), _first(answer.get("answer_start"))
    elif isinstance(answer, (tuple, list, np.ndarray)) and len(answer) == 2:
        text, start = answer
    else:
        raise TypeError(f"answers[{row}] is {answer!r:.80}: expected "
                        "{'text': ..., 'answer_start': ...} or (text, answer_start)")
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"answers[{row}] has text {text!r}: expected the answer's "
                         "non-empty text")
    if isinstance(start, bool) or not isinstance(start, (int, np.integer)) or start < 0:
        raise ValueError(f"answers[{row}] has answer_start {start!r}: expected the index "
                         "(an integer >= 0) of the answer's first character in its context")
    return text, int(start)


def _first(value):
    """A SQuAD answer field: the value, or the first of a list of them (None if empty)."""
    if isinstance(value, (list, tuple, np.ndarray)):
        return value[0] if len(value) else None
    return value


def gold_answers(answers, num_rows, no_answer_allowed):
    """The gold answer texts of each row (for `evaluate`): a str, a list of str, a dict
    with "text" (a str or list), a tuple (text, answer_start); None or [] for no answer
    (SQuAD 2.0 models only)."""
    golds = []
    for row, answer in enumerate(answer_rows(answers, num_rows)):
        if isinstance(answer, collections.abc.Mapping):
            answer = answer.get("text")
        elif isinstance(answer, tuple) and len(answer) == 2 and not isinstance(answer[1], str):
            answer = answer[0]
        texts = [answer] if isinstance(answer, str) else list(answer or [])
        if not all(isinstance(text, str) for text in texts):
            raise TypeError(f"answers[{row}] is {answer!r:.80}: expected an answer text, a "
                            "list of them, or {'text': [...]}")
        if not texts and not no_answer_allowed:
            raise ValueError(f"answers[{row}] holds no answer text: a SQuAD 1.1 model is "
                             "scored against at least one answer per question")
        golds.append(texts)
    return golds


def squad_json_data(questions, contexts, answers=None, gold=None):
    """The `data` list of a SQuAD file holding the rows, one paragraph each, question
    ids `ROW_ID`: with `answers` (from `training_answers`) to train on, or `gold`
    (from `gold_answers`) to score against."""
    paragraphs = []
    for row, (question, context) in enumerate(zip(questions, contexts)):
        qa = {"id": ROW_ID.format(row), "question": question}
        if answers is not None:
            answer = answers[row]
            qa["is_impossible"] = answer is None
            qa["answers"] = [] if answer is None else [{"text": answer[0],
                                                        "answer_start": answer[1]}]
        if gold is not None:
            qa["answers"] = [{"text": text} for text in gold[row]]
        paragraphs.append({"context": context, "qas": [qa]})
    return [{"title": "python", "paragraphs": paragraphs}]


def context_span(context, span):
    """[start, end) characters in `context` of an answer's `span` (see
    `bert_tf.tasks.squad.postprocess.best_answers`): (0, 0) for no span."""
    if span is None:
        return 0, 0
    first_word, last_word, first_char, last_char = span
    words, char_to_word = squad_data.split_context(context)
    word_starts = {}
    for index, word in enumerate(char_to_word):
        word_starts.setdefault(word, index)  # white space after a word comes after it
    start = end = None
    position = 0  # in the words joined by single spaces
    for word in range(first_word, last_word + 1):
        length = len(words[word])
        if position <= first_char < position + length:
            start = word_starts[word] + first_char - position
        if position <= last_char < position + length:
            end = word_starts[word] + last_char - position + 1
        position += length + 1
    return start, end
