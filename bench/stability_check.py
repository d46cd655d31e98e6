"""Issue 50's measurement: fine-tuning recipes over several seeds on a small GLUE task,
and a hyperparameter search beside the best seed of the default recipe.

    .venv/bin/python bench/stability_check.py --task=RTE --seeds=1,2,3,4,5 \
        --output_dir=/tmp/stability
    .venv/bin/python bench/stability_check.py --task=MRPC --seeds=1,2,3,4,5 \
        --search_trials=20 --output_dir=/tmp/stability

Each recipe is one `bert-run-classifier --seeds=...` run (the command users type) in
`output_dir/<task>/<recipe>`, on the shared `uncased_L-6_H-384_A-12`:

- original: google-research's recipe: lr 2e-5, 3 epochs, batch 32, 10% warm-up, Adam
  without bias correction (`--noadam_bias_correction`).
- stable: Mosbach et al.'s, `docs/examples/stable_finetuning.json` (bias-corrected AdamW,
  20 epochs, batch 16, dev every 150 steps, the best checkpoint kept).
- llrd: the original with `--layerwise_lr_decay=0.8` alone.
- reinit: the original with `--reinit_top_layers=1` alone.

A rerun continues where the last one stopped: a recipe whose `seeds_results.json` holds
every asked seed is read, not trained again, and a seed's folder resumes from its last
checkpoint. So the campaign (hours on 2 CPU cores) can be run in pieces. With
`--search_trials=N`, `bert-search` runs N trials of the space `SEARCH_SPACE` on the
task (MRPC in the issue) in `output_dir/<task>/search`, and its best trial is printed
beside the best seed of the original recipe and of the stable one.

Prints one row a recipe (each seed, mean, sd, median, failed seeds) and the machine.
Not part of the tests.
"""

import functools
import json
import os
import subprocess
import sys

from absl import app, flags

import machine
import seed_summary

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("BERT_TF_SHARED_DATA", os.path.join(REPO, "..", "shared", "data"))
ORIGINAL = ["--learning_rate=2e-5", "--num_train_epochs=3", "--train_batch_size=32",
            "--warmup_proportion=0.1", "--noadam_bias_correction"]
RECIPES = {
    "original": ORIGINAL,
    "stable": [f"--config={os.path.join(REPO, 'docs', 'examples', 'stable_finetuning.json')}"],
    "llrd": ORIGINAL + ["--layerwise_lr_decay=0.8"],
    "reinit": ORIGINAL + ["--reinit_top_layers=1"],
}
SEARCH_SPACE = {"learning_rate": {"low": 1e-5, "high": 1e-4, "log": True},
                "num_train_epochs": {"choices": [3, 5, 10]},
                "train_batch_size": {"choices": [16, 32]},
                "warmup_proportion": {"low": 0.0, "high": 0.2},
                "layerwise_lr_decay": {"choices": [1.0, 0.9, 0.8]}}

flags.DEFINE_enum("task", "RTE", ["RTE", "MRPC"], "GLUE task (scored by accuracy).")
flags.DEFINE_string("seeds", "1,2,3,4,5", "Seeds of each recipe.")
flags.DEFINE_list("recipes", list(RECIPES), f"Recipes to run, of {', '.join(RECIPES)}.")
flags.DEFINE_integer("train_examples", 0, "Use the first N training rows (0: all; a "
                     "quick try of the script).")
flags.DEFINE_integer("search_trials", 0, "bert-search trials on the task (0: none).")
flags.DEFINE_string("output_dir", "/tmp/stability", "Where the runs go (reruns continue).")
FLAGS = flags.FLAGS


@functools.cache
def data_dir():
    """The task's GLUE folder, or a copy cut to --train_examples rows (made once)."""
    task_dir = os.path.join(SHARED, "glue", FLAGS.task)
    if not FLAGS.train_examples:
        return task_dir
    return seed_summary.first_glue_rows(task_dir, FLAGS.task, FLAGS.train_examples,
                                        os.path.join(FLAGS.output_dir, FLAGS.task))


