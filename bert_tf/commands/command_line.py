"""The command line of every bert_tf tool (the runners in `bert_tf.cli` and the data
tools in `data_prep`): absl flags generated from an options dataclass
(`bert_tf.options`), options built back from the parsed flags, help that lists the
command's own flags, and the one place where a user error becomes a one-line message
(the traceback only with `--verbose`).

Only `bert_tf.cli` and `data_prep` import this module; the library never reads flags.

    run_command(sys.modules[__name__], run, ("output_dir",), ClassifierOptions)
    # defines the flags, parses them; `run` then builds its options:
    options = options_from_flags(ClassifierOptions)

Every command with an options class takes `--config=FILE`: a JSON file of options (a
run's `output_dir/config.json`, whose options are under "options", or a hand-written
{name: value} object). The options start from the command's defaults, take the file's
values, then every flag given on the command line (its aliases and switches too), so
the command line wins.
"""

import importlib
import json
import os
import signal
import sys

from absl import app, flags, logging

from bert_tf.commands import help_text, startup
from bert_tf.process import signals
from bert_tf.process import supervisor
from bert_tf import extras
from bert_tf.io import fileio
from bert_tf import options as options_lib

flags.DEFINE_bool("verbose", False,
                  "On an error, show the full traceback instead of a one-line message.")

# Errors that bad input raises (a missing or unreadable file, a value out of range, a
# config that does not fit); anything else is a bug and keeps its traceback.
# OSError covers a full disk (ENOSPC), a read-only folder, a missing or unreadable file;
# MissingExtra an optional package that the asked-for feature needs.
USER_ERRORS = (ValueError, OSError, extras.MissingExtra)
# TensorFlow's errors of the same kinds (a file that is not a TFRecord, no memory or
# disk left, a missing or forbidden gs:// path); matched by name, without importing TF.
_TENSORFLOW_USER_ERRORS = ("DataLossError", "ResourceExhaustedError", "NotFoundError",
                           "PermissionDeniedError")

CONFIG_FLAG = "config"
CONFIG_HELP = ("Run from a config file: a run's output_dir/config.json, or one written by "
               "hand; flags given on the command line override its values.")

_DEFINERS = {bool: flags.DEFINE_bool, int: flags.DEFINE_integer,
             float: flags.DEFINE_float, str: flags.DEFINE_string, list: flags.DEFINE_list}


def _define(spec, flag_values, module_name):
    if spec.kind is str and spec.choices:
        flags.DEFINE_enum(spec.name, spec.default, list(spec.choices), spec.help,
                          flag_values=flag_values, module_name=module_name)
        return
    if spec.kind not in _DEFINERS:
        raise TypeError(f"option {spec.name}: no flag type for {spec.kind}")
    _DEFINERS[spec.kind](spec.name, spec.default, spec.help, flag_values=flag_values,
                         module_name=module_name)


def define_flags(options_class, module_name, flag_values=flags.FLAGS):
    """Defines one flag per option of `options_class`, with its aliases and switches,
    and `--config` (a file of option values, see `options_from_flags`).

    Args:
      options_class: A dataclass whose fields are declared with `options.option`.
      module_name: The module `--help` lists them under (the command's `__name__`;
        a module run as a script, `__main__`, is known to absl as `sys.argv[0]`).
      flag_values: Where to define them (absl's global FLAGS for a command).
    """
    if module_name == "__main__":
        module_name = sys.argv[0]
    for spec in options_lib.option_specs(options_class):
        _define(spec, flag_values, module_name)
        for alias in spec.aliases:
            flags.DEFINE_alias(alias, spec.name, flag_values=flag_values,
                               module_name=module_name)
        for switch, value in spec.switches.items():
            flags.DEFINE_bool(switch, False, f"Original flag: the same as "
                              f"--{spec.name}={value}.", flag_values=flag_values,
                              module_name=module_name)
    if CONFIG_FLAG not in flag_values:
        flags.DEFINE_string(CONFIG_FLAG, None, CONFIG_HELP, flag_values=flag_values,
                            module_name=module_name)


