"""Options are declared once, in small groups, and composed per command.

A group is a dataclass of a few options, each a field with its default and help, and a
`check` that refuses the group's own bad values, naming the option:

    @dataclasses.dataclass(kw_only=True)
    class Checkpointing(OptionGroup):
        steps_per_loop: int = option(100, "Steps per host loop.",
                                     aliases=("iterations_per_loop",))
        def check(self):
            check_integer(self, "steps_per_loop")

A command's options compose the groups it takes (as tensorflow/models composes
TaskConfig + TrainerConfig + RuntimeConfig); a command that needs another default or help
for a shared option overrides it there, without declaring the field again:

    SquadOptions = compose("SquadOptions", Checkpointing, SequenceLength, ...,
                           defaults={"max_seq_length": 384})
    SquadOptions().max_seq_length          # 384; --help shows 384 too
    SquadOptions(...).check()              # choices, then every group's check once

The command line (`bert_tf.commands.command_line`) generates each command's flags from these
fields: the flag's name, type, default and help are the field's (or the command's
override); `aliases` are other spellings of the same flag (the original scripts' names);
`switches` are boolean flags that, when set, give the field a value (`--use_tpu` is
`distribution_strategy=tpu`). `options_to_dict` / `options_from_dict` turn options into
JSON values and back (a run's config.json). Nothing here reads flags.
"""

import dataclasses
import inspect
import math
import sys
import typing

MISSING = dataclasses.MISSING
_GROUPS = "__option_groups__"  # a composition's leaf groups, in order
_CHECKS = "__option_checks__"  # its rules across groups, run after the groups' checks
_DEFAULTS = "__option_defaults__"  # {option: the command's default}
_HELPS = "__option_helps__"  # {option: the command's help}


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


class OptionGroup:
    """The base of an options group (a `dataclass(kw_only=True)` of a few options).

    A group declares each of its options once; `check` refuses the group's own bad
    values, naming the option. The base has nothing to refuse.
    """

    def check(self) -> None:
        """Refuses values of this group's options that cannot work (none here)."""


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


def _field_default(field):
    if field.default is not MISSING:
        return field.default
    if field.default_factory is not MISSING:
        return field.default_factory()
    return None


def declared_fields(cls) -> list:
    """The option fields that `cls` declares itself (in its own annotations)."""
    own = vars(cls).get("__annotations__", {})
    return [field for field in dataclasses.fields(cls)
            if field.name in own and "help" in field.metadata]


def option_specs(options_class) -> list:
    """The `OptionSpec` of every field declared with `option(flag=True)`, with the
    default and help of the command (`compose`'s overrides)."""
    hints = typing.get_type_hints(options_class)
    defaults, helps = getattr(options_class, _DEFAULTS, {}), getattr(options_class, _HELPS, {})
    specs = []
    for field in dataclasses.fields(options_class):
        if not field.metadata.get("flag"):
            continue
        kind, optional = _base_type(hints[field.name])
        default = _field_default(field)
        if field.name in defaults:  # the command's own default decides None's validity
            default = defaults[field.name]
            optional = default is None
        specs.append(OptionSpec(field.name, kind, default,
                                helps.get(field.name, field.metadata["help"]),
                                field.metadata["aliases"], field.metadata["choices"],
                                field.metadata["switches"], optional or default is None))
    return specs


def option_groups(options_class) -> tuple:
    """The leaf groups `options_class` is composed of (itself, for a group)."""
    return getattr(options_class, _GROUPS, None) or (options_class,)


def _flatten(groups):
    flat = []
    for group in groups:
        flat.extend(_flatten(group) if isinstance(group, (tuple, list)) else [group])
    return flat


def _bases_and_leaves(groups):
    """(the classes to derive from, the leaf groups) of `compose`'s arguments: tuples
    are spread; a group given twice counts once.

    Raises:
      TypeError: for what is not a group, or a composition that repeats part of the
        groups given before it.
    """
    bases, leaves = [], []
    for group in _flatten(groups):
        if not (isinstance(group, type) and issubclass(group, OptionGroup)
                and dataclasses.is_dataclass(group)):
            raise TypeError(f"compose: {group!r} is not an option group (a dataclass "
                            "deriving from OptionGroup) nor a composition of them")
        own = option_groups(group)
        repeated = [leaf.__name__ for leaf in own if leaf in leaves]
        if len(repeated) == len(own):
            continue
        if repeated:
            raise TypeError(f"compose: {group.__name__} repeats {', '.join(repeated)}, "
                            "given before it; pass the groups it adds instead")
        bases.append(group)
        leaves.extend(own)
    return tuple(bases), tuple(leaves)


