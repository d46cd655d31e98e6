"""The process a command runs in: its stop signals (`signals`, the one place that installs
SIGTERM / SIGINT handlers) and the parent that supervises a multi-worker run
(`supervisor`).

Imports no TensorFlow. The library uses it too (a training loop's stop requests, a
multi-worker strategy telling its supervising parent that it joined), so it sits below
the library, not in the command layer (`bert_tf.commands`).
"""