def read_config_options(path: str, model: bool = False) -> dict:
    """The {option: value} of config file `path`: its "options" (a run's config.json,
    whose other keys are not options), else the whole object (written by hand). With
    `model`, a run's "model_options" where it has them: those of the task whose model it
    holds (a distilled student's: its teacher's task).

    Raises:
      OSError / ValueError: naming the file, when it cannot be read or is not a JSON
        object of options.
    """
    try:
        with open(path, encoding="utf-8") as file:
            config = json.load(file)
    except json.JSONDecodeError as error:
        raise ValueError(f"--config={path}: not valid JSON ({error})") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"--config={path}: not UTF-8 text ({error})") from None
    if not isinstance(config, dict):
        raise ValueError(f"--config={path}: expected a JSON object (a run's config.json, "
                         f"or {{option: value}}), got {type(config).__name__}")
    if model and isinstance(config.get("model_options"), dict):
        return config["model_options"]
    return config["options"] if "options" in config else config


def _given(flag_values, spec) -> bool:
    """Whether the option of `spec` was set on the command line (any spelling)."""
    return any(flag_values[name].present for name in (spec.name,) + spec.aliases) or any(
        flag_values[switch].present and flag_values[switch].value for switch in spec.switches)


# A run folder's config (`bert_tf.runs.run_config.CONFIG_FILE`), and what it never
# decides for a later run of that folder: what to do, and where.
RUN_CONFIG_FILE = "config.json"
STEP_OPTIONS = ("do_train", "do_eval", "do_predict", "output_dir", "init_checkpoint",
                "export_dir")
# Options a run folder's config.json may lack and still be this command's run (one
# written before they existed: they take the command's defaults).
_NEWER_OPTIONS = 3


def run_folder_options(options_class, flag_values=flags.FLAGS) -> dict:
    """For a run that evaluates or predicts without training, the options of the run it
    uses (its config.json, written by the same command): the one trained in its
    `--output_dir`, else the one `--init_checkpoint` is a folder or checkpoint of; less
    `STEP_OPTIONS`. {} for a training run, or without such a run of the same command.

    So `--do_eval` or `--do_predict` reads its data as the model was trained
    (max_seq_length, case, columns, windows) without repeating those flags.
    """
    names = {spec.name for spec in options_lib.option_specs(options_class)}
    if not {"output_dir", "do_train"} <= names or flag_values["do_train"].value:
        return {}
    folders = [flag_values["output_dir"].value,
               fileio.run_folder_of(flag_values["init_checkpoint"].value)
               if "init_checkpoint" in names else None]
    paths = [os.path.join(folder, RUN_CONFIG_FILE) for folder in folders if folder]
    path = next((path for path in paths if os.path.isfile(path)), None)
    if path is None:
        return {}
    try:
        saved = read_config_options(path, model=True)
        if not set(saved) <= names or len(names - set(saved)) > _NEWER_OPTIONS:
            return {}  # another command's run
        saved = options_lib.options_to_dict(options_lib.options_from_dict(
            options_class, saved, path))
    except ValueError:
        return {}  # a damaged or foreign file: the flags alone, as before config.json
    print(f"Options not given on the command line come from the trained run's {path}",
          file=sys.stderr)
    return {name: value for name, value in saved.items() if name not in STEP_OPTIONS}


def options_from_flags(options_class, flag_values=flags.FLAGS, **overrides):
    """`options_class` built from parsed flags (see `define_flags`): the defaults, the
    values of `--config`'s file when given (else, for a run that does not train, those
    of the run trained in its output_dir: `run_folder_options`), then the flags given on
    the command line; `overrides` win.

    Raises:
      OSError / ValueError: a `--config` file that cannot be read, or that names an
        unknown option or a value of the wrong type (naming the file and the option).
    """
    config = flag_values[CONFIG_FLAG].value if CONFIG_FLAG in flag_values else None
    kwargs = {}
    if config:
        kwargs = options_lib.options_to_dict(options_lib.options_from_dict(
            options_class, read_config_options(config), f"--config={config}"))
    else:
        kwargs = run_folder_options(options_class, flag_values)
    from_file = dict(kwargs)
    for spec in options_lib.option_specs(options_class):
        if spec.name in kwargs and not _given(flag_values, spec):
            continue
        kwargs[spec.name] = flag_values[spec.name].value
        for switch, value in spec.switches.items():
            if flag_values[switch].value:
                kwargs[spec.name] = value
    kwargs.update(overrides)
    _log_overrides(from_file, kwargs, config)
    return options_class(**kwargs)


