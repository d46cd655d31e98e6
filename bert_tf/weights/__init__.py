"""Weights: google-research TF1 checkpoints and Hugging Face safetensors, in and out.

    from bert_tf.models import BertClassifier
    from bert_tf.weights import from_pretrained
    classifier = from_pretrained(BertClassifier, "uncased_L-12_H-768_A-12", num_classes=3)
"""

from bert_tf.weights.checkpoints import (  # noqa: F401
    LoadReport, from_pretrained, load_config, load_google_checkpoint, load_hf_weights,
    load_pretrained_weights, load_training_checkpoint, save_google_checkpoint)
from bert_tf.weights.load_report import check_encoder  # noqa: F401
