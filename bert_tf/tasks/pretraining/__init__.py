"""Pre-training (`bert-run-pretraining`, `bert-train --task=pretraining`): masked LM and
next-sentence prediction on create_pretraining_data's records.

One folder: the options (`options.py`, without TensorFlow: `--help` reads them alone)
and the task (`task.py`: `PretrainingTask`, `run_pretraining`, registered in
`bert_tf.runs.registry`). `bert_tf.tasks.pretraining.run_pretraining` (the path
earlier versions documented) loads `task.py` when asked for; importing the package
imports no TensorFlow.
"""

import importlib

# Kept: docs/library.md ("Tasks and registries") names bert_tf.tasks.pretraining.run_pretraining
_FROM_TASK = ("run_pretraining", "PretrainingTask")


def __getattr__(name):
    """`run_pretraining` and `PretrainingTask` of `task.py`, loaded now (PEP 562)."""
    if name in _FROM_TASK:
        return getattr(importlib.import_module(f"{__name__}.task"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
