"""The tasks, one folder each: pretraining, electra, classification, ner, squad,
multiple_choice, sentence_embeddings, distillation (see `bert_tf.runs.registry`).

The run machinery moved to `bert_tf.runs`; `from bert_tf.tasks import registry` (and
the other modules docs/library.md named under `bert_tf.tasks`) still gives the module
of `bert_tf.runs`, loaded when asked for (this package imports nothing).
"""

import importlib

# bert_tf.runs modules at their earlier bert_tf.tasks paths, which docs/library.md still names.
MOVED_TO_RUNS = ("driver", "export_checkpoint", "export_settings", "option_groups",
                 "options", "registry", "run_config", "task")


def __getattr__(name):
    """`bert_tf.tasks.<name>` for a module that moved to `bert_tf.runs` (PEP 562)."""
    if name in MOVED_TO_RUNS:
        return importlib.import_module(f"bert_tf.runs.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
