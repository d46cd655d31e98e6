"""Sentence embeddings: a bi-encoder trained, evaluated, used to encode text files and
exported as text-to-vector models (`bert-train --task=sentence_embeddings`).

One folder: the model (`model.py`) and, as they land, the data, losses, evaluation,
task, encoding and exports; registered in `bert_tf.runs.registry`.
"""
