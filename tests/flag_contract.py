"""The contract every command's flags go through: each flag of the command, set to a
valid value other than its default (and each alias and switch spelling), reaches the
options object, and `--help` shows the dataclass default.

    check_every_flag_reaches_options(ClassifierOptions)
"""

import dataclasses

from absl import flags

from bert_tf.commands import command_line
from bert_tf import options as options_lib


def non_default_value(spec):
    """A valid value of `spec` other than its default, and its command-line text."""
    if spec.choices:
        value = next(choice for choice in spec.choices if choice != spec.default)
        return value, str(value)
    if spec.kind is bool:
        value = not spec.default
        return value, "true" if value else "false"
    if spec.kind is int:
        value = (spec.default or 0) + 3
        return value, str(value)
    if spec.kind is float:
        value = (spec.default or 0.0) + 0.25
        return value, repr(value)
    if spec.kind is list:
        return ["p", "q"], "p,q"
    return f"/tmp/not_the_default_{spec.name}", f"/tmp/not_the_default_{spec.name}"


def _parse(options_class, argv):
    flag_values = flags.FlagValues()
    command_line.define_flags(options_class, "flag_contract", flag_values)
    flag_values(["prog"] + argv)
    return flag_values, command_line.options_from_flags(options_class, flag_values)


def check_every_flag_reaches_options(options_class):
    """Asserts the contract for one options class; returns how many spellings it tried."""
    specs = options_lib.option_specs(options_class)
    assert specs, f"{options_class.__name__} declares no options"
    tried = 0
    for spec in specs:
        value, text = non_default_value(spec)
        for spelling in (spec.name,) + spec.aliases:
            _, parsed = _parse(options_class, [f"--{spelling}={text}"])
            assert getattr(parsed, spec.name) == value, (
                f"--{spelling}={text} did not reach {options_class.__name__}.{spec.name}: "
                f"{getattr(parsed, spec.name)!r}")
            tried += 1
        for switch, switched_value in spec.switches.items():
            _, parsed = _parse(options_class, [f"--{switch}"])
            assert getattr(parsed, spec.name) == switched_value, f"--{switch}"
            tried += 1
    flag_values, defaults = _parse(options_class, [])
    help_text = flag_values.get_help()
    for spec in specs:
        assert getattr(defaults, spec.name) == spec.default, spec.name
        assert flag_values[spec.name].default == spec.default, spec.name
        assert f"--{spec.name}" in help_text or f"--[no]{spec.name}" in help_text
        if spec.default is not None:
            shown = flag_values[spec.name].default_as_str
            assert f"(default: {shown})" in help_text.replace("\n    ", " "), spec.name
    field_names = {field.name for field in dataclasses.fields(options_class)}
    assert {spec.name for spec in specs} <= field_names
    return tried
