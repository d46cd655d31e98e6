"""The end of a run of several seeds: the statistics over the seeds, the table, the
failed seeds, `seeds_results.json`, TensorBoard, and the best seed marked
(`best_seed.json` and the link `best_seed` -> `seed-N`).

    summary = summarize(rows, "eval_accuracy")
    write(output_dir, summary); print(table(summary))
"""

import json
import math
import os
import statistics

import tensorflow as tf
from absl import logging

from bert_tf.io import fileio
from bert_tf.runs import best_checkpoint, run_groups
from bert_tf.train import loop_runner

RESULTS_FILE = "seeds_results.json"
SUMMARY_FOLDER = "seeds"  # TensorBoard
STATES = ("trained", "stopped", "diverged")  # to the end; by --stop_bad_seeds_after; NaN


def seed_row(seed: int, folder: str, state: str, results: dict, metric: str,
             baseline: dict) -> dict:
    """One seed as the summary keeps it; `failed` says why a seed failed (None: it did
    not): its loss diverged, or its score is no better than the best constant
    prediction's (`baseline`: the task's `baseline_scores`)."""
    value = results.get(metric)
    value = float(value) if value is not None and math.isfinite(value) else None
    failed = None
    if state == "diverged":
        failed = "the loss diverged (not finite)"
    elif state == "trained" and value is None:
        failed = f"{metric} is not finite"
    elif state == "trained" and metric in baseline:
        floor = baseline[metric]
        worse = value >= floor if best_checkpoint.is_minimised(metric) else value <= floor
        if worse:
            failed = f"{metric} {value:.6g} is at or below the constant prediction's {floor:.6g}"
    return {"seed": seed, "folder": os.path.basename(folder), "state": state,
            "value": value, "failed": failed, "global_step": results.get("global_step"),
            "results": {key: val for key, val in results.items()
                        if isinstance(val, (int, float))}}


def statistics_of(values) -> dict:
    """Mean, sample standard deviation (0 for one value), median, min and max."""
    if not values:
        return {}
    return {"mean": statistics.fmean(values),
            "std": statistics.stdev(values) if len(values) > 1 else 0.0,
            "median": statistics.median(values), "min": min(values), "max": max(values),
            "count": len(values)}


def summarize(rows: list, metric: str, baseline: dict) -> dict:
    """The seeds' statistics (over the seeds trained to the end, failed ones included),
    the failed and stopped seeds, and the best seed (the best score of a seed trained to
    the end that did not fail)."""
    trained = [row for row in rows if row["state"] == "trained" and row["value"] is not None]
    good = [row for row in trained if not row["failed"]]
    best = None
    if good:
        pick = min if best_checkpoint.is_minimised(metric) else max
        best = pick(good, key=lambda row: row["value"])
    return {"metric": metric, "seeds": rows,
            "statistics": statistics_of([row["value"] for row in trained]),
            "baseline": baseline.get(metric),
            "failed": [row["seed"] for row in rows if row["failed"]],
            "stopped": [row["seed"] for row in rows if row["state"] == "stopped"],
            "best_seed": best and best["seed"], "best_folder": best and best["folder"]}


def write(output_dir: str, summary: dict) -> None:
    """seeds_results.json, the TensorBoard summary and the best seed marked."""
    fileio.write_text_atomic(os.path.join(output_dir, RESULTS_FILE),
                             json.dumps(summary, indent=2, sort_keys=True) + "\n")
    _write_tensorboard(os.path.join(output_dir, SUMMARY_FOLDER), summary)
    if summary["best_seed"] is None:
        logging.warning("No seed trained to the end without failing: no best seed to mark")
        run_groups.unmark_best(output_dir, run_groups.BEST_SEED)  # an earlier run's
        return
    best = next(row for row in summary["seeds"] if row["seed"] == summary["best_seed"])
    run_groups.mark_best(output_dir, run_groups.BEST_SEED, dict(best, metric=summary["metric"]))


def _write_tensorboard(folder: str, summary: dict) -> None:
    """Each seed's score at step = its seed, the statistics, and the table as text."""
    metric = summary["metric"]
    with tf.summary.create_file_writer(folder).as_default():
        for row in summary["seeds"]:
            if row["value"] is not None:
                loop_runner.write_scalar_summary(f"seeds/{metric}", row["value"],
                                                 step=row["seed"])
        for name, value in summary["statistics"].items():
            loop_runner.write_scalar_summary(f"seeds/{metric}_{name}", value, step=0)
        # Four spaces: TensorBoard shows the table as preformatted markdown.
        loop_runner.write_text_summary("seeds/summary", "\n".join(
            "    " + line for line in table(summary).splitlines()), step=0)


def _cell(value) -> str:
    return "-" if value is None else f"{value:.4f}" if isinstance(value, float) else str(value)


def table(summary: dict) -> str:
    """The seeds as a text table, the best starred, then the statistics and failures."""
    metric, stats = summary["metric"], summary["statistics"]
    lines = [["", "seed", "state", metric, "global_step", "failed"]]
    for row in summary["seeds"]:
        lines.append(["*" if row["seed"] == summary["best_seed"] else "", str(row["seed"]),
                      row["state"], _cell(row["value"]), _cell(row["global_step"]),
                      row["failed"] or ""])
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    text = "\n".join("  ".join(cell.ljust(width) for cell, width in zip(line, widths)
                               ).rstrip() for line in lines)
    if stats:
        text += (f"\n{metric} over the {stats['count']} seed(s) trained to the end: mean "
                 f"{stats['mean']:.4f}, std {stats['std']:.4f}, median {stats['median']:.4f},"
                 f" min {stats['min']:.4f}, max {stats['max']:.4f}")
    if summary["baseline"] is not None:
        text += f"\nconstant-prediction baseline: {metric} {summary['baseline']:.4f}"
    text += f"\nfailed: {len(summary['failed'])} of {len(summary['seeds'])} seeds"
    text += f" ({', '.join(map(str, summary['failed']))})" if summary["failed"] else ""
    if summary["stopped"]:
        text += ("\nstopped early (bottom half): seeds "
                 + ", ".join(map(str, summary["stopped"])))
    text += (f"\nbest: seed {summary['best_seed']} ({summary['best_folder']})"
             if summary["best_seed"] is not None else "\nno best seed (none trained to "
             "the end without failing)")
    return text
