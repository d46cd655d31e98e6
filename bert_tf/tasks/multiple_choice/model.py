"""Multiple choice (SWAG): one score per choice from the pooled output, softmax over
the choices of an example."""

import keras
import tensorflow as tf

from bert_tf.layers.heads import ClassificationHead
from bert_tf.models.checkpoint_names import output_layer_entries
from bert_tf.models.encoder import INPUT_NAMES, EncoderHeadModel, assert_inputs_agree


def choices_input_signature(names=INPUT_NAMES):
    """`export`'s default signature of a multiple-choice model: int32 [batch, choices,
    seq_length] TensorSpecs named `names`, every dimension free."""
    return [{name: tf.TensorSpec([None, None, None], tf.int32, name=name) for name in names}]


@keras.saving.register_keras_serializable(package="bert_tf")
class BertMultipleChoice(EncoderHeadModel):
    """Scores C choices of each example: every choice is its own `[CLS] a [SEP] b [SEP]`
    row through the encoder; its pooled output goes through dropout and a dense layer
    to one score.

    Call with a dict of int tensors `input_ids`, `input_mask`, `segment_ids`, each
    [B, C, S]. Returns dict `logits` float32 [B, C]; `softmax(logits)` are the choices'
    probabilities. C may differ from call to call (the head has no per-choice weights).

    Sub-layers: `encoder`, `multiple_choice` (a `ClassificationHead` of one unit).

    Args:
        encoder: A `BertEncoder`.
        dropout_rate: Dropout on the pooled output.
        head_initializer: "truncated_normal" or "normal" (see `BertClassifier`).
    """

    default_name = "bert_multiple_choice"

    def __init__(self, encoder, dropout_rate=0.1, head_initializer="truncated_normal",
                 **kwargs):
        super().__init__(encoder, **kwargs)
        self.dropout_rate = dropout_rate
        self.head_initializer = head_initializer
        self.head = ClassificationHead(1, encoder.config.hidden_size, dropout_rate,
                                       encoder.config.initializer_range,
                                       kernel_distribution=head_initializer,
                                       name="multiple_choice", dtype=self.dtype_policy)

    def heads(self):
        return [self.head]

    def google_head_entries(self):
        """`cls/multiple_choice/output_weights` [1, H] and `.../output_bias`."""
        return output_layer_entries("cls/multiple_choice", self.head.dense)

    def call(self, inputs, training=None):
        if not isinstance(inputs, dict) or "input_ids" not in inputs:
            raise ValueError("BertMultipleChoice takes a dict with int tensors `input_ids`, "
                             "`input_mask`, `segment_ids` of shape [batch, num_choices, "
                             f"seq_length]; got {type(inputs).__name__} without `input_ids`.")
        rank = inputs["input_ids"].shape.rank
        if rank is not None and rank != 3:
            raise ValueError(f"BertMultipleChoice takes `input_ids` of shape [batch, "
                             f"num_choices, seq_length], got rank {rank} "
                             f"({inputs['input_ids'].shape}); give every example its "
                             "choices as a [num_choices, seq_length] block")
        shape = tf.shape(inputs["input_ids"])  # [B, C, S]
        rows = {name: tf.reshape(inputs[name], [-1, shape[2]])  # [B*C, S]
                for name in INPUT_NAMES if inputs.get(name) is not None}
        pooled = self.encoder(rows, training=training)["pooled_output"]  # [B*C, H]
        scores = self.head(pooled, training=training)  # [B*C, 1]
        return {"logits": tf.reshape(scores, shape[:2])}  # [B, C]

    def export(self, filepath, format="tf_saved_model", verbose=None,  # noqa: A002
               input_signature=None, **kwargs):
        """`SavedModelExport.export` with int32 [batch, choices, seq_length] inputs."""
        super().export(filepath, format=format, verbose=verbose,
                       input_signature=input_signature or choices_input_signature(),
                       **kwargs)

    def serving_outputs(self, inputs):
        """The logits at inference, after a check that the inputs agree in batch size,
        choices and length (naming both inputs and their shapes when they do not)."""
        given = {name: inputs[name] for name in INPUT_NAMES if inputs.get(name) is not None}
        return self(assert_inputs_agree(given, 3, "batch sizes, choices and lengths"),
                    training=False)

    def get_config(self):
        config = super().get_config()
        config.update(dropout_rate=self.dropout_rate, head_initializer=self.head_initializer)
        return config
