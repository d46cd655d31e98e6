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
      other_flags: (name, default, help) of the flags that are no option (`--config`,
        `--verbose`, a command's own).
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
            format_flag(name, default, text, required=name in required)
            for name, default, text in other_flags))
    parts.append("absl's own flags (--verbosity, --logtostderr, ...): --helpfull.")
    return "\n\n".join(part for part in parts if part) + "\n"


def print_help(module, options_class=None, required=(), flag_modules=()):
    """Prints the `--help` of `module`'s command: its docstring, its options by group,
    then its other flags (`--config`, `--verbose`, its own); `--helpfull` adds absl's.

    Args:
      module: The command's module (its docstring and the flags it defines).
      options_class: Its options class (None: found in `module`, a tool that defines
        its flags itself).
      required: The flags that must be set.
      flag_modules: Other modules whose flags the command takes (`--verbose`).
    """
    if options_class is None:  # a tool that defines its flags itself: its options class
        options_class = _module_options_class(module)
    names = set()
    if options_class is not None:
        for spec in options_lib.option_specs(options_class):
            names.update((spec.name,) + spec.aliases + tuple(spec.switches))
    other = {}
    for module_name in (module.__name__, sys.argv[0], *flag_modules):
        for flag in flags.FLAGS.get_flags_for_module(module_name):
            if flag.name not in names and flag.name not in other:
                text = flag.help  # an enum's starts "<a|b|c>: "; the choices follow it
                if text.startswith("<") and ">: " in text:
                    text = text.split(">: ", 1)[1] + " One of: " + ", ".join(
                        text[1:text.index(">: ")].split("|")) + "."
                other[flag.name] = (flag.name, flag.default, text)
    print(format_help(module.__doc__, options_class, list(other.values()), required),
          end="")
    if "--helpfull" in sys.argv:
        print("\n" + flags.FLAGS.module_help("absl.logging"))


def _module_options_class(module):
    """The options class that `module` composes and whose every option is a flag of the
    command (a tool that defines its flags from it itself), else None."""
    defined = {flag.name for name in (module.__name__, sys.argv[0])
               for flag in flags.FLAGS.get_flags_for_module(name)}
    for value in vars(module).values():
        if (isinstance(value, type)
                and getattr(value, "__module__", None) == module.__name__
                and options_lib.option_groups(value) != (value,)):
            names = {spec.name for spec in options_lib.option_specs(value)}
            if names and names <= defined:
                return value
    return None
