"""The options of a hyperparameter search (`bert-search`), one group composed with the
options of the task it searches (`with_search`)."""

import dataclasses
import functools
from typing import Optional

from bert_tf.options import OptionGroup, check_integer, compose, option

PRUNERS = ("median", "percentile", "successive_halving", "hyperband", "none")
DIRECTIONS = ("maximize", "minimize")


@dataclasses.dataclass(kw_only=True)
class SearchOptions(OptionGroup):
    """What a search varies, how many trials it runs, and where its study lives."""
    search: Optional[str] = option(
        None, "The search space: a JSON file {option: range or choices}, e.g. "
        '{"learning_rate": {"low": 1e-5, "high": 1e-4, "log": true}, "seed": {"choices": '
        "[1, 2, 3]}} (docs/finetuning.md, Hyperparameter search).")
    trials: int = option(10, "Trials this process runs (processes sharing "
                             "--search_storage each run this many).")
    search_storage: Optional[str] = option(
        None, "The Optuna study's database URL (default: sqlite:///<output_dir>/search.db). "
        "Machines started with the same command and a shared postgresql://... or "
        "mysql://... URL run the trials of one study together.")
    search_study_name: Optional[str] = option(
        None, "The study's name in the storage (default: the output_dir's folder name).")
    search_metric: Optional[str] = option(
        None, "The dev metric a trial is scored by (a name of eval_results.txt; default: "
        "--best_metric, else the task's first metric, e.g. eval_accuracy).")
    search_direction: Optional[str] = option(
        None, "maximize or minimize the metric (default: minimize names containing "
        "'loss', maximize the others).", choices=DIRECTIONS)
    pruner: str = option(
        "median", "Stops a trial whose dev scores (--eval_every_steps) fall behind "
        "the other trials' at the same step: median (Optuna's MedianPruner), percentile "
        "(below the 25th), successive_halving, hyperband, or none.", choices=PRUNERS)

    def check(self) -> None:
        """Refuses a search without trials (`--search` is a required flag of
        bert-search; `study.run_search` refuses a search without it)."""
        check_integer(self, "trials")


@functools.lru_cache(maxsize=None)
def with_search(options_class):
    """The options of `bert-search` for a task of `options_class`: its own and
    `SearchOptions` (one class per task)."""
    return compose(f"Search{options_class.__name__}", options_class, SearchOptions,
                   doc=f"{options_class.__name__} plus the search's options.")


def split(options, options_class) -> tuple:
    """(the task's `options_class` options, `SearchOptions`) of composed `options`."""
    search_names = {field.name for field in dataclasses.fields(SearchOptions)}
    values = {field.name: getattr(options, field.name)
              for field in dataclasses.fields(options)}
    return (options_class(**{name: value for name, value in values.items()
                             if name not in search_names}),
            SearchOptions(**{name: values[name] for name in search_names}))
