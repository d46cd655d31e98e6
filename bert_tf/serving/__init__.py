"""Serving: SavedModel export for TensorFlow Serving and its signatures, the other
export formats, and the registries of model types and formats they look up.

Importing the package imports no TensorFlow (`catalog`, `formats` and `registry` are
read by bert-export-model's `--help`): the built-in model types and formats register
when either registry is first asked (`registry.BUILT_IN`: `bert_tf.serving.model_types`,
which imports the formats' writers).
"""
