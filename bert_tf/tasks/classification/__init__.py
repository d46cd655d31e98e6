"""Sentence(-pair) classification: GLUE/XNLI/generic data, features, metrics, the task."""