def _check_composed(self) -> None:
    """Refuses options that cannot work, naming the option, before any work: values
    outside their choices, non-finite numbers and negative seeds, then every group's
    own check once, then the rules across groups of the composition."""
    check_choices(self)
    check_numbers(self)
    for group in getattr(type(self), _GROUPS):
        group.check(self)
    for rule in getattr(type(self), _CHECKS):
        rule(self)


def compose(name, *groups, defaults=None, helps=None, checks=(), namespace=None,
            doc=None):
    """The options class of a command: the fields of `groups`, declared there once.

    Args:
      name: The class name (the module calling `compose` is its module).
      *groups: Option groups, compositions of them, or tuples of either.
      defaults: {option: this command's default}, for a shared option whose default
        differs here (`--help` shows it; None makes None valid).
      helps: {option: this command's help text}.
      checks: Functions `rule(options)` refusing combinations across groups; run after
        the groups' checks (with the rules of composed compositions).
      namespace: Methods and properties of the class.
      doc: Its docstring.

    Returns:
      A `dataclass(kw_only=True)` deriving from the groups, whose `check()` runs
      `check_choices`, each group's `check` once, then `checks`.
    """
    bases, leaves = _bases_and_leaves(groups)
    merged = {_DEFAULTS: {}, _HELPS: {}}
    inherited_checks = []
    for base in bases:
        for key in merged:
            merged[key].update(getattr(base, key, {}))
        inherited_checks += [rule for rule in getattr(base, _CHECKS, ())
                             if rule not in inherited_checks]
    merged[_DEFAULTS].update(defaults or {})
    merged[_HELPS].update(helps or {})
    module = sys._getframe(1).f_globals.get("__name__")  # pylint: disable=protected-access
    body = dict(namespace or {}, check=_check_composed, __module__=module,
                __qualname__=name, __doc__=doc or f"The options of {name}.")
    # Bases in reverse: a dataclass orders its fields from the last base on, so the
    # fields keep the order of `groups` (and the first group's methods come last).
    cls = dataclasses.make_dataclass(name, [], bases=bases[::-1], namespace=body,
                                     kw_only=True)
    fields = {field.name for field in dataclasses.fields(cls)}
    unknown = sorted((set(merged[_DEFAULTS]) | set(merged[_HELPS])) - fields)
    if unknown:
        raise TypeError(f"compose {name}: {', '.join(unknown)} is not an option of its "
                        "groups")
    setattr(cls, _GROUPS, leaves)
    setattr(cls, _CHECKS, tuple(inherited_checks) + tuple(
        rule for rule in checks if rule not in inherited_checks))
    for key, values in merged.items():
        setattr(cls, key, values)
    if merged[_DEFAULTS]:
        cls.__init__ = _init_with_defaults(cls.__init__, merged[_DEFAULTS], name)
    return cls


def _init_with_defaults(generated, defaults, name):
    """The dataclass `__init__` with the command's defaults for options not given."""
    def __init__(self, **kwargs):
        for option_name, value in defaults.items():
            if option_name not in kwargs:
                kwargs[option_name] = list(value) if isinstance(value, list) else value
        generated(self, **kwargs)
    signature = inspect.signature(generated)
    __init__.__signature__ = signature.replace(parameters=[
        parameter.replace(default=defaults[parameter.name])
        if parameter.name in defaults else parameter
        for parameter in signature.parameters.values()])
    __init__.__qualname__ = f"{name}.__init__"
    return __init__


def check_choices(options) -> None:
    """Raises ValueError for an option outside its declared `choices`, naming it."""
    for spec in option_specs(type(options)):
        value = getattr(options, spec.name)
        if spec.choices and value is not None and value not in spec.choices:
            raise ValueError(f"{spec.name} must be one of {', '.join(map(str, spec.choices))},"
                             f" got {value!r}")


def is_seed(name: str) -> bool:
    """Whether option `name` is a random seed (`seed`, `random_seed`, `*_seed`)."""
    return name == "seed" or name.endswith("_seed")


