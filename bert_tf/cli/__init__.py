"""The command-line tools: absl flags and `main` of every runner (thin root scripts
call them).

A command module imports its options and `bert_tf.commands` only, no TensorFlow, so
that `--help` is quick; the code that does the work loads by its dotted name once the
flags are parsed, with TensorFlow's start-up lines held back
(`bert_tf.commands.command_line.load`).
"""
