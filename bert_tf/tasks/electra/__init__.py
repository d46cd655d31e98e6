"""ELECTRA pre-training (`bert-train --task=electra`): a small generator fills the masked
positions, the discriminator, a BERT encoder, detects the replaced tokens.

One folder: the model and its losses (`model.py`), the model type and its exports
(`serving.py`, imported here so that importing any part registers it) and the task
(`task.py`, registered in `bert_tf.tasks.registry`).
"""

from bert_tf.tasks.electra import serving  # noqa: F401  (registers the model type)