def check_numbers(options) -> None:
    """Raises ValueError, naming the option, for a number option that is NaN or
    infinite (no setting means that) or a random seed below 0 (the generators take
    0 .. 2**32 - 1)."""
    for spec in option_specs(type(options)):
        value = getattr(options, spec.name)
        if value is None or isinstance(value, bool):
            continue
        if spec.kind is float and not math.isfinite(value):
            raise ValueError(f"{spec.name} must be a finite number, got {value!r}")
        if spec.kind is int and is_seed(spec.name) and not 0 <= value < 2 ** 32:
            raise ValueError(f"{spec.name} must be an integer from 0 to 2**32 - 1 (a "
                             f"random seed), got {value!r}")


def is_integer(value) -> bool:
    """True for an int (not a bool) or an integral float."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def check_integer(options, name: str, minimum: int = 1, note: str = "") -> None:
    """Raises ValueError, naming option `name`, unless it is an integer >= `minimum`.

    Args:
      options: Holds the option.
      name: The option.
      minimum: The smallest value that works.
      note: Added to the message (what the value means, e.g. " (0: off)").
    """
    value = getattr(options, name)
    if is_integer(value) and value >= minimum:
        return
    wanted = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
    raise ValueError(f"{name} must be {wanted}{note}, got {value!r}")


def options_to_dict(options) -> dict:
    """{option: value} of every option of `options` (JSON values: lists for lists).

    The fields that are no option of the command (`option(flag=False)`, set by code)
    are left out.
    """
    values = {}
    for spec in option_specs(type(options)):
        value = getattr(options, spec.name)
        values[spec.name] = list(value) if isinstance(value, (list, tuple)) else value
    return values


_KIND_NAMES = {bool: "true or false", int: "an integer", float: "a number",
               str: "a string", list: 'a list of strings (e.g. ["a", "b"])'}


def _typed_value(spec, name, value, source):
    """`value` for option `spec` (given as `name`), or ValueError saying what was
    expected."""
    kind = spec.kind
    if value is None:
        valid = spec.optional
    elif kind is bool:
        valid = isinstance(value, bool)
    elif kind is int:
        valid = isinstance(value, int) and not isinstance(value, bool)
    elif kind is float:
        valid = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if valid else value
    elif kind is list:
        valid = isinstance(value, list) and all(isinstance(item, str) for item in value)
    else:
        valid = isinstance(value, kind)
    if not valid:
        expected = _KIND_NAMES.get(kind, kind.__name__) + (" or null" if spec.optional
                                                           else "")
        raise ValueError(f"{source}: option {name}: expected {expected}, got {value!r}")
    if spec.choices and value is not None and value not in spec.choices:
        raise ValueError(f"{source}: option {name}: expected one of "
                         f"{', '.join(map(str, spec.choices))}, got {value!r}")
    return value


def options_from_dict(options_class, values: dict, source: str):
    """`options_class` from {option: value} (`options_to_dict`'s, or written by hand);
    the options not in `values` keep the command's defaults.

    An option may be named by its field name, an alias, or a switch (`"use_tpu": true`).

    Args:
      options_class: The command's options class.
      values: JSON values.
      source: Where `values` come from (a file), named in errors.

    Raises:
      ValueError: naming `source` and the unknown names, or the option whose value has
        the wrong type or is not one of its choices (saying what was expected).
    """
    if not isinstance(values, dict):
        raise ValueError(f"{source}: expected an object of options {{name: value}}, got "
                         f"{type(values).__name__}")
    specs = {spec.name: spec for spec in option_specs(options_class)}
    spellings = {spelling: spec for spec in specs.values()
                 for spelling in (spec.name,) + spec.aliases}
    switches = {switch: (spec, value) for spec in specs.values()
                for switch, value in spec.switches.items()}
    unknown = [name for name in values if name not in spellings and name not in switches]
    if unknown:
        raise ValueError(f"{source}: {', '.join(map(str, unknown))} "
                         f"{'is not an option' if len(unknown) == 1 else 'are no options'} "
                         f"of this command (expected the names of its flags, as "
                         f"{options_class.__name__} declares them)")
    kwargs, given_as = {}, {}
    for name, value in values.items():
        if name in switches:
            spec, switched = switches[name]
            if _typed_value(_SWITCH_SPEC, name, value, source) is not True:
                continue
            value = switched
        else:
            spec = spellings[name]
            value = _typed_value(spec, name, value, source)
        if spec.name in given_as:
            raise ValueError(f"{source}: {given_as[spec.name]} and {name} are the same "
                             f"option ({spec.name}); give it once")
        kwargs[spec.name], given_as[spec.name] = value, name
    return options_class(**kwargs)


_SWITCH_SPEC = OptionSpec("switch", bool, False, "", (), None, {}, False)
