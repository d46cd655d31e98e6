"""SQuAD evaluation with the metrics of the official scripts.

    python -m bert_tf.tasks.squad.evaluate DATA_FILE PRED_FILE [--na-prob-file NULL_ODDS]

prints the JSON that the official `evaluate-v1.1.py` prints for v1.1 data
(`{"exact_match": .., "f1": ..}`) or that `evaluate-v2.0.py` prints for v2.0 data
(`exact`, `f1`, `total`, `HasAns_*`, `NoAns_*` and with `--na-prob-file` the best
thresholds), for the same files. The version comes from the data file (`version`
starting with 2, or any `is_impossible`); `--version` overrides it.

Answers are normalised by lower-casing, removing punctuation, the articles a/an/the
and extra white space; EM and token F1 take the best over the gold answers.

v1.1: a question without prediction scores 0 and counts in the total (as the official
script, with a note on stderr). v2.0: the official script leaves questions without a
prediction out of the total (and crashes when it then builds the HasAns/NoAns splits);
here they are left out of every split alike, with a note on stderr.
"""

import argparse
import collections
import json
import re
import string
import sys

from bert_tf.io import fileio
from bert_tf.tasks.squad import data as squad_data

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text):
    """Lower case, no punctuation, no articles, single spaces."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _get_tokens(text):
    return normalize_answer(text).split() if text else []


def compute_exact(gold, prediction):
    """1 when the normalised strings are equal, else 0."""
    return int(normalize_answer(gold) == normalize_answer(prediction))


def f1_v1(prediction, ground_truth):
    """Token F1 of evaluate-v1.1.py (0 when nothing overlaps, empty strings too)."""
    prediction_tokens = normalize_answer(prediction).split()
    ground_truth_tokens = normalize_answer(ground_truth).split()
    common = collections.Counter(prediction_tokens) & collections.Counter(
        ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    return (2 * precision * recall) / (precision + recall)


def compute_f1(gold, prediction):
    """Token F1 of evaluate-v2.0.py: two empty answers agree (F1 = 1)."""
    gold_toks = _get_tokens(gold)
    pred_toks = _get_tokens(prediction)
    if not gold_toks or not pred_toks:
        return int(gold_toks == pred_toks)
    return f1_v1(prediction, gold)


def evaluate_v1(dataset, predictions, log=None):
    """The dict of evaluate-v1.1.py: `exact_match` and `f1` in percent."""
    log = sys.stderr if log is None else log
    f1 = exact_match = total = 0
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                total += 1
                if qa["id"] not in predictions:
                    print(f"Unanswered question {qa['id']} will receive score 0.",
                          file=log)
                    continue
                ground_truths = [answer["text"] for answer in qa["answers"]]
                prediction = predictions[qa["id"]]
                exact_match += max(int(normalize_answer(prediction)
                                       == normalize_answer(gt)) for gt in ground_truths)
                f1 += max(f1_v1(prediction, gt) for gt in ground_truths)
    return {"exact_match": 100.0 * exact_match / total, "f1": 100.0 * f1 / total}


def _qid_to_has_ans(dataset):
    return {qa["id"]: bool(qa["answers"]) for article in dataset
            for paragraph in article["paragraphs"] for qa in paragraph["qas"]}


def get_raw_scores(dataset, predictions, log=None):
    """Per-question EM and F1 of evaluate-v2.0.py (no threshold applied)."""
    log = sys.stderr if log is None else log
    exact_scores, f1_scores = {}, {}
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                qid = qa["id"]
                gold_answers = [a["text"] for a in qa["answers"]
                                if normalize_answer(a["text"])] or [""]
                if qid not in predictions:
                    print(f"Missing prediction for {qid}", file=log)
                    continue
                prediction = predictions[qid]
                exact_scores[qid] = max(compute_exact(a, prediction) for a in gold_answers)
                f1_scores[qid] = max(compute_f1(a, prediction) for a in gold_answers)
    return exact_scores, f1_scores


def _apply_no_ans_threshold(scores, na_probs, qid_to_has_ans, na_prob_thresh):
    return {qid: float(not qid_to_has_ans[qid]) if na_probs[qid] > na_prob_thresh else s
            for qid, s in scores.items()}


def _make_eval_dict(exact_scores, f1_scores, qid_list=None):
    qid_list = list(exact_scores) if not qid_list else qid_list
    total = len(qid_list)
    return collections.OrderedDict([
        ("exact", 100.0 * sum(exact_scores[k] for k in qid_list) / total),
        ("f1", 100.0 * sum(f1_scores[k] for k in qid_list) / total),
        ("total", total)])


def _find_best_thresh(predictions, scores, na_probs, qid_to_has_ans):
    """Best score over no-answer thresholds and the threshold (evaluate-v2.0.py)."""
    cur_score = sum(1 for k in qid_to_has_ans if not qid_to_has_ans[k])
    best_score, best_thresh = cur_score, 0.0
    for qid in sorted(na_probs, key=lambda k: na_probs[k]):
        if qid not in scores:
            continue
        if qid_to_has_ans[qid]:
            diff = scores[qid]
        else:
            diff = -1 if predictions[qid] else 0
        cur_score += diff
        if cur_score > best_score:
            best_score, best_thresh = cur_score, na_probs[qid]
    return 100.0 * best_score / len(scores), best_thresh


def evaluate_v2(dataset, predictions, na_probs=None, na_prob_thresh=1.0,
                log=None):
    """The OrderedDict of evaluate-v2.0.py (percentages, totals, best thresholds)."""
    has_na_probs = na_probs is not None
    if not has_na_probs:
        na_probs = {k: 0.0 for k in predictions}
    qid_to_has_ans = _qid_to_has_ans(dataset)
    exact_raw, f1_raw = get_raw_scores(dataset, predictions, log=log)
    has_ans_qids = [k for k, v in qid_to_has_ans.items() if v and k in exact_raw]
    no_ans_qids = [k for k, v in qid_to_has_ans.items() if not v and k in exact_raw]
    exact_thresh = _apply_no_ans_threshold(exact_raw, na_probs, qid_to_has_ans,
                                           na_prob_thresh)
    f1_thresh = _apply_no_ans_threshold(f1_raw, na_probs, qid_to_has_ans,
                                        na_prob_thresh)
    out_eval = _make_eval_dict(exact_thresh, f1_thresh)
    for prefix, qids in (("HasAns", has_ans_qids), ("NoAns", no_ans_qids)):
        if qids:
            for key, value in _make_eval_dict(exact_thresh, f1_thresh, qids).items():
                out_eval[f"{prefix}_{key}"] = value
    if has_na_probs:
        best_exact, exact_best_thresh = _find_best_thresh(predictions, exact_raw,
                                                          na_probs, qid_to_has_ans)
        best_f1, f1_best_thresh = _find_best_thresh(predictions, f1_raw, na_probs,
                                                    qid_to_has_ans)
        out_eval["best_exact"] = best_exact
        out_eval["best_exact_thresh"] = exact_best_thresh
        out_eval["best_f1"] = best_f1
        out_eval["best_f1_thresh"] = f1_best_thresh
    return out_eval


def is_version_2(data_json):
    """Whether a loaded SQuAD JSON object is v2.0 (its version, or `is_impossible`)."""
    if str(data_json.get("version", "")).lstrip("v").startswith("2"):
        return True
    return any("is_impossible" in qa for entry in data_json.get("data", [])
               for paragraph in entry.get("paragraphs", [])
               for qa in paragraph.get("qas", []))


def _load_json(path, what):
    try:
        return json.loads("".join(line for _, line in fileio.iter_text_lines(path)))
    except OSError as error:
        raise SystemExit(f"{what} {path}: cannot read: {error}") from error
    except (ValueError, UnicodeDecodeError) as error:  # binary, not UTF-8, not JSON
        raise SystemExit(f"{what} {path}: not valid UTF-8 JSON: {error}") from error


def _check_mapping(obj, path, what, value_types):
    """Rejects a predictions / null-odds file that is not {question id: value}."""
    if not isinstance(obj, dict):
        raise SystemExit(f"{what} {path}: expected a JSON object {{question id: ...}}, "
                         f"got {type(obj).__name__}")
    for key, value in obj.items():
        if not isinstance(value, value_types) or isinstance(value, bool):
            names = "/".join(t.__name__ for t in value_types)
            raise SystemExit(f'{what} {path}: value of "{key}" must be {names}, '
                             f"got {type(value).__name__}")


def _check_dataset(data_json, path):
    """Rejects a data file that is not SQuAD-shaped, naming the bad element."""
    data = squad_data.require_field(data_json, "data", list, path, "top level")
    for i, article in enumerate(data):
        paragraphs = squad_data.require_field(article, "paragraphs", list, path, f"data[{i}]")
        for j, paragraph in enumerate(paragraphs):
            where = f"data[{i}].paragraphs[{j}]"
            for k, qa in enumerate(squad_data.require_field(paragraph, "qas", list, path, where)):
                squad_data.require_field(qa, "id", str, path, f"{where}.qas[{k}]")
                for a, answer in enumerate(squad_data.require_field(
                        qa, "answers", list, path, f"{where}.qas[{k}]")):
                    squad_data.require_field(answer, "text", str, path,
                                             f"{where}.qas[{k}].answers[{a}]")
    return data


def evaluate_files(data_file, pred_file, na_prob_file=None, na_prob_thresh=1.0,
                   version=None, log=None):
    """Evaluates prediction files against a SQuAD data file.

    Args:
      data_file: SQuAD v1.1 / v2.0 JSON with answers.
      pred_file: JSON {question id: answer text}.
      na_prob_file: optional JSON {question id: no-answer score} (v2.0 only).
      na_prob_thresh: predict "" above this no-answer score (v2.0).
      version: "1.1" or "2.0"; None detects it from the data file.
      log: where notes (missing predictions) go; default stderr.

    Returns:
      (version, result dict) with the keys of the official script of that version.
    """
    data_json = _load_json(data_file, "data file")
    dataset = _check_dataset(data_json, data_file)
    if version is None:
        version = "2.0" if is_version_2(data_json) else "1.1"
    predictions = _load_json(pred_file, "prediction file")
    _check_mapping(predictions, pred_file, "prediction file", (str,))
    if version == "1.1":
        if data_json.get("version") != "1.1":
            print(f"Evaluation expects v-1.1, but got dataset with "
                  f"v-{data_json.get('version')}", file=sys.stderr if log is None else log)
        if na_prob_file:
            raise SystemExit("--na-prob-file applies to v2.0 data; pass --version 2.0 "
                             f"to score {data_file} as evaluate-v2.0.py does")
        return version, evaluate_v1(dataset, predictions, log=log)
    na_probs = None
    if na_prob_file:
        na_probs = _load_json(na_prob_file, "na-prob file")
        _check_mapping(na_probs, na_prob_file, "na-prob file", (int, float))
        missing = [k for k in predictions if k not in na_probs]
        if missing:
            raise SystemExit(f"na-prob file {na_prob_file}: no score for {len(missing)} "
                             f"predicted questions, e.g. {missing[0]}")
    return version, evaluate_v2(dataset, predictions, na_probs, na_prob_thresh, log=log)


def format_result(version, result):
    """The text the official script prints for `result`."""
    return json.dumps(result) if version == "1.1" else json.dumps(result, indent=2)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="SQuAD v1.1 / v2.0 evaluation (official metrics).")
    parser.add_argument("data_file", metavar="data.json", help="Input data JSON file.")
    parser.add_argument("pred_file", metavar="pred.json", help="Model predictions.")
    parser.add_argument("--out-file", "-o", metavar="eval.json",
                        help="Write accuracy metrics to file (default is stdout).")
    parser.add_argument("--na-prob-file", "-n", metavar="na_prob.json",
                        help="Model estimates of probability of no answer (v2.0).")
    parser.add_argument("--na-prob-thresh", "-t", type=float, default=1.0,
                        help='Predict "" if no-answer probability exceeds this '
                             "(default = 1.0; v2.0).")
    parser.add_argument("--version", choices=("1.1", "2.0"), default=None,
                        help="Evaluation script to follow (default: from the data).")
    args = parser.parse_args(argv)
    try:
        if args.out_file:  # the metrics never replace a file they are computed from
            fileio.check_outputs_apart(
                {"--out-file": args.out_file},
                {"data.json": args.data_file, "pred.json": args.pred_file,
                 "--na-prob-file": args.na_prob_file})
        version, result = evaluate_files(args.data_file, args.pred_file, args.na_prob_file,
                                         args.na_prob_thresh, args.version)
    except ValueError as error:  # a data file that is not SQuAD-shaped, named by field
        raise SystemExit(f"squad_eval: error: {error}") from None
    if args.out_file:
        fileio.write_text_atomic(args.out_file, json.dumps(result))
    else:
        print(format_result(version, result))
    return result


if __name__ == "__main__":
    main()
