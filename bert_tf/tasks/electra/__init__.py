"""ELECTRA pre-training (`bert-train --task=electra`): a small generator fills the masked
positions, the discriminator, a BERT encoder, detects the replaced tokens.

One folder: the model and its losses (`model.py`), the model type and its exports
(`serving.py`, imported by the task, so that loading the task registers it), the
options (`options.py`, without TensorFlow: `--help` reads them alone) and the task
(`task.py`, registered in `bert_tf.runs.registry`).
"""
