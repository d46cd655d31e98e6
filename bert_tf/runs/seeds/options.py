"""The options of a run of several seeds, one group that every fine-tuning command
composes (`bert_tf.runs.options.FINETUNING`)."""

import dataclasses

from bert_tf.options import OptionGroup, check_integer, option

FLAGS = ("seeds", "num_seeds", "stop_bad_seeds_after")


@dataclasses.dataclass(kw_only=True)
class Seeds(OptionGroup):
    """Several seeds as one run: one run folder each, a summary across them."""
    seeds: list = option(
        [], "Train, and score on the dev data, one run per seed (comma-separated "
        "integers >= 0, e.g. 1,2,3,4,5), each in output_dir/seed-N; then log the "
        "summary (per-seed scores, mean, standard deviation, median, min, max, the failed "
        "seeds: diverged, or at or below the constant-prediction baseline), write it to "
        "output_dir/seeds_results.json and TensorBoard (output_dir/seeds), and mark the "
        "best seed by --best_metric (else the task's first metric): output_dir/best_seed "
        "links to its folder, and bert-export-model --init_checkpoint=output_dir exports "
        "it. --seed is then ignored. Default: one run.")
    num_seeds: int = option(0, "Like --seeds=1,...,N. 0: off.")
    stop_bad_seeds_after: float = option(
        0.0, "With several seeds, train every seed to this fraction F of its steps, score "
        "each on the dev data, stop those in the bottom half there and train the others "
        "to the end (Dodge et al. 2020: start many, stop the bad ones early). 0: every "
        "seed trains to the end.")

    def check(self) -> None:
        check_integer(self, "num_seeds", 0, " (0: off)")
        seeds = seed_list(self)
        if not 0 <= self.stop_bad_seeds_after < 1:
            raise ValueError(f"--stop_bad_seeds_after must be in [0, 1) (a fraction of "
                             f"the steps; 0: off), got {self.stop_bad_seeds_after}")
        if self.stop_bad_seeds_after and len(seeds) < 2:
            raise ValueError(f"--stop_bad_seeds_after={self.stop_bad_seeds_after} ranks "
                             "several seeds: add --seeds=1,2,3,4 (or --num_seeds=4)")


def seed_list(options) -> list:
    """The seeds of `--seeds` / `--num_seeds` as ints ([] for one ordinary run).

    Raises:
      ValueError: naming the flag, for a seed that is not an integer >= 0, a repeated
        seed, or both flags given.
    """
    text = ",".join(str(item) for item in (getattr(options, "seeds", None) or []))
    count = getattr(options, "num_seeds", 0) or 0
    if text.strip(",") and count:
        raise ValueError(f"--seeds={text} and --num_seeds={count} both name the seeds: "
                         "give one of them")
    if count:
        return list(range(1, count + 1))
    parts = [part.strip() for part in text.split(",") if part.strip()]
    try:
        seeds = [int(part) for part in parts]
    except ValueError:
        raise ValueError(f"--seeds={text}: expected comma-separated integers >= 0, e.g. "
                         "1,2,3") from None
    negative = [seed for seed in seeds if seed < 0]
    repeated = sorted({seed for seed in seeds if seeds.count(seed) > 1})
    if negative or repeated:
        raise ValueError(f"--seeds={text}: expected distinct integers >= 0; "
                         + (f"negative: {negative}" if negative else f"repeated: {repeated}"))
    return seeds