def common_flags(output_dir):
    return [f"--task_name={FLAGS.task}", f"--data_dir={data_dir()}",
            f"--init_checkpoint={os.path.join(SHARED, 'checkpoints', 'uncased_L-6_H-384_A-12')}",
            "--do_lower_case", "--do_train", "--do_eval", "--max_seq_length=128",
            "--trim_padding", f"--output_dir={output_dir}"]


def run_recipe(name, seeds):
    """The recipe's seeds summary, training what is not trained yet."""
    output_dir = os.path.join(FLAGS.output_dir, FLAGS.task, name)
    results = os.path.join(output_dir, "seeds_results.json")
    if os.path.isfile(results):
        with open(results, encoding="utf-8") as file:
            summary = json.load(file)
        if sorted(row["seed"] for row in summary["seeds"]) == sorted(seeds):
            return summary
    return run_and_read([sys.executable, os.path.join(REPO, "run_classifier.py"),
                         *common_flags(output_dir), *RECIPES[name],
                         f"--seeds={','.join(map(str, seeds))}"], results)


def run_search(trials):
    """bert-search's results (search_results.json) after `trials` trials in all."""
    output_dir = os.path.join(FLAGS.output_dir, FLAGS.task, "search")
    os.makedirs(output_dir, exist_ok=True)
    space = os.path.join(output_dir, "space.json")
    with open(space, "w", encoding="utf-8") as file:
        json.dump(SEARCH_SPACE, file)
    results = os.path.join(output_dir, "search_results.json")
    done = finished_trials(output_dir)
    command = [sys.executable, "-m", "bert_tf.cli.search", "--task=classification",
               *common_flags(output_dir), "--eval_every_steps=50", f"--search={space}",
               "--seed=1", f"--trials={trials - done}"]
    return run_and_read(command if done < trials else None, results)


def run_and_read(command, results):
    """Runs `command` (None: nothing left to run) and reads the JSON it wrote."""
    if command:
        print(" ".join(command), flush=True)
        subprocess.run(command, check=True)
    with open(results, encoding="utf-8") as file:
        return json.load(file)


def finished_trials(output_dir):
    """Trials of the study in `output_dir` that completed or were pruned (an interrupted
    one runs again)."""
    database = os.path.join(output_dir, "search.db")
    if not os.path.isfile(database):
        return 0
    import optuna  # the search extra, only where a search runs
    study = optuna.load_study(study_name=os.path.basename(output_dir),
                              storage=f"sqlite:///{database}")
    states = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    return sum(trial.state in states for trial in study.trials)


def row(name, summary):
    stats = summary["statistics"]
    scores = " / ".join("-" if s["value"] is None else f"{100 * s['value']:.2f}"
                        for s in summary["seeds"])
    failed = ", ".join(str(seed) for seed in summary["failed"]) or "none"
    return (f"| {name} | {scores} | {100 * stats['mean']:.2f} | {100 * stats['std']:.2f} | "
            f"{100 * stats['median']:.2f} | {100 * stats['max']:.2f} | {failed} |")


def main(argv):
    del argv
    print(machine.describe(), flush=True)
    seeds = [int(seed) for seed in FLAGS.seeds.split(",")]
    summaries = {name: run_recipe(name, seeds) for name in FLAGS.recipes}
    if summaries:
        first = next(iter(summaries.values()))
        print(f"\n{FLAGS.task} dev {first['metric']}, seeds {FLAGS.seeds} (the constant "
              f"prediction's: {100 * (first['baseline'] or 0):.2f})")
        print("| recipe | seeds | mean | sd | median | max | failed |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for name, summary in summaries.items():
            print(row(name, summary))
    if FLAGS.search_trials:
        search = run_search(FLAGS.search_trials)
        best = search.get("best_trial") or {}
        print(f"search: {len(search.get('trials', []))} trials; best: trial "
              f"{best.get('trial')} {100 * (best.get('value') or 0):.2f} {best.get('params')}")
        for name in ("original", "stable"):
            if name in summaries:
                print(f"  best seed of {name}: {100 * summaries[name]['statistics']['max']:.2f}")


if __name__ == "__main__":
    app.run(main)