def _log_overrides(from_file, kwargs, config):
    """Logs every option whose command-line value overrides the config
    file's (`--config`, or the trained run's config.json), with both values."""
    source = f"--config={config}" if config else "the trained run's config.json"
    for name in sorted(from_file):
        if name in kwargs and kwargs[name] != from_file[name]:
            logging.warning("--%s=%r overrides %r of %s", name, kwargs[name],
                            from_file[name], source)


def _missing(required, options=None) -> list:
    """The `required` flags that neither the command line nor its `--config` file (nor,
    for a run that does not train, the run it reads: `run_folder_options`) sets: read
    from the command's `options` where they have them, else from the flags."""
    return [name for name in required
            if (getattr(options, name) if hasattr(options, name)
                else getattr(flags.FLAGS, name)) in (None, "")]


def command(module_name, options_class, run_fn, required=()):
    """The `run_main()` of a command module: `run_fn(options)` on the parsed flags.

        run_main = command(__name__, ClassifierOptions,
                           "bert_tf.tasks.classification.task:run", REQUIRED)

    Args:
      module_name: the command module's `__name__` (its docstring is the `--help` text).
      options_class: the options dataclass its flags come from.
      run_fn: `run_fn(options)` does the work: the function, or its dotted name
        "package.module:function", loaded once the flags are parsed (`load`), so
        that the command module and its `--help` import no TensorFlow.
      required: names of flags that must be set.
    """
    def run_main():
        module = sys.modules[module_name]
        run_command(module, lambda options: _run_options(run_fn, options, _program(module)),
                    required, options_class)
    return run_main


def _run_options(run_fn, options, program):
    """`run_fn(options)`; a multi-worker run under a supervising parent that signals
    always reach (`bert_tf.process.supervisor`; the parent loads no run code)."""
    if getattr(options, "distribution_strategy", None) == "multi_worker_mirrored":
        if not supervisor.supervised():
            sys.exit(supervisor.run_supervised(program,
                                               getattr(options, "output_dir", None)))
    return load(run_fn)(options)


def load(target):
    """What `target` names, "package.module:name" (a function is itself), with
    TensorFlow imported quietly first.

    The plugin pattern: a command module imports its options only, and the code that
    does the work, which imports TensorFlow, is imported by its dotted name through
    importlib once the flags are parsed, after TensorFlow's start-up lines are held
    back (`startup.quiet_tensorflow`). So `--help` imports no TensorFlow, and a task
    registered by name (`bert_tf.runs.registry`) loads only when it runs.

    Raises:
      ValueError: for a name that is not "module:function".
    """
    startup.quiet_tensorflow(sys.argv)
    if callable(target):
        return target
    module_name, _, name = target.partition(":")
    if not module_name or not name:
        raise ValueError(f"{target!r}: expected 'package.module:name'")
    return getattr(importlib.import_module(module_name), name)


def _program(module):
    """The command's name in its one-line errors: its console script's, as the docs
    show it (`bert-<module's last name>`, e.g. bert_tf.cli.run_ner -> bert-run-ner; the
    same when run as `python -m` or through a root script such as run_ner.py)."""
    spec = getattr(module, "__spec__", None)  # under `python -m`, __name__ is __main__
    program = (spec.name if spec else module.__name__).rsplit(".", 1)[-1]
    if program == "__main__":  # a script run by path: data_prep/build_vocab.py
        program = os.path.splitext(os.path.basename(sys.argv[0]))[0]
    return "bert-" + program.replace("_", "-")


def _is_user_error(error):
    return isinstance(error, (app.UsageError,) + USER_ERRORS) or (
        type(error).__module__.startswith("tensorflow")
        and type(error).__name__ in _TENSORFLOW_USER_ERRORS)


