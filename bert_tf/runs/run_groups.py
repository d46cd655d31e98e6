"""A folder that holds several runs (the seeds of `--seeds`, the trials of `bert-search`)
and marks its best one: a JSON file naming the run's folder, and a link to it.

    run_groups.mark_best(output_dir, run_groups.BEST_SEED, {"folder": "seed-3", ...})
    run_groups.best_run("/tmp/mrpc_seeds")   # "/tmp/mrpc_seeds/seed-3"

Whatever takes a run folder (`bert-export-model --init_checkpoint`, a distillation's
`--teacher`) takes such a folder too, and uses its best run (`best_run`).
"""

import dataclasses
import json
import os

from absl import logging

from bert_tf.io import fileio


@dataclasses.dataclass(frozen=True)
class BestMark:
    """How a kind of group marks its best run: `file` (JSON with "folder") and `link`."""
    file: str
    link: str
    kind: str  # what the runs are, for logs


BEST_SEED = BestMark("best_seed.json", "best_seed", "seeds")
BEST_TRIAL = BestMark("best_trial.json", "best_trial", "search trials")
MARKS = (BEST_SEED, BEST_TRIAL)


def mark_best(output_dir: str, mark: BestMark, best: dict) -> None:
    """Writes `mark.file` (`best`, which names the run's "folder" in `output_dir`) and
    the link `mark.link` -> that folder, both replaced atomically."""
    fileio.write_text_atomic(os.path.join(output_dir, mark.file),
                             json.dumps(best, indent=2, sort_keys=True) + "\n")
    if not os.path.isdir(os.path.join(output_dir, best["folder"])):
        logging.warning("The best run's folder %s is not in %s (%s names it)",
                        best["folder"], output_dir, mark.file)
        return
    link = os.path.join(output_dir, mark.link)
    temporary = f"{link}.tmp-{os.getpid()}"
    try:
        os.symlink(best["folder"], temporary)
        os.replace(temporary, link)
    except OSError as error:  # a filesystem without links: the JSON file names it
        logging.warning("Cannot link %s to %s (%s); %s names the best run", link,
                        best["folder"], error, mark.file)


def unmark_best(output_dir: str, mark: BestMark) -> None:
    """Removes an earlier run's mark (when no run of this one is best)."""
    for name in (mark.file, mark.link):
        path = os.path.join(output_dir, name)
        if os.path.lexists(path):
            os.remove(path)


def best_run(path):
    """The best run of `path` when it is a folder of several runs that marks one (its
    seeds or trials), logged; else `path` unchanged.

    Raises:
      ValueError: naming the file, when the mark is unreadable or names no run folder.
    """
    if not path or not os.path.isdir(path):
        return path
    for mark in MARKS:
        file_path = os.path.join(path, mark.file)
        if not os.path.isfile(file_path):
            continue
        try:
            with open(file_path, encoding="utf-8") as file:
                folder = json.load(file)["folder"]
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ValueError(f"{file_path}: cannot read the best run's folder ({error}); "
                             "name the run's folder itself") from None
        run = os.path.join(path, folder)
        if not os.path.isdir(run):
            raise ValueError(f"{file_path} names {folder}, which is not a folder in "
                             f"{path}; name a run's folder itself")
        logging.info("%s holds %s; using its best run, %s", path, mark.kind, run)
        return run
    return path
