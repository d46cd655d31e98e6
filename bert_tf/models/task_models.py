"""Fine-tuning models: sentence classification, span labeling (QA), token tagging."""

import keras

from bert_tf.layers.heads import ClassificationHead, SpanHead
from bert_tf.models.checkpoint_names import output_layer_entries
from bert_tf.models.encoder import EncoderHeadModel


class _ClassifierModel(EncoderHeadModel):
    """An encoder and a `ClassificationHead` (dropout + dense) named `head_name`."""

    head_name = None

    def __init__(self, encoder, num_classes, dropout_rate=0.1,
                 head_initializer="truncated_normal", **kwargs):
        super().__init__(encoder, **kwargs)
        if not isinstance(num_classes, int) or num_classes < 1:
            raise ValueError(f"`num_classes` must be a positive integer, got {num_classes!r}.")
        self.num_classes = num_classes
        self.dropout_rate = dropout_rate
        self.head_initializer = head_initializer
        self.head = ClassificationHead(num_classes, encoder.config.hidden_size,
                                       dropout_rate, encoder.config.initializer_range,
                                       kernel_distribution=head_initializer,
                                       name=self.head_name, dtype=self.dtype_policy)

    def heads(self):
        return [self.head]

    def google_head_entries(self):
        """run_classifier's names: `output_weights` [C, H] and `output_bias`."""
        return output_layer_entries("", self.head.dense)

    def get_config(self):
        config = super().get_config()
        config.update(num_classes=self.num_classes, dropout_rate=self.dropout_rate,
                      head_initializer=self.head_initializer)
        return config


@keras.saving.register_keras_serializable(package="bert_tf")
class BertClassifier(_ClassifierModel):
    """Sentence(-pair) classifier on the pooled output: dropout + dense.

    Returns dict `logits` float32 [B, C]; C == 1 means regression. Rows that pack
    several examples (`sequence_ids`, `position_ids`, see `BertEncoder`) also give
    `cls_positions` int [B, K], the position of each example's [CLS]; the logits are
    then [B, K, C], each from its own [CLS] through the pooler.

    Args:
        encoder: A `BertEncoder`.
        num_classes: Number of classes C (1 for regression).
        dropout_rate: Dropout on the pooled output.
        head_initializer: Distribution of the new head's kernel, scale
            `initializer_range`: "truncated_normal" (google-research) or "normal"
            (Hugging Face transformers).
    """

    default_name = "bert_classifier"
    head_name = "classifier"

    def call(self, inputs, training=None):
        outputs = self.encoder(inputs, training=training)
        pooled = outputs["pooled_output"]  # [B, H]
        if inputs.get("cls_positions") is not None:
            pooled = self.encoder.pooler(outputs["sequence_output"],  # [B, K, H]
                                         inputs["cls_positions"])
        return {"logits": self.head(pooled, training=training)}  # [B, C] or [B, K, C]


@keras.saving.register_keras_serializable(package="bert_tf")
class BertSpanLabeler(EncoderHeadModel):
    """Extractive QA: start and end logits for every token.

    Returns dict `start_logits`, `end_logits`, float32 [B, S].

    Args:
        encoder: A `BertEncoder`.
        head_initializer: "truncated_normal" or "normal" (see `BertClassifier`).
    """

    default_name = "bert_span_labeler"

    def __init__(self, encoder, head_initializer="truncated_normal", **kwargs):
        super().__init__(encoder, **kwargs)
        self.head_initializer = head_initializer
        self.head = SpanHead(encoder.config.hidden_size, encoder.config.initializer_range,
                             kernel_distribution=head_initializer,
                             name="span_head", dtype=self.dtype_policy)

    def heads(self):
        return [self.head]

    def google_head_entries(self):
        """run_squad's names: `cls/squad/output_weights` [2, H] and `.../output_bias`."""
        return output_layer_entries("cls/squad", self.head.dense)

    def call(self, inputs, training=None):
        sequence = self.encoder(inputs, training=training)["sequence_output"]  # [B, S, H]
        start_logits, end_logits = self.head(sequence)
        return {"start_logits": start_logits, "end_logits": end_logits}

    def get_config(self):
        config = super().get_config()
        config.update(head_initializer=self.head_initializer)
        return config


@keras.saving.register_keras_serializable(package="bert_tf")
class BertTokenClassifier(_ClassifierModel):
    """Token tagger (e.g. NER): dropout + dense on every token's output.

    Returns dict `logits` float32 [B, S, C].

    Args:
        encoder: A `BertEncoder`.
        num_classes: Number of tags C.
        dropout_rate: Dropout on the sequence output.
        head_initializer: "truncated_normal" or "normal" (see `BertClassifier`).
    """

    default_name = "bert_token_classifier"
    head_name = "token_classifier"

    def call(self, inputs, training=None):
        sequence = self.encoder(inputs, training=training)["sequence_output"]  # [B, S, H]
        return {"logits": self.head(sequence, training=training)}  # [B, S, C]
