"""SQuAD predictions from start/end logits: n-best decoding, answer text, null score.

Behaves as `write_predictions` of google-research/bert `run_squad.py`:

* per window, the `n_best_size` best start and end positions; a pair is kept when both
  fall in the window's context, the start has its maximum context in this window, end
  >= start, and the span is at most `max_answer_length` tokens;
* candidates of all windows are ranked by start + end logit; the WordPiece text is
  de-tokenised and mapped back to the original context characters with
  `get_final_text`; duplicates are dropped; softmax over the n-best gives
  `probability`;
* v2.0: the null score is the smallest `start_logits[0] + end_logits[0]` over the
  windows; the answer is "" when null score - best non-null score exceeds
  `null_score_diff_threshold`, and that difference is written to `null_odds.json`.

`best_answers` gives the same answers with their n-best probability and where they lie
in the context (what `bert_tf.TextQuestionAnswerer.predict` returns).

The original crashes on a v2.0 example whose n-best holds no non-null answer; here the
prediction is "" and its null odds are the null score against a zero score.
"""

import collections
import json
import logging
import math
import os

import numpy as np

from bert_tf.io import fileio
from bert_tf.text.rules import BasicTokenizer

logger = logging.getLogger(__name__)

RawResult = collections.namedtuple("RawResult",
                                   ["unique_id", "start_logits", "end_logits"])
_PrelimPrediction = collections.namedtuple(
    "PrelimPrediction",
    ["feature_index", "start_index", "end_index", "start_logit", "end_logit"])
# span: (first word, last word, first and last character of the text in those words
# joined by single spaces) of a non-null answer; None for "" and "empty".
_NbestPrediction = collections.namedtuple("NbestPrediction",
                                          ["text", "start_logit", "end_logit", "span"],
                                          defaults=(None,))
# What `best_answers` gives for each question.
Answer = collections.namedtuple("Answer", ["text", "probability", "span", "null_odds"])


def _strip_spaces(text):
    """Text without spaces, and the map from its indices to those of `text`."""
    ns_chars = []
    ns_to_s_map = collections.OrderedDict()
    for i, char in enumerate(text):
        if char == " ":
            continue
        ns_to_s_map[len(ns_chars)] = i
        ns_chars.append(char)
    return "".join(ns_chars), ns_to_s_map


def get_final_text(pred_text, orig_text, do_lower_case, basic_tokenizer=None,
                   verbose_logging=False):
    """Projects normalised predicted text back onto the original text.

    `pred_text` is de-tokenised WordPiece text ("steve smith"), `orig_text` the
    original words it came from ("Steve Smith's"). The original text is run through
    the basic tokenizer, the prediction located in it, and the characters aligned
    after removing spaces; when the alignment fails the whole `orig_text` is returned.

    Args:
      pred_text: the normalised prediction.
      orig_text: the original words of the span, joined with single spaces.
      do_lower_case: as the tokenizer that produced the WordPieces.
      basic_tokenizer: optional `BasicTokenizer` to reuse.
      verbose_logging: log why an alignment failed.

    Returns:
      The substring of `orig_text` that matches the prediction.
    """
    start, end = final_text_span(pred_text, orig_text, do_lower_case, basic_tokenizer,
                                 verbose_logging)
    return orig_text[start:end + 1]


def final_text_span(pred_text, orig_text, do_lower_case, basic_tokenizer=None,
                    verbose_logging=False):
    """`get_final_text` as (first, last) character indices into `orig_text`."""
    if basic_tokenizer is None:
        basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
    tok_text = " ".join(basic_tokenizer.tokenize(orig_text))
    def give_up(reason):
        if verbose_logging:
            logger.info("get_final_text: %s (pred %r, orig %r, tokenized %r)", reason,
                        pred_text, orig_text, tok_text)
        return 0, len(orig_text) - 1

    start_position = tok_text.find(pred_text)
    if start_position == -1:
        return give_up("unable to find the prediction")
    end_position = start_position + len(pred_text) - 1

    orig_ns_text, orig_ns_to_s_map = _strip_spaces(orig_text)
    tok_ns_text, tok_ns_to_s_map = _strip_spaces(tok_text)
    if len(orig_ns_text) != len(tok_ns_text):
        return give_up("length not equal after stripping spaces")
    tok_s_to_ns_map = {tok_index: i for i, tok_index in tok_ns_to_s_map.items()}

    def to_orig(position):
        ns_position = tok_s_to_ns_map.get(position)
        if ns_position is None:
            return None
        return orig_ns_to_s_map.get(ns_position)

    orig_start_position = to_orig(start_position)
    orig_end_position = to_orig(end_position)
    if orig_start_position is None or orig_end_position is None:
        return give_up("could not map the start or end position")
    return orig_start_position, orig_end_position


def _get_best_indexes(logits, n_best_size):
    """Indices of the `n_best_size` largest logits, ties in index order."""
    order = np.argsort(-np.asarray(logits, dtype=np.float64), kind="stable")
    return [int(i) for i in order[:n_best_size]]


