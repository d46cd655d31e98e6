"""The data tools (vocab learning, pre-training data, their Beam forms).

Importing this package readies the process for a command before any tool imports
TensorFlow, as `bert_tf.cli` does: `--help` without TensorFlow, TensorFlow's start-up
lines held back (`bert_tf.command_startup`).
"""

from bert_tf import command_startup as startup

startup.prepare()
