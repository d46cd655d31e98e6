"""SQuAD evaluator against EM/F1 computed by hand for hand-made predictions."""

import json
import subprocess
import sys

import pytest

from bert_tf.tasks.squad import evaluate as squad_evaluate
from harness import squad_json


def _data(qas, version):
    return squad_json([{"context": "unused here", "qas": qas}], version)


def _answers(*texts):
    return [{"text": text, "answer_start": 0} for text in texts]


V1_DATA = _data([
    {"id": "q1", "question": "Who?", "answers": _answers("Denver Broncos",
                                                         "The Denver Broncos")},
    {"id": "q2", "question": "Where?", "answers": _answers("Santa Clara, California")},
    {"id": "q3", "question": "When?", "answers": _answers("2016")},
], "1.1")
V1_PREDICTIONS = {"q1": "the  Denver broncos!", "q2": "in Santa Clara"}

V2_DATA = _data([
    {"id": "A", "question": "?", "answers": _answers("Paris")},
    {"id": "B", "question": "?", "answers": _answers("1686", "the year 1686")},
    {"id": "C", "question": "?", "answers": [], "is_impossible": True},
    {"id": "D", "question": "?", "answers": [], "is_impossible": True},
], "v2.0")
V2_PREDICTIONS = {"A": "Paris.", "B": "in 1686 AD", "C": "", "D": "something"}
V2_NA_PROBS = {"A": 0.1, "B": 0.2, "C": 0.9, "D": 0.95}


@pytest.mark.parametrize("text, expected", [
    ("The Denver  Broncos!", "denver broncos"),
    ("an apple, a pear", "apple pear"),
    ("Théâtre", "théâtre"),  # accents are kept, only case changes
    ("theatre", "theatre"),  # articles only as whole words
])
def test_normalize_answer(text, expected):
    assert squad_evaluate.normalize_answer(text) == expected


def test_v1_scores_by_hand(capsys):
    result = squad_evaluate.evaluate_v1(V1_DATA["data"], V1_PREDICTIONS)
    # q1: exact after normalisation; q2: "in santa clara" vs "santa clara california":
    # 2 common tokens, precision 2/3, recall 2/3, F1 2/3; q3: missing, scores 0.
    assert result == {"exact_match": 100.0 * 1 / 3,
                      "f1": pytest.approx(100.0 * (1 + 2 / 3) / 3, abs=1e-12)}
    assert "Unanswered question q3 will receive score 0." in capsys.readouterr().err


def test_v1_empty_prediction_scores_zero():
    data = _data([{"id": "q", "question": "?", "answers": _answers("x")}], "1.1")
    assert squad_evaluate.evaluate_v1(data["data"], {"q": ""}) == {"exact_match": 0.0,
                                                                   "f1": 0.0}


def test_v2_scores_by_hand():
    result = squad_evaluate.evaluate_v2(V2_DATA["data"], V2_PREDICTIONS)
    # EM: A 1, B 0, C 1 ("" for no answer), D 0. F1: A 1; B "in 1686 ad" vs "1686":
    # precision 1/3, recall 1, F1 0.5 (vs "year 1686": 1/3, 1/2 -> 0.4); C 1; D 0.
    assert dict(result) == {
        "exact": 50.0, "f1": 62.5, "total": 4,
        "HasAns_exact": 50.0, "HasAns_f1": 75.0, "HasAns_total": 2,
        "NoAns_exact": 50.0, "NoAns_f1": 50.0, "NoAns_total": 2}


def test_v2_best_thresholds_by_hand():
    result = squad_evaluate.evaluate_v2(V2_DATA["data"], V2_PREDICTIONS, V2_NA_PROBS)
    # Start with every question "no answer": 2 correct (C, D). By rising na prob:
    # EM: A +1 -> 3 (thresh 0.1), B +0, C +0 (already ""), D -1. Best 3/4.
    # F1: A +1 -> 3, B +0.5 -> 3.5 (thresh 0.2), C +0, D -1. Best 3.5/4.
    assert result["best_exact"] == 75.0 and result["best_exact_thresh"] == 0.1
    assert result["best_f1"] == 87.5 and result["best_f1_thresh"] == 0.2
    assert result["exact"] == 50.0  # na_prob_thresh 1.0: nothing switched to ""


