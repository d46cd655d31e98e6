"""Keras layers of BERT: embeddings, attention, Transformer block, heads."""

from bert_tf.layers.activations import get_activation, gelu, gelu_tanh
from bert_tf.layers.attention import (MultiHeadSelfAttention, attention_bias_from_mask,
                                      packed_attention_mask)
from bert_tf.layers.dense import Projection
from bert_tf.layers.dropout import Dropout
from bert_tf.layers.embeddings import BertEmbeddings, PositionEmbedding
from bert_tf.layers.heads import (ClassificationHead, MaskedLMHead, Pooler, SpanHead)
from bert_tf.layers.transformer import TransformerBlock

__all__ = [
    "BertEmbeddings", "ClassificationHead", "Dropout", "MaskedLMHead",
    "MultiHeadSelfAttention", "Pooler", "PositionEmbedding", "Projection", "SpanHead",
    "TransformerBlock",
    "attention_bias_from_mask", "gelu", "gelu_tanh", "get_activation",
    "packed_attention_mask",
]
