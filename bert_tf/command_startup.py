"""What every command does before TensorFlow is imported (this module imports none).

`prepare(sys.argv)` runs when `bert_tf.cli` is imported, before a command module and
the library it imports:

* `--help`: TensorFlow, Keras and tensorflow-text are not imported. Their names are
  served by stand-in modules (`bert_tf.command_help_stubs`), so that a command module
  and its options classes import in a fraction of a second and the help is printed
  from the options alone (`bert_tf.command_line.print_help`); nothing runs.
* Otherwise TensorFlow is imported here with the C++ lines it prints while it loads and
  finds its devices (oneDNN, CUDA stubs, a failed cuInit on a machine without a GPU,
  the CPU-feature banner) held back, `TF_CPP_MIN_LOG_LEVEL=2` for what follows, and
  the INFO lines of TensorFlow's Python modules dropped. Other lines written meanwhile
  are passed on. A user who sets `TF_CPP_MIN_LOG_LEVEL`
  or passes `--verbosity=1` (or more) sees every line, as TensorFlow prints them.

Nothing is done when TensorFlow is already imported (a test, or a library user).
"""

import importlib
import logging
import os
import re
import sys
import tempfile

from bert_tf import command_help_stubs
from bert_tf import library_logs
from bert_tf.command_help import help_requested

_TF_LINE = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ \S+:\d+\] ")
_ABSL_PREAMBLE = "WARNING: All log messages before absl::InitializeLog() is called"
# Set beside TF_CPP_MIN_LOG_LEVEL when `prepare` set it (not the user), so that a child
# process of the command (bert_tf.command_supervisor) holds TensorFlow's lines back too.
_SET_HERE = "BERT_TF_QUIETED_TENSORFLOW"


def _verbosity(argv) -> int:
    """The value of absl's `--verbosity` / `-v` in `argv` (0 when not given)."""
    for index, arg in enumerate(argv[1:], start=1):
        for name in ("--verbosity", "-v"):
            value = None
            if arg.startswith(name + "="):
                value = arg.split("=", 1)[1]
            elif arg == name and index + 1 < len(argv):
                value = argv[index + 1]
            if value is not None:
                try:
                    return int(value)
                except ValueError:
                    return 0  # absl refuses it, naming the flag
    return 0


def wants_tensorflow_lines(argv, environ=os.environ) -> bool:
    """Whether TensorFlow's own C++ lines are shown: the user set TF_CPP_MIN_LOG_LEVEL,
    or asked for `--verbosity` of 1 or more."""
    return (("TF_CPP_MIN_LOG_LEVEL" in environ and _SET_HERE not in environ)
            or _verbosity(argv) >= 1)


def drop_tensorflow_lines(text: str) -> str:
    """`text` less TensorFlow's C++ log lines (and the lines that continue them) and
    absl's note that logging is not initialised."""
    kept, dropping = [], False
    for line in text.splitlines(keepends=True):
        if _TF_LINE.match(line) or line.startswith(_ABSL_PREAMBLE):
            dropping = True
            continue
        if dropping and line.strip() and not line[:1].isspace() and (
                line.startswith("To enable the following instructions")):
            continue
        dropping = False
        kept.append(line)
    return "".join(kept)


def import_tensorflow_quietly() -> None:
    """Imports TensorFlow (and finds its devices) with file descriptor 2 held in a
    temporary file, then writes what was not TensorFlow's C++ start-up lines to it."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            # Imported here, not at the top: its start-up lines go to the held fd 2.
            tf = importlib.import_module("tensorflow")
            tf.config.list_physical_devices()  # a failed cuInit prints here
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            rest = drop_tensorflow_lines(held.read().decode("utf-8", "replace"))
            if rest:
                sys.stderr.write(rest)
                sys.stderr.flush()


def prepare(argv=None, environ=os.environ) -> None:
    """Readies the process for a command (see the module docstring)."""
    argv = sys.argv if argv is None else argv
    if "tensorflow" in sys.modules:
        return
    if help_requested(argv):
        command_help_stubs.install()
        return
    if wants_tensorflow_lines(argv, environ):
        return
    environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    environ[_SET_HERE] = "1"
    import_tensorflow_quietly()
    logging.getLogger("tensorflow").setLevel(logging.WARNING)
    logging.getLogger("absl").addFilter(library_logs.tensorflow_info_dropped)

