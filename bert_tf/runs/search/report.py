"""The end of a search: the table of the study's trials, `search_results.json`, and the
best trial marked (`best_trial.json`, and the link `best_trial` -> `trial-N`)."""

import json
import math
import os

from absl import logging

from bert_tf.io import fileio
from bert_tf.runs import run_groups

RESULTS_FILE = "search_results.json"


def _number(value):
    """A JSON number (None for NaN / infinity / none)."""
    return float(value) if value is not None and math.isfinite(value) else None


def _row(trial) -> dict:
    """One trial as the table and the JSON show it."""
    steps = sorted(trial.intermediate_values)
    return {"trial": trial.number, "state": trial.state.name.lower(),
            "value": _number(trial.value), "params": dict(trial.params),
            "folder": trial.user_attrs.get("folder", f"trial-{trial.number}"),
            "host": trial.user_attrs.get("host"),
            "last_step_scored": steps[-1] if steps else None}


def summarize(optuna, study, storage: str) -> dict:
    """The study's trials (every process's), its metric, direction and best trial."""
    del optuna
    rows = [_row(trial) for trial in study.trials]
    metrics = {trial.user_attrs.get("metric") for trial in study.trials} - {None}
    complete = [row for row in rows if row["state"] == "complete" and row["value"] is not None]
    best = None
    if complete:
        pick = min if study.direction.name == "MINIMIZE" else max
        best = pick(complete, key=lambda row: row["value"])
    return {"study": study.study_name, "storage": storage,
            "metric": ", ".join(sorted(metrics)) or None,
            "direction": study.direction.name.lower(), "best_trial": best, "trials": rows}


def write(output_dir: str, summary: dict) -> None:
    """search_results.json, and the best trial marked (when one completed and its
    folder is on this machine)."""
    fileio.write_text_atomic(os.path.join(output_dir, RESULTS_FILE),
                             json.dumps(summary, indent=2, sort_keys=True) + "\n")
    best = summary["best_trial"]
    if best is None:
        logging.warning("No trial of study %r has completed: no best trial to mark",
                        summary["study"])
        return
    run_groups.mark_best(output_dir, run_groups.BEST_TRIAL, dict(
        best, metric=summary["metric"], direction=summary["direction"]))


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return "-" if value is None else str(value)


def table(summary: dict) -> str:
    """The trials as a text table, the best one starred, and where the results are."""
    best = summary["best_trial"]
    names = sorted({name for row in summary["trials"] for name in row["params"]})
    header = ["", "trial", "state", summary["metric"] or "value"] + names + ["folder"]
    lines = [header]
    for row in summary["trials"]:
        star = "*" if best and row["trial"] == best["trial"] else ""
        lines.append([star, str(row["trial"]), row["state"], _cell(row["value"])]
                     + [_cell(row["params"].get(name)) for name in names] + [row["folder"]])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = "\n".join("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip()
                     for line in lines)
    verdict = (f"best: trial {best['trial']} ({best['folder']}), "
               f"{summary['metric']} = {_cell(best['value'])}" if best
               else "no trial completed")
    return (f"Study {summary['study']} ({summary['direction']} {summary['metric']}), "
            f"{len(summary['trials'])} trials in {summary['storage']}:\n{text}\n{verdict}\n")
