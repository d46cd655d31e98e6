"""The command-line tools: absl flags and `main` of every runner (thin root scripts call them).

Importing this package readies the process for a command before any command module
imports TensorFlow: `--help` without TensorFlow, TensorFlow's start-up lines held back
(`bert_tf.command_startup`).
"""

from bert_tf import command_startup as startup

startup.prepare()
