"""Files, once: atomic writes and text reading (`fileio`), what an input path names
(`input_paths`), and write errors as one line naming the file (`write_errors`).

Imports no TensorFlow at import (a command's `--help` and the data tools use it).
"""
