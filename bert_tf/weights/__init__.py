"""Weights: google-research and Hugging Face checkpoints in and out."""
