"""Progress and load reports when bert_tf is used from Python (a notebook, a script).

The commands and the library log through absl; a command sets absl's verbosity from its
`--verbosity` flag, but from Python absl shows only warnings, so a runner called from a
notebook trained for minutes without a line. `show_info_logs()`, called where the library's
long work starts (the task driver, the text models), shows absl's INFO lines (progress
with the time left, what a checkpoint load matched) unless a command parsed the flags or
the user already chose a verbosity; TensorFlow's own Python INFO lines stay hidden.

    from absl import logging; logging.set_verbosity(logging.WARNING)   # quiet again
"""

import logging as python_logging
import os

from absl import flags
from absl import logging

_done = False


def show_info_logs() -> None:
    """Shows absl's INFO lines from Python, once per process (see the module docstring)."""
    global _done
    if _done or flags.FLAGS.is_parsed():
        return
    _done = True
    if logging.get_verbosity() != logging.WARNING:
        return  # the user set a verbosity already
    logging.set_verbosity(logging.INFO)
    python_logging.getLogger("absl").addFilter(tensorflow_info_dropped)


def tensorflow_info_dropped(record) -> bool:
    """A logging filter: False for the INFO lines TensorFlow's own Python modules log
    through absl (a checkpoint's "Sharding callback duration", ...)."""
    return record.levelno >= python_logging.WARNING or (
        f"{os.sep}tensorflow{os.sep}python{os.sep}" not in record.pathname)