def run_reporting_user_errors(program, run_fn, *args):
    """Runs `run_fn(*args)`; a user error ends the process with one line naming it, and
    so does Ctrl-C or SIGTERM (status 130 / 143; a training run saves a checkpoint first
    and says where). Unfinished outputs are removed on the way out (`bert_tf.io.fileio`)."""
    try:
        with signals.signals_raise():
            return run_fn(*args)
    except KeyboardInterrupt as interrupted:
        if flags.FLAGS.verbose:
            raise
        message = str(interrupted) or "stopped by SIGINT (Ctrl-C)"
        print(f"{program}: error: {message}", file=sys.stderr)
        signals.forget_interrupt()
        sys.exit(getattr(interrupted, "exit_code", 128 + signal.SIGINT))
    except Exception as error:  # pylint: disable=broad-except
        if flags.FLAGS.verbose or not _is_user_error(error):
            raise
        sys.exit(f"{program}: error: {_one_line(error)}")


def _one_line(error):
    """TensorFlow's messages carry an op trace after the first line; users need the
    first line only."""
    text = str(error)
    if type(error).__module__.startswith("tensorflow"):
        text = text.strip().splitlines()[0] if text.strip() else type(error).__name__
    return text


def _refuse_lora_flags(program, options_class, argv):
    """Ends a command whose options have no LoRA (pre-training, ELECTRA, distillation)
    given a --lora_* flag, naming why, before any work (absl would say "unknown flag")."""
    given = [arg[2:].split("=", 1)[0] for arg in argv[1:] if arg.startswith("--lora_")]
    if given and "lora_rank" not in {spec.name for spec in
                                     options_lib.option_specs(options_class)}:
        sys.exit(f"{program}: error: --{given[0]}: LoRA adapters fine-tune a task model "
                 "(bert-run-classifier, bert-run-ner, bert-run-squad, bert-train --task="
                 "classification, ...); this command trains the encoder's own weights "
                 f"(pre-training, ELECTRA, distillation): leave out "
                 f"{', '.join('--' + name for name in given)}")


def run_command(module, run_fn, required=(), options_class=None):
    """Runs a command: defines and parses the flags, checks them, calls `run_fn(options)`
    with the options built once from them (`run_fn()` without `options_class`).

    `--help` shows `module`'s docstring, its options (`options_class`) and the other
    flags it defines (`bert_tf.commands.help_text.print_help`); its flags are also
    registered under `sys.argv[0]`, the module absl takes for the command's own (behind a
    console script such as `bert-run-squad`, `__main__` is a generated wrapper). An
    unexpected argument, a missing `required` flag or a user error in `run_fn` ends the
    process with one line.

    Args:
      module: the command's module (`sys.modules[__name__]`): its docstring is the
        `--help` text, its name the module its flags are defined for.
      run_fn: does the work: `run_fn(options)`, or `run_fn()` reading the parsed flags
        for a command without `options_class`.
      required: names of flags that must be set (on the command line or, for a command
        with `options_class`, by its `--config` file).
      options_class: the options dataclass whose flags the command takes (defined here,
        not at import, so that importing several commands never clashes).
    """
    if options_class is not None:
        define_flags(options_class, module.__name__)
    program = _program(module)
    if options_class is not None:
        _refuse_lora_flags(program, options_class, sys.argv)
    for module_name in (module.__name__, __name__):
        for flag in flags.FLAGS.get_flags_for_module(module_name):
            flags.FLAGS.register_flag_by_module(sys.argv[0], flag)

    if help_text.help_requested(sys.argv):
        help_text.print_help(module.__doc__, options_class, required,
                             flag_modules=(module.__name__, sys.argv[0], __name__))
        sys.exit(0)

    def check_and_run(argv):
        if len(argv) > 1:
            raise app.UsageError(f"unexpected arguments {argv[1:]}; flags are written "
                                 "--name=value")
        options = None if options_class is None else options_from_flags(options_class)
        missing = _missing(required, options)
        if missing:
            raise app.UsageError(", ".join(f"--{name}" for name in missing) +
                                 (" is" if len(missing) == 1 else " are") + " required")
        if options is None:
            run_fn()
        else:
            run_fn(options)

    def main(argv):  # returns None: app.run would exit with any value returned
        run_reporting_user_errors(program, check_and_run, argv)

    app.run(main)
