"""The data tools (vocab learning, pre-training data, their Beam forms).

Importing this package readies the process for a tool: TensorFlow imported with its
start-up lines held back, except for `--help`, which imports none
(`bert_tf.commands.startup.prepare`).
"""

from bert_tf.commands import startup

startup.prepare()
