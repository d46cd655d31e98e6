"""`--help` of every command: its flags grouped by option group, each with its default.

Imports no TensorFlow: a command's `--help` runs on its options classes alone
(`print_help`), before any run code is loaded (`bert_tf.commands.command_line.load`).

    text = format_help(doc, ClassifierOptions, other_flags)
    # <doc>
    #
    # The training step (TrainStep):
    #   --do_train=false
    #       Train.
    #   --train_batch_size=32
    #       Training batch size (all replicas).
    # ...

A group is titled by the first line of its docstring; a flag shows its default (`unset`
for None: its help says what that means), its other spellings and its choices, wrapped
between words only.
"""

import sys
import textwrap

from absl import flags

from bert_tf import options as options_lib

HELP_FLAGS = ("--help", "-h", "-?", "--helpfull", "--helpshort", "--helpxml")
WIDTH = 88
_INDENT, _TEXT_INDENT = "  ", "      "


def help_requested(argv) -> bool:
    """Whether `argv` asks for help (`--help`, `-h`, `--helpfull`, ...)."""
    return any(arg in HELP_FLAGS or arg.startswith("--help=") for arg in argv[1:])


def format_value(value) -> str:
    """A default as the command line writes it: true/false, a comma list, unset."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value)) if value else "(empty)"
    return str(value)


def _wrap(text, indent=_TEXT_INDENT) -> str:
    return textwrap.fill(" ".join(text.split()), WIDTH, initial_indent=indent,
                         subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False)


def format_flag(name, default, help_text, aliases=(), choices=None,
                required=False, boolean=None) -> str:
    """One flag's lines: `--name (default: value)` (`--[no]name` for a boolean,
    `(required)` for a flag that must be set), then its help, other spellings and
    choices."""
    text = help_text
    if choices:
        text += " One of: " + ", ".join(map(str, choices)) + "."
    if aliases:
        text += " Also spelled " + ", ".join(f"--{alias}" for alias in aliases) + "."
    if boolean is None:
        boolean = isinstance(default, bool)
    head = f"--{'[no]' if boolean else ''}{name} " + (
        "(required)" if required else f"(default: {format_value(default)})")
    return f"{_INDENT}{head}\n{_wrap(text)}"


def _title(group) -> str:
    doc = (group.__doc__ or "").strip().splitlines()
    first = doc[0].rstrip(".") if doc else group.__name__
    return f"{first} ({group.__name__}):"


def format_groups(options_class, required=()) -> str:
    """The flags of `options_class`, group by group (`bert_tf.options.option_groups`),
    with the command's own defaults and help; `required` names those that must be set."""
    specs = {spec.name: spec for spec in options_lib.option_specs(options_class)}
    sections, shown = [], set()
    for group in options_lib.option_groups(options_class):
        lines = []
        for field in options_lib.declared_fields(group):
            spec = specs.get(field.name)
            if spec is None or spec.name in shown:
                continue
            shown.add(spec.name)
            lines.append(format_flag(spec.name, spec.default, spec.help, spec.aliases,
                                     spec.choices, spec.name in required,
                                     spec.kind is bool))
            for switch, value in spec.switches.items():
                lines.append(format_flag(switch, False, f"The original's flag: the same "
                                         f"as --{spec.name}={format_value(value)}."))
        if lines:
            sections.append(_title(group) + "\n" + "\n".join(lines))
    rest = [spec for name, spec in specs.items() if name not in shown]
    if rest:
        sections.append("Other options:\n" + "\n".join(
            format_flag(spec.name, spec.default, spec.help, spec.aliases, spec.choices,
                        spec.name in required, spec.kind is bool) for spec in rest))
    return "\n\n".join(sections)


def format_help(doc, options_class=None, other_flags=(), required=()) -> str:
    """The whole `--help` text.

    Args:
      doc: The command's docstring (what it does, an example).
      options_class: Its options class (None: a command without one).
      other_flags: absl `Flag`s that are no option (`--config`, `--verbose`, a
        command's own).
      required: The flags that must be set.
    """
    parts = [doc.strip() if doc else ""]
    if options_class is not None:
        parts.append(_wrap("Flags are written --name=value; a boolean also --name or "
                           "--noname. Unset: no value (the help says what that means).",
                           indent=""))
        parts.append(format_groups(options_class, required))
    if other_flags:
        parts.append("Running the command:\n" + "\n".join(
            _format_absl_flag(flag, flag.name in required) for flag in other_flags))
    parts.append("absl's own flags (--verbosity, --logtostderr, ...): --helpfull.")
    return "\n\n".join(part for part in parts if part) + "\n"


def _format_absl_flag(flag, required) -> str:
    """`format_flag` of an absl `Flag`: its choices from its parser (an enum flag's
    help starts with them as absl writes them, "<a|b>: ", which is left out)."""
    choices = getattr(flag.parser, "enum_values", None)
    text = flag.help
    if choices:
        text = text.removeprefix(f"<{'|'.join(choices)}>: ")
    return format_flag(flag.name, flag.default, text, choices=choices, required=required,
                       boolean=flag.boolean)


def print_help(doc, options_class=None, required=(), flag_modules=()):
    """Prints a command's `--help`: its docstring, its options by group, then its other
    flags (`--config`, `--verbose`, its own); `--helpfull` adds absl's.

    Args:
      doc: The command's docstring.
      options_class: Its options class (None: a command without one).
      required: The flags that must be set.
      flag_modules: The modules whose flags the command takes besides its options (its
        own, and `--verbose`'s), as absl knows them (`FlagValues.get_flags_for_module`).
    """
    names = set()
    if options_class is not None:
        for spec in options_lib.option_specs(options_class):
            names.update((spec.name,) + spec.aliases + tuple(spec.switches))
    other = {}
    for module_name in flag_modules:
        for flag in flags.FLAGS.get_flags_for_module(module_name):
            if flag.name not in names:
                other.setdefault(flag.name, flag)
    print(format_help(doc, options_class, list(other.values()), required), end="")
    if "--helpfull" in sys.argv:
        print("\n" + flags.FLAGS.module_help("absl.logging"))
