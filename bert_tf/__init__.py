"""bert_tf: BERT pre-training and fine-tuning for TensorFlow 2 / Keras 3.

    import bert_tf
    model = bert_tf.TextClassifier.from_pretrained("uncased_L-12_H-768_A-12", num_classes=2)
    pre = bert_tf.Preprocessor.from_pretrained("uncased_L-12_H-768_A-12")

The names below TensorFlow import on first use, so that `import bert_tf` (and every
command's `--help`) stays quick.
"""

import importlib

from bert_tf.configs import BertConfig

# Public name -> the module that defines it, imported on first use.
_LAZY = {"Preprocessor": "bert_tf.text.preprocessor",
         "TextClassifier": "bert_tf.text_models.classifier",
         "TextEncoder": "bert_tf.text_models.encoder",
         "TextQuestionAnswerer": "bert_tf.text_models.question_answerer",
         "TextTagger": "bert_tf.text_models.tagger"}

__all__ = ["BertConfig", *_LAZY]
__version__ = "0.1.0"


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'bert_tf' has no attribute {name!r}")