def test_v2_na_prob_threshold_switches_to_no_answer():
    result = squad_evaluate.evaluate_v2(V2_DATA["data"], V2_PREDICTIONS, V2_NA_PROBS,
                                        na_prob_thresh=0.5)
    # C and D are above 0.5: both count as "no answer", which is right for both.
    assert (result["exact"], result["f1"]) == (75.0, 87.5)
    assert (result["NoAns_exact"], result["HasAns_exact"]) == (100.0, 50.0)


def _run_cli(tmp_path, data, predictions, na_probs=None, extra=()):
    data_file = tmp_path / "data.json"
    data_file.write_text(json.dumps(data), encoding="utf-8")
    pred_file = tmp_path / "pred.json"
    pred_file.write_text(json.dumps(predictions), encoding="utf-8")
    argv = [sys.executable, "-m", "bert_tf.tasks.squad.evaluate", str(data_file),
            str(pred_file), *extra]
    if na_probs is not None:
        na_file = tmp_path / "na.json"
        na_file.write_text(json.dumps(na_probs), encoding="utf-8")
        argv += ["--na-prob-file", str(na_file)]
    return subprocess.run(argv, capture_output=True, text=True, check=False)


def test_cli_prints_the_official_v1_json(tmp_path):
    completed = _run_cli(tmp_path, V1_DATA, V1_PREDICTIONS)
    assert completed.returncode == 0, completed.stderr
    # evaluate-v1.1.py: print(json.dumps(evaluate(dataset, predictions)))
    expected = json.dumps({"exact_match": 100.0 * 1 / 3,
                           "f1": 100.0 * (0 + 1 + 2 / 3 + 0) / 3})
    assert completed.stdout == expected + "\n"


def test_cli_prints_the_official_v2_json(tmp_path):
    completed = _run_cli(tmp_path, V2_DATA, V2_PREDICTIONS, V2_NA_PROBS)
    assert completed.returncode == 0, completed.stderr
    # evaluate-v2.0.py: print(json.dumps(out_eval, indent=2)), keys in this order.
    assert completed.stdout == """{
  "exact": 50.0,
  "f1": 62.5,
  "total": 4,
  "HasAns_exact": 50.0,
  "HasAns_f1": 75.0,
  "HasAns_total": 2,
  "NoAns_exact": 50.0,
  "NoAns_f1": 50.0,
  "NoAns_total": 2,
  "best_exact": 75.0,
  "best_exact_thresh": 0.1,
  "best_f1": 87.5,
  "best_f1_thresh": 0.2
}
"""


def test_cli_bad_input_names_the_file(tmp_path):
    completed = _run_cli(tmp_path, V1_DATA, ["not", "a", "dict"])
    assert completed.returncode != 0
    assert "pred.json: expected a JSON object" in completed.stderr
    bad = _data([{"question": "?", "answers": []}], "1.1")
    completed = _run_cli(tmp_path, bad, {})
    assert 'data.json: data[0].paragraphs[0].qas[0]: missing "id"' in completed.stderr
    assert "Traceback" not in completed.stderr and len(completed.stderr.splitlines()) == 1
    completed = _run_cli(tmp_path, V2_DATA, V2_PREDICTIONS, {"A": 0.5})
    assert "na.json: no score for 3 predicted questions" in completed.stderr


def test_cli_out_file(tmp_path):
    out_file = tmp_path / "eval.json"
    completed = _run_cli(tmp_path, V2_DATA, V2_PREDICTIONS, extra=("-o", str(out_file)))
    assert completed.returncode == 0 and completed.stdout == ""
    # evaluate-v2.0.py: json.dump(out_eval, f), no indent.
    assert out_file.read_text() == json.dumps(dict(squad_evaluate.evaluate_v2(
        V2_DATA["data"], V2_PREDICTIONS)))