def _compute_softmax(scores):
    """Softmax of a list of floats (plain Python, as the original)."""
    if not scores:
        return []
    max_score = max(scores)
    exp_scores = [math.exp(score - max_score) for score in scores]
    total_sum = sum(exp_scores)
    return [score / total_sum for score in exp_scores]


def _feature_candidates(feature, feature_index, result, n_best_size,
                        max_answer_length):
    """Valid (start, end) candidates of one window."""
    candidates = []
    num_tokens = len(feature.tokens)
    end_indexes = _get_best_indexes(result.end_logits, n_best_size)
    for start_index in _get_best_indexes(result.start_logits, n_best_size):
        for end_index in end_indexes:
            if start_index >= num_tokens or end_index >= num_tokens:
                continue
            if (start_index not in feature.token_to_orig_map
                    or end_index not in feature.token_to_orig_map):
                continue
            if not feature.token_is_max_context.get(start_index, False):
                continue
            if end_index < start_index:
                continue
            if end_index - start_index + 1 > max_answer_length:
                continue
            candidates.append(_PrelimPrediction(
                feature_index, start_index, end_index,
                float(result.start_logits[start_index]),
                float(result.end_logits[end_index])))
    return candidates


def _span_text(example, feature, pred, do_lower_case, basic_tokenizer, verbose_logging):
    """(original-context text, span: see `_NbestPrediction`) of a non-null candidate."""
    tok_tokens = feature.tokens[pred.start_index:(pred.end_index + 1)]
    orig_doc_start = feature.token_to_orig_map[pred.start_index]
    orig_doc_end = feature.token_to_orig_map[pred.end_index]
    orig_tokens = example.doc_tokens[orig_doc_start:(orig_doc_end + 1)]
    tok_text = " ".join(tok_tokens)
    # De-tokenise WordPieces that have been split off, then clean white space.
    tok_text = tok_text.replace(" ##", "").replace("##", "")
    tok_text = " ".join(tok_text.strip().split())
    orig_text = " ".join(orig_tokens)
    start, end = final_text_span(tok_text, orig_text, do_lower_case, basic_tokenizer,
                                 verbose_logging)
    return orig_text[start:end + 1], (orig_doc_start, orig_doc_end, start, end)


def _example_nbest(example, features, results, settings, basic_tokenizer):
    """(nbest, score_null) of one example over all its windows."""
    n_best_size, max_answer_length, do_lower_case, version_2, verbose = settings
    prelim = []
    score_null = 1000000.0  # large and positive
    null = (0, 0.0, 0.0)  # feature index, start logit, end logit of the min null score
    for feature_index, feature in enumerate(features):
        result = results[feature.unique_id]
        if version_2:
            feature_null_score = (float(result.start_logits[0])
                                  + float(result.end_logits[0]))
            if feature_null_score < score_null:
                score_null = feature_null_score
                null = (feature_index, float(result.start_logits[0]),
                        float(result.end_logits[0]))
        prelim.extend(_feature_candidates(feature, feature_index, result, n_best_size,
                                          max_answer_length))
    if version_2:
        prelim.append(_PrelimPrediction(null[0], 0, 0, null[1], null[2]))
    prelim.sort(key=lambda x: x.start_logit + x.end_logit, reverse=True)

    seen, nbest = set(), []
    for pred in prelim:
        if len(nbest) >= n_best_size:
            break
        final_text, span = "", None
        if pred.start_index > 0:  # a non-null prediction
            final_text, span = _span_text(example, features[pred.feature_index], pred,
                                          do_lower_case, basic_tokenizer, verbose)
            if final_text in seen:
                continue
        seen.add(final_text)
        nbest.append(_NbestPrediction(final_text, pred.start_logit, pred.end_logit, span))
    if version_2 and "" not in seen:
        nbest.append(_NbestPrediction("", null[1], null[2]))
    if not nbest:  # rare: no valid span at all
        nbest.append(_NbestPrediction("empty", 0.0, 0.0))
    return nbest, score_null


def compute_predictions(all_examples, all_features, all_results, n_best_size=20,
                        max_answer_length=30, do_lower_case=True,
                        version_2_with_negative=False, null_score_diff_threshold=0.0,
                        verbose_logging=False):
    """Decodes answers for every example (see the module docstring).

    Args:
      all_examples: `SquadExample`s.
      all_features: their `InputFeatures` (`example_index` points into all_examples).
      all_results: `RawResult`s (unique_id, start_logits, end_logits), one per feature.
      n_best_size: candidates kept per window and per example.
      max_answer_length: longest answer in sub-tokens.
      do_lower_case: as the tokenizer (for mapping text back).
      version_2_with_negative: allow the null answer.
      null_score_diff_threshold: predict "" when null - best non-null score exceeds it.
      verbose_logging: log answers whose text could not be aligned.

    Returns:
      (predictions, nbest, null_odds): OrderedDicts keyed by question id; nbest entries
      are OrderedDicts text / probability / start_logit / end_logit; null_odds is empty
      for v1.1.

    Raises:
      ValueError: a feature has no result.
    """
    predictions = collections.OrderedDict()
    all_nbest = collections.OrderedDict()
    null_odds = collections.OrderedDict()
    for example, nbest, best, odds in _decoded(
            all_examples, all_features, all_results, n_best_size, max_answer_length,
            do_lower_case, version_2_with_negative, null_score_diff_threshold,
            verbose_logging):
        all_nbest[example.qas_id] = _nbest_json(nbest)
        predictions[example.qas_id] = nbest[best].text
        if version_2_with_negative:
            null_odds[example.qas_id] = odds
    return predictions, all_nbest, null_odds


