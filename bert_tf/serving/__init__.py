"""Serving: SavedModel export for TensorFlow Serving and its signatures."""
