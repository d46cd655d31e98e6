"""BERT models: encoder, pre-trainer and the fine-tuning models."""

from bert_tf.models.encoder import BertEncoder
from bert_tf.models.pretrainer import BertPretrainer, pretraining_losses

__all__ = ["BertEncoder", "BertPretrainer", "pretraining_losses"]
