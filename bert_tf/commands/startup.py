"""What a command does before TensorFlow is imported (this module imports none).

A command module imports its options and the command machinery only, no TensorFlow:
`--help` prints the help from the options alone. Once the flags are parsed, the run code
(which imports TensorFlow) is loaded by its dotted name (`command_line.load`), after
`quiet_tensorflow(sys.argv)`:

* TensorFlow's documented setting comes first: `TF_CPP_MIN_LOG_LEVEL=2` in the
  environment before TensorFlow is imported, so that its C++ INFO and WARNING lines are
  not printed (the INFO lines of TensorFlow's Python modules are dropped too).
* The lines that setting does not reach, those its bundled C++ logging writes while the
  library loads and finds its devices (CUDA stubs, a failed cuInit on a machine without
  a GPU, absl's "before InitializeLog" preamble), are held back by
  `import_tensorflow_quietly` (its docstring says why nothing plainer works).

The data tools call `prepare()` as their package is imported. A user who sets
`TF_CPP_MIN_LOG_LEVEL` or passes `--verbosity=1` (or more) sees every
line, as TensorFlow prints them. Nothing is done when TensorFlow is already imported
(a test, or a library user).
"""

import importlib
import logging
import os
import re
import sys
import tempfile

from bert_tf import library_logs
from bert_tf.commands.help_text import help_requested

_TF_LINE = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ \S+:\d+\] ")
_ABSL_PREAMBLE = "WARNING: All log messages before absl::InitializeLog() is called"
# Set beside TF_CPP_MIN_LOG_LEVEL when `prepare` set it (not the user), so that a child
# process of the command (bert_tf.process.supervisor) holds TensorFlow's lines back too.
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
    temporary file, then writes what was not TensorFlow's C++ start-up lines to it.

    Why the descriptor and not only TensorFlow's setting: `TF_CPP_MIN_LOG_LEVEL` (set
    before this, by `quiet_tensorflow`) does not reach the lines that TensorFlow 2.21's
    bundled C++ logging writes while the library loads, before it reads that setting:
    "Could not find cuda drivers" (cudart_stub), "failed call to cuInit" and absl's
    "All log messages before absl::InitializeLog()" preamble are printed even at
    `TF_CPP_MIN_LOG_LEVEL=3`, which would also hide real errors later. They are written
    to descriptor 2 by C++, out of Python's reach, so only the descriptor can hold them.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            # Not an import statement at the top: its start-up lines go to the held fd 2.
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


def quiet_tensorflow(argv=None, environ=os.environ) -> None:
    """Imports TensorFlow with its start-up lines held back (see the module docstring);
    nothing when it is imported already or the user asked for its lines (a `--help`
    that imports it, bert-export-model's, holds them back all the same)."""
    argv = sys.argv if argv is None else argv
    if "tensorflow" in sys.modules or (wants_tensorflow_lines(argv, environ)
                                       and not help_requested(argv)):
        return
    if "TF_CPP_MIN_LOG_LEVEL" not in environ:
        environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
        environ[_SET_HERE] = "1"
    import_tensorflow_quietly()
    logging.getLogger("tensorflow").setLevel(logging.WARNING)
    logging.getLogger("absl").addFilter(library_logs.tensorflow_info_dropped)


def prepare(argv=None, environ=os.environ) -> None:
    """Readies the process for a data tool (`data_prep`), whose library code imports
    TensorFlow where it needs it: TensorFlow imported now by `quiet_tensorflow`, except
    for `--help`, which imports none."""
    argv = sys.argv if argv is None else argv
    if not help_requested(argv):
        quiet_tensorflow(argv, environ)
