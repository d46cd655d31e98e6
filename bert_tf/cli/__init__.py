"""The command-line tools: absl flags and `main` of every runner (thin root scripts call them).

Importing this package readies the process for a command before any command module
imports TensorFlow: `--help` without TensorFlow, TensorFlow's start-up lines held back
(`bert_tf.cli.startup`).
"""

from bert_tf.cli import startup

startup.prepare()