def best_answers(all_examples, all_features, all_results, n_best_size=20,
                 max_answer_length=30, do_lower_case=True, version_2_with_negative=False,
                 null_score_diff_threshold=0.0, verbose_logging=False):
    """The answer of every example, as `compute_predictions` decodes it, with where it
    lies (arguments: `compute_predictions`'s).

    Returns:
      A list of `Answer` in example order: its text, its n-best probability, its span
      (first and last word of `doc_tokens`, first and last character of the text in
      those words joined by single spaces; None for "" and "empty") and its null odds
      (None for v1.1).
    """
    answers = []
    for _, nbest, best, odds in _decoded(
            all_examples, all_features, all_results, n_best_size, max_answer_length,
            do_lower_case, version_2_with_negative, null_score_diff_threshold,
            verbose_logging):
        probability = _nbest_json(nbest)[best]["probability"]
        answers.append(Answer(nbest[best].text, probability, nbest[best].span, odds))
    return answers


def _decoded(all_examples, all_features, all_results, n_best_size, max_answer_length,
             do_lower_case, version_2_with_negative, null_score_diff_threshold,
             verbose_logging):
    """Yields (example, n-best, index of its answer in the n-best, null odds or None
    for v1.1) for every example (see `compute_predictions`)."""
    example_index_to_features = collections.defaultdict(list)
    for feature in all_features:
        example_index_to_features[feature.example_index].append(feature)
    results = {int(result.unique_id): result for result in all_results}
    missing = [f.unique_id for f in all_features if f.unique_id not in results]
    if missing:
        raise ValueError(f"{len(missing)} of {len(all_features)} features have no "
                         f"result, e.g. unique_id {missing[0]}")
    settings = (n_best_size, max_answer_length, do_lower_case, version_2_with_negative,
                verbose_logging)
    basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
    for example_index, example in enumerate(all_examples):
        nbest, score_null = _example_nbest(
            example, example_index_to_features[example_index], results, settings,
            basic_tokenizer)
        if not version_2_with_negative:
            yield example, nbest, 0, None
            continue
        text, odds = _null_decision(nbest, score_null, null_score_diff_threshold)
        yield example, nbest, [entry.text for entry in nbest].index(text), odds


def _nbest_json(nbest):
    """The n-best entries as OrderedDicts with softmax probabilities."""
    probs = _compute_softmax([entry.start_logit + entry.end_logit for entry in nbest])
    return [collections.OrderedDict([("text", entry.text), ("probability", probs[i]),
                                     ("start_logit", entry.start_logit),
                                     ("end_logit", entry.end_logit)])
            for i, entry in enumerate(nbest)]


def _null_decision(nbest, score_null, null_score_diff_threshold):
    """(answer, null score - best non-null score) of a v2.0 example."""
    best_non_null = next((entry for entry in nbest if entry.text), None)
    if best_non_null is None:  # the original crashes here
        return "", score_null
    score_diff = score_null - best_non_null.start_logit - best_non_null.end_logit
    if score_diff > null_score_diff_threshold:
        return "", score_diff
    return best_non_null.text, score_diff


def write_json_atomic(obj, output_file, indent=4):
    """Writes JSON plus a newline to a temporary name, then renames it."""
    fileio.write_text_atomic(output_file, json.dumps(obj, indent=indent) + "\n")


def write_predictions(all_examples, all_features, all_results, output_dir,
                      version_2_with_negative=False, **decode_kwargs):
    """Decodes predictions and writes `predictions.json`, `nbest_predictions.json` and,
    for v2.0, `null_odds.json` into `output_dir` (each written then renamed).

    Args:
      all_examples, all_features, all_results: as `compute_predictions`.
      output_dir: existing folder.
      version_2_with_negative: as `compute_predictions`.
      **decode_kwargs: the other `compute_predictions` arguments.

    Returns:
      (predictions, null_odds, paths): the answers and null odds by question id, and
      the written files keyed `predictions`, `nbest` (and `null_odds`).
    """
    predictions, nbest, null_odds = compute_predictions(
        all_examples, all_features, all_results,
        version_2_with_negative=version_2_with_negative, **decode_kwargs)
    paths = {"predictions": os.path.join(output_dir, "predictions.json"),
             "nbest": os.path.join(output_dir, "nbest_predictions.json")}
    write_json_atomic(predictions, paths["predictions"])
    write_json_atomic(nbest, paths["nbest"])
    if version_2_with_negative:
        paths["null_odds"] = os.path.join(output_dir, "null_odds.json")
        write_json_atomic(null_odds, paths["null_odds"])
    logger.info("Wrote %d predictions to %s", len(predictions), output_dir)
    return predictions, null_odds, paths
