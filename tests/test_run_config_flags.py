"""`--config=FILE` for every command: a file of `options_to_dict` values gives the same
options field by field, a flag given on the command line overrides the file, and unknown
names or values of the wrong type are refused naming the file and the option."""

import dataclasses
import json
import os
import pathlib
import subprocess
import sys

import pytest
from absl import flags

from flag_contract import non_default_value
from test_option_groups import command_options
from bert_tf.commands import command_line
from bert_tf import options as options_lib
from bert_tf.options import option_specs

REPO = pathlib.Path(__file__).resolve().parents[1]
COMMANDS = command_options()
IDS = [options_class.__name__ for options_class in COMMANDS]


def parse(options_class, argv):
    """The options of `argv` (flags of `options_class` defined on fresh FlagValues)."""
    flag_values = flags.FlagValues()
    command_line.define_flags(options_class, "run_config_flags", flag_values)
    flag_values(["prog"] + argv)
    return command_line.options_from_flags(options_class, flag_values)


def non_default_options(options_class):
    """Options with every option set to a valid value other than its default."""
    return options_class(**{spec.name: non_default_value(spec)[0]
                            for spec in option_specs(options_class)})


def fields(options):
    return {field.name: getattr(options, field.name) for field in dataclasses.fields(options)}


def write(path, content):
    path.write_text(json.dumps(content, indent=1))
    return str(path)


@pytest.mark.parametrize("options_class", COMMANDS, ids=IDS)
def test_a_config_file_gives_the_same_options(options_class, tmp_path):
    options = non_default_options(options_class)
    values = options_lib.options_to_dict(options)
    json.dumps(values)  # JSON values only
    run_config = write(tmp_path / "config.json", {
        "format": 1, "command": "x", "task": "x", "model": {"hidden_size": 8},
        "labels": ["a"], "export": {}, "vocab": {}, "options": values})
    by_hand = write(tmp_path / "by_hand.json", values)
    for path in (run_config, by_hand):
        assert fields(parse(options_class, [f"--config={path}"])) == fields(options)
    assert fields(options_lib.options_from_dict(options_class, values, "x")) == \
        fields(options)


@pytest.mark.parametrize("options_class", COMMANDS, ids=IDS)
def test_flags_on_the_command_line_override_the_file(options_class, tmp_path):
    options = non_default_options(options_class)
    path = write(tmp_path / "config.json", {"options": options_lib.options_to_dict(options)})
    for spec in option_specs(options_class):
        # Back to the default, spelled as the flag, its first alias, or its switch.
        text = spec.default if spec.kind is not bool else str(spec.default).lower()
        if spec.default is None or spec.kind is list:
            continue
        for spelling in (spec.name,) + spec.aliases[:1]:
            parsed = parse(options_class, [f"--config={path}", f"--{spelling}={text}"])
            assert getattr(parsed, spec.name) == spec.default, (spelling, spec.name)
            others = {name: value for name, value in fields(parsed).items()
                      if name != spec.name}
            assert others == {name: value for name, value in fields(options).items()
                              if name != spec.name}
    for spec in option_specs(options_class):
        for switch, value in spec.switches.items():
            parsed = parse(options_class, [f"--config={path}", f"--{switch}"])
            assert getattr(parsed, spec.name) == value


def test_a_file_without_a_flag_keeps_the_commands_defaults(tmp_path):
    from bert_tf.tasks.squad.options import (  # pylint: disable=import-outside-toplevel
        SquadOptions)
    path = write(tmp_path / "config.json", {"learning_rate": 3e-5, "iterations_per_loop": 7,
                                            "use_tpu": True})
    parsed = parse(SquadOptions, [f"--config={path}"])
    assert (parsed.learning_rate, parsed.steps_per_loop, parsed.distribution_strategy) == (
        3e-5, 7, "tpu")
    assert parsed.max_seq_length == 384 and parsed.doc_stride == 128


@pytest.mark.parametrize("options_class", COMMANDS, ids=IDS)
def test_unknown_names_and_wrong_types_are_refused_naming_the_file(options_class, tmp_path):
    path = write(tmp_path / "config.json", {"options": {"no_such_option": 1}})
    with pytest.raises(ValueError, match=rf"--config={path}: no_such_option is not an "
                                         "option of this command"):
        parse(options_class, [f"--config={path}"])
    spec = next(spec for spec in option_specs(options_class) if spec.kind in (int, str))
    path = write(tmp_path / "typed.json", {spec.name: [1, 2]})
    with pytest.raises(ValueError, match=rf"{path}: option {spec.name}: expected "):
        parse(options_class, [f"--config={path}"])


def test_values_are_checked_against_their_type_and_choices():
    from bert_tf.runs.options import FinetuneOptions  # pylint: disable=import-outside-toplevel
    cases = [({"do_train": "yes"}, "do_train: expected true or false, got 'yes'"),
             ({"train_batch_size": 3.5}, "train_batch_size: expected an integer, got 3.5"),
             ({"train_batch_size": True}, "train_batch_size: expected an integer"),
             ({"learning_rate": "fast"}, "learning_rate: expected a number, got 'fast'"),
             ({"do_lower_case": None}, "do_lower_case: expected true or false, got None"),
             ({"optimizer": "sgd"}, "optimizer: expected one of adamw, lamb, got 'sgd'"),
             ({"steps_per_loop": 5, "iterations_per_loop": 6},
              "steps_per_loop and iterations_per_loop are the same option"),
             (["do_train"], "expected an object of options")]
    for values, message in cases:
        with pytest.raises(ValueError, match=f"my.json: .*{message}"):
            options_lib.options_from_dict(FinetuneOptions, values, "my.json")
    assert options_lib.options_from_dict(FinetuneOptions, {"learning_rate": 1},
                                         "my.json").learning_rate == 1.0
    assert options_lib.options_from_dict(FinetuneOptions, {"tpu_name": None},
                                         "my.json").tpu_name is None


def test_bad_config_files_are_refused_naming_them(tmp_path):
    from bert_tf.runs.options import FinetuneOptions  # pylint: disable=import-outside-toplevel
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "list.json").write_text("[1]")
    for name, message in (("broken.json", "not valid JSON"),
                          ("list.json", "expected a JSON object")):
        with pytest.raises(ValueError, match=f"--config=.*{name}: {message}"):
            parse(FinetuneOptions, [f"--config={tmp_path / name}"])
    with pytest.raises(OSError):
        parse(FinetuneOptions, [f"--config={tmp_path / 'missing.json'}"])


def test_a_config_file_satisfies_the_required_flags(tmp_path):
    # run_ner requires --output_dir: given by the file, the run gets past that check
    # and stops at the next one (no step asked for).
    path = write(tmp_path / "config.json", {"options": {"output_dir": str(tmp_path / "o")}})
    done = subprocess.run([sys.executable, "-m", "bert_tf.cli.run_ner", f"--config={path}"],
                          cwd=REPO, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1 and "is required" not in last, last
    assert "--do_train" in last, last
    bad = write(tmp_path / "bad.json", {"options": {"out_dir": "x"}})
    done = subprocess.run([sys.executable, "-m", "bert_tf.cli.run_ner", f"--config={bad}"],
                          cwd=REPO, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert done.stderr.strip().splitlines()[-1] == (
        f"bert-run-ner: error: --config={bad}: out_dir is not an option of this command "
        "(expected the names of its flags, as NerOptions declares them)")
