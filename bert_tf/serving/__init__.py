"""Serving: SavedModel export for TensorFlow Serving and its signatures, the other
export formats, and the registry of model types they look up.

Importing the package registers the built-in model types (`model_types`), so that
`registry.get("classifier")` answers whichever serving module was imported first.
"""

from bert_tf.serving import model_types  # noqa: F401  (registers the built-in types)
