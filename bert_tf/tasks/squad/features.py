"""SQuAD windowed features: `SquadExample`s into `InputFeatures` for the model.

Behaves as google-research/bert `run_squad.py`'s `convert_examples_to_features`: it
splits words into WordPieces, projects a training answer onto sub-tokens and cuts each
context into windows of `[CLS] question [SEP] context [SEP]`, each context token marked
with whether this window gives it its maximum context.
"""

import dataclasses
from typing import Optional

from bert_tf.text import input_layout
from bert_tf.train import progress
from bert_tf.text.windows import make_doc_spans

FIRST_UNIQUE_ID = 1000000000


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
    """Turns examples into windowed `InputFeatures`.

    Words are split into WordPieces; a training answer is projected onto sub-tokens and
    tightened to the annotated text (`_improve_answer_span`). The question is truncated
    to `max_query_length` and long contexts are cut into windows of
    `max_seq_length - len(query) - 3` tokens that advance by at most `doc_stride`. Every
    context token records whether this window gives it its maximum context
    (`_check_is_max_context`). `[CLS] question [SEP] context [SEP]`, segment 0 / 1.
    During training an answer outside the window, and a v2.0 unanswerable question, point
    at `[CLS]` (position 0).

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

