"""BERT models: encoder, pre-trainer and the fine-tuning models."""

from bert_tf.models.encoder import BertEncoder, EncoderHeadModel, encoder_of
from bert_tf.models.pretrainer import (BertPretrainer, next_sentence_weights,
                                      pretraining_losses)
from bert_tf.models.task_models import BertClassifier, BertSpanLabeler, BertTokenClassifier

__all__ = ["BertClassifier", "BertEncoder", "BertPretrainer",
           "BertSpanLabeler", "BertTokenClassifier", "EncoderHeadModel", "encoder_of",
           "next_sentence_weights", "pretraining_losses"]
