"""The command machinery of every bert_tf tool (the runners in `bert_tf.cli`, the data
tools in `data_prep`): flags generated from an options dataclass and options built back
from them (`command_line`), `--help` (`help_text`), what a command does before
TensorFlow is imported (`startup`).

Imports no TensorFlow. Only `bert_tf.cli` and `data_prep` import it; the library never
reads flags.
"""
