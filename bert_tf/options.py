"""Options are declared once: a dataclass field with its default and help.

    @dataclasses.dataclass(kw_only=True)
    class MyOptions:
        max_seq_length: int = option(128, "Sub-tokens per sequence.")
        steps_per_loop: int = option(100, "Steps per host loop.",
                                     aliases=("iterations_per_loop",))
        distribution_strategy: str = option("one_device", "Strategy.",
                                            choices=STRATEGIES, switches={"use_tpu": "tpu"})

The command line (`bert_tf.command_line`) generates each command's flags from these
fields: the flag's name, type, default and help are the field's; `aliases` are other
spellings of the same flag (the original scripts' names); `switches` are boolean flags
that, when set, give the field a value (`--use_tpu` is `distribution_strategy=tpu`).
`choices` is checked by `check_choices`. Nothing here reads flags.
"""

import dataclasses
import typing

MISSING = dataclasses.MISSING


def option(default=MISSING, help_text: str = "", *, aliases=(), choices=None,
           switches=None, flag: bool = True):
    """A dataclass field that declares one option.

    Args:
      default: The default (a list default is copied per instance).
      help_text: What the option does, shown by `--help`.
      aliases: Other flag spellings of this option.
      choices: The values allowed (None: any of the field's type).
      switches: {boolean flag name: value this option takes when that flag is set}.
      flag: False for an option that commands do not expose (set by code).
    """
    if not help_text:
        raise ValueError("every option needs a help text")
    metadata = {"help": help_text, "aliases": tuple(aliases),
                "choices": tuple(choices) if choices is not None else None,
                "switches": dict(switches or {}), "flag": flag}
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@dataclasses.dataclass(frozen=True)
class OptionSpec:
    """One declared option: its field name, base type, default and declaration."""
    name: str
    kind: type  # bool, int, float, str or list
    default: object
    help: str
    aliases: tuple
    choices: tuple
    switches: dict
    optional: bool  # None is a valid value


def _base_type(annotation):
    """(bool/int/float/str/list, whether None is allowed) of a field annotation."""
    optional = False
    if typing.get_origin(annotation) is typing.Union:
        args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        optional = len(args) < len(typing.get_args(annotation))
        annotation = args[0]
    if typing.get_origin(annotation) is list:
        annotation = list
    return annotation, optional


def option_specs(options_class) -> list:
    """The `OptionSpec` of every field declared with `option(flag=True)`."""
    hints = typing.get_type_hints(options_class)
    specs = []
    for field in dataclasses.fields(options_class):
        if not field.metadata.get("flag"):
            continue
        kind, optional = _base_type(hints[field.name])
        if field.default is not MISSING:
            default = field.default
        elif field.default_factory is not MISSING:
            default = field.default_factory()
        else:
            default = None
        specs.append(OptionSpec(field.name, kind, default, field.metadata["help"],
                                field.metadata["aliases"], field.metadata["choices"],
                                field.metadata["switches"], optional or default is None))
    return specs


def check_choices(options) -> None:
    """Raises ValueError for an option outside its declared `choices`, naming it."""
    for spec in option_specs(type(options)):
        value = getattr(options, spec.name)
        if spec.choices and value is not None and value not in spec.choices:
            raise ValueError(f"{spec.name} must be one of {', '.join(map(str, spec.choices))},"
                             f" got {value!r}")

