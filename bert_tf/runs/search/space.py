"""The search space file of `bert-search --search=FILE`: which options a trial varies,
and over what (read and checked before any work; no Optuna needed).

    {"learning_rate": {"low": 1e-5, "high": 1e-4, "log": true},
     "num_train_epochs": {"choices": [2, 3, 4]},
     "train_batch_size": {"choices": [16, 32]},
     "warmup_proportion": {"low": 0.0, "high": 0.2},
     "dropout_rate": {"low": 0.0, "high": 0.3, "step": 0.05},
     "seed": {"choices": [1, 2, 3]}}

Each key is an option of the task's command (its flag name); each value is a range
(`low` < `high`, numbers of the option's type; `log`: sampled on a log scale, so
`low` > 0; `step`: only multiples of it above `low`) or `choices` (a non-empty list of
values of the option's type). Every value a range or list can give is checked with the
command's own rules before the first trial starts.
"""

import dataclasses
import json
import math
from typing import Optional

from bert_tf.io import fileio
from bert_tf import options as options_lib

RANGE_KEYS = ("low", "high", "log", "step")
# What the search itself sets for each trial (or what makes no sense to vary).
NOT_SEARCHED = ("output_dir", "export_dir", "do_train", "do_eval", "do_predict")


@dataclasses.dataclass(frozen=True)
class Param:
    """One searched option.

    Attributes:
      name: The option (the flag name).
      kind: int or float for a range; None for choices.
      low, high: The range's ends (both included).
      log: Sampled on a log scale.
      step: The range's spacing (None: continuous floats, 1 for integers).
      choices: The values to choose from (None for a range).
    """
    name: str
    kind: Optional[type] = None
    low: Optional[float] = None
    high: Optional[float] = None
    log: bool = False
    step: Optional[float] = None
    choices: Optional[tuple] = None

    def values_to_check(self) -> list:
        """The values whose options must pass the command's checks: the range's ends,
        or every choice."""
        return list(self.choices) if self.choices is not None else [self.low, self.high]

    def suggest(self, trial):
        """This option's value for Optuna `trial`."""
        if self.choices is not None:
            return trial.suggest_categorical(self.name, list(self.choices))
        if self.kind is int:
            return trial.suggest_int(self.name, int(self.low), int(self.high),
                                     step=int(self.step or 1), log=self.log)
        return trial.suggest_float(self.name, self.low, self.high, step=self.step,
                                   log=self.log)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def read(path: str) -> dict:
    """The JSON object of space file `path`.

    Raises:
      OSError / ValueError: naming the file, when it cannot be read, is not JSON, or is
        not a non-empty object.
    """
    what = "the search space file of --search (a JSON object {option: range or choices})"
    try:
        space = fileio.read_json(path, what)
    except ValueError as error:
        raise ValueError(f"--search={path}: not a JSON file ({error})") from None
    except OSError as error:
        raise OSError(f"--search={path}: cannot read the search space file "
                      f"({error.strerror or error})") from None
    if not isinstance(space, dict) or not space:
        raise ValueError(f"--search={path}: expected a JSON object of the options to "
                         'search, e.g. {"learning_rate": {"low": 1e-5, "high": 1e-4, '
                         f'"log": true}}}}, got {json.dumps(space)[:60]}')
    return space


def _choices_param(name, spec, where) -> Param:
    choices = spec["choices"]
    if set(spec) != {"choices"}:
        raise ValueError(f"{where}: give either choices or a range (low, high), not both")
    if not isinstance(choices, list) or not choices:
        raise ValueError(f"{where}: choices must be a non-empty list of values, got "
                         f"{json.dumps(choices)}")
    for choice in choices:
        if not (choice is None or isinstance(choice, (bool, int, float, str))):
            raise ValueError(f"{where}: a choice must be a number, a string, true/false or "
                             f"null, got {json.dumps(choice)}")
    return Param(name, choices=tuple(choices))


def _range_param(name, spec, kind, where) -> Param:
    unknown = sorted(set(spec) - set(RANGE_KEYS))
    if unknown or not {"low", "high"} <= set(spec):
        raise ValueError(f"{where}: expected a range {{\"low\": .., \"high\": .. [, \"log\": "
                         f"true] [, \"step\": ..]}} or {{\"choices\": [..]}}, got "
                         f"{json.dumps(spec)}")
    if kind not in (int, float):
        raise ValueError(f"{where}: a range needs an option that is a number, and this one "
                         f"is {kind.__name__}: give choices instead")
    low, high, log, step = spec["low"], spec["high"], spec.get("log", False), spec.get("step")
    for key, value in (("low", low), ("high", high)) + ((("step", step),) if step else ()):
        if not _is_number(value) or not math.isfinite(value) or (
                kind is int and not float(value).is_integer()):
            raise ValueError(f"{where}: {key} must be {'an integer' if kind is int else 'a number'}"
                             f", got {json.dumps(value)}")
    if not isinstance(log, bool):
        raise ValueError(f"{where}: log must be true or false, got {json.dumps(log)}")
    if not low < high:
        raise ValueError(f"{where}: an empty range (low={low}, high={high}): expected "
                         "low < high (a fixed value is a flag, not a search)")
    if log and low <= 0:
        raise ValueError(f"{where}: a log range must lie above zero, got low={low}: "
                         "expected low > 0, or \"log\": false")
    if step is not None and (step <= 0 or log):
        raise ValueError(f"{where}: step must be > 0 and without log, got step={step}")
    return Param(name, kind, low, high, log, step)


def parse(space: dict, options_class, path: str) -> list:
    """The `Param`s of `space` (read from `path`), for a command of `options_class`.

    Raises:
      ValueError: naming the file and the key: a key that is not an option of the
        command (or one the search sets), a range or choices that cannot work.
    """
    specs = {spec.name: spec for spec in options_lib.option_specs(options_class)}
    params = []
    for name, spec in space.items():
        where = f"--search={path}: {name}"
        if name not in specs:
            raise ValueError(f"{where}: not an option of this command (expected the name "
                             "of one of its flags, e.g. learning_rate, num_train_epochs, "
                             "train_batch_size, warmup_proportion, seed)")
        if name in NOT_SEARCHED:
            raise ValueError(f"{where}: set by the search itself, not searched over "
                             f"(the options it sets: {', '.join(NOT_SEARCHED)})")
        if not isinstance(spec, dict):
            raise ValueError(f"{where}: expected {{\"low\": .., \"high\": ..}} or "
                             f"{{\"choices\": [..]}}, got {json.dumps(spec)}")
        params.append(_choices_param(name, spec, where) if "choices" in spec
                      else _range_param(name, spec, specs[name].kind, where))
    return params


def check_values(params, base, path: str) -> None:
    """Runs the command's checks on `base` with each value each param can take.

    Raises:
      ValueError: naming the file, the option and the value that the command refuses.
    """
    values = options_lib.options_to_dict(base)
    for param in params:
        for value in param.values_to_check():
            source = f"--search={path}: {param.name}={json.dumps(value)}"
            try:
                options_lib.options_from_dict(type(base), dict(values, **{param.name: value}),
                                              source).check()
            except ValueError as error:
                text = str(error)
                raise ValueError(text if text.startswith(source) else f"{source}: {text}") \
                    from None


def trial_options(base, params_values: dict, output_dir: str, source: str):
    """`base` with a trial's values and its own output_dir, checked."""
    values = dict(options_lib.options_to_dict(base), **params_values, output_dir=output_dir)
    options = options_lib.options_from_dict(type(base), values, source)
    options.check()
    return options
