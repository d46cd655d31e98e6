"""bert_tf: BERT pre-training and fine-tuning for TensorFlow 2 / Keras 3."""

from bert_tf.configs import BertConfig

__all__ = ["BertConfig"]
__version__ = "0.1.0"
