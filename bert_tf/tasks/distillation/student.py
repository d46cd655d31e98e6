"""Head models that also show their inside to the distillation losses.

A `Traced*` model is the task's own head model (the same sub-layers and variable paths,
so its checkpoints restore into a plain `BertClassifier`, `BertTokenClassifier` or
`BertSpanLabeler`, and the run folder exports as one) plus, when training, the hidden
states and attention scores the hidden-state and attention losses compare:

    student = TracedClassifier(BertEncoder(config), num_classes=2,
                               traced_attention=(0, 1), projection_width=384)
    outputs = student(features, training=True)
    outputs["hidden_states"]     # L + 1 tensors [B, S, W]: embeddings, then each layer
    outputs["attention_scores"]  # per traced layer [B, A, S, S], mask added
    outputs["attention_values"]  # per traced layer [B, A, S, d]

A student narrower than its teacher projects its hidden states to the teacher's width W
(`projection_width`, TinyBERT's learned W_h; one shared `hidden_projection`). Without
training (evaluation, export) the model returns its head's outputs only.
"""

import keras
import tensorflow as tf

from bert_tf.layers.attention import attention_bias_from_mask
from bert_tf.layers.dense import Projection
from bert_tf.models import BertClassifier, BertSpanLabeler, BertTokenClassifier
from bert_tf.models.encoder import standardize_inputs


def split_heads(tensor, num_heads):
    """[B, S, H] -> [B, A, S, H / A]."""
    shape = tf.shape(tensor)
    width = tensor.shape[-1]
    tensor = tf.reshape(tensor, [shape[0], shape[1], num_heads, width // num_heads])
    return tf.transpose(tensor, [0, 2, 1, 3])


def attention_internals(attention, hidden_states, input_mask):
    """(scores, values) of a `MultiHeadSelfAttention` on its input `hidden_states`.

    Returns:
      scores: float32 [B, A, S, S], Q K^T / sqrt(d) plus the mask bias (-10000 at
        padded keys): what the layer's softmax takes (TinyBERT's attention scores).
      values: float32 [B, A, S, d], its values split by head (MiniLM's value relation).
    """
    heads = attention.num_heads
    query = split_heads(tf.cast(attention.query(hidden_states), tf.float32), heads)
    key = split_heads(tf.cast(attention.key(hidden_states), tf.float32), heads)
    value = split_heads(tf.cast(attention.value(hidden_states), tf.float32), heads)
    scores = tf.matmul(query, key, transpose_b=True) * (attention.head_size ** -0.5)
    return scores + attention_bias_from_mask(input_mask), value


class _Traced:
    """The tracing part of the `Traced*` models (a mixin before the head model class).

    Args:
      traced_attention: The encoder layers (0-based) whose attention scores and values
        the training outputs hold.
      projection_width: The teacher's hidden size when it differs from this model's:
        the hidden states are then projected to it. None: no projection.
    """

    def __init__(self, encoder, traced_attention=(), projection_width=None, **kwargs):
        super().__init__(encoder, **kwargs)
        self.traced_attention = [int(index) for index in traced_attention]
        self.projection_width = projection_width
        self.hidden_projection = None
        if projection_width is not None:
            self.hidden_projection = Projection(
                projection_width, initializer_range=encoder.config.initializer_range,
                name="hidden_projection", dtype=self.dtype_policy)

    def build(self, input_shape=None):
        super().build(input_shape)
        if self.hidden_projection is not None and not self.hidden_projection.built:
            self.hidden_projection.build((None, self.config.hidden_size))

    def call(self, inputs, training=None):
        if not training:
            return super().call(inputs, training=training)
        return self.traced_outputs(inputs, training=training)

    def traced_outputs(self, inputs, training=False):
        """The head's outputs plus `hidden_states`, `attention_scores` and
        `attention_values` (see the module docstring); `training` turns dropout on."""
        features = standardize_inputs(inputs)
        embedded = self.encoder.embed(features, training=training)
        encoded = self.encoder.encode(embedded, features, training=training)
        hidden = [embedded] + list(encoded["encoder_outputs"])
        scores, values = [], []
        for index in self.traced_attention:
            attention = self.encoder.transformer_layers[index].self_attention
            layer_scores, layer_values = attention_internals(
                attention, hidden[index], features["input_mask"])
            scores.append(layer_scores)
            values.append(layer_values)
        if self.hidden_projection is not None:
            hidden = [self.hidden_projection(state) for state in hidden]
        outputs = dict(self.head_outputs(encoded, inputs, training))
        outputs.update(hidden_states=hidden, attention_scores=scores,
                       attention_values=values)
        return outputs

    def head_outputs(self, encoded, inputs, training):
        """The head's outputs on the encoder's `encoded` dict."""
        raise NotImplementedError

    def get_config(self):
        config = super().get_config()
        config.update(traced_attention=list(self.traced_attention),
                      projection_width=self.projection_width)
        return config


class _TracedLabels(_Traced):
    """`_Traced` with the arguments of a labelled head (`BertClassifier`'s), named so that
    `get_config` is exactly the constructor's arguments."""

    def __init__(self, encoder, num_classes, dropout_rate=0.1,
                 head_initializer="truncated_normal", traced_attention=(),
                 projection_width=None, **kwargs):
        super().__init__(encoder, num_classes=num_classes, dropout_rate=dropout_rate,
                         head_initializer=head_initializer,
                         traced_attention=traced_attention,
                         projection_width=projection_width, **kwargs)


@keras.saving.register_keras_serializable(package="bert_tf")
class TracedClassifier(_TracedLabels, BertClassifier):
    """`BertClassifier` with the training outputs of the distillation losses."""

    def head_outputs(self, encoded, inputs, training):
        return {"logits": self.head(encoded["pooled_output"], training=training)}


@keras.saving.register_keras_serializable(package="bert_tf")
class TracedTokenClassifier(_TracedLabels, BertTokenClassifier):
    """`BertTokenClassifier` with the training outputs of the distillation losses."""

    def head_outputs(self, encoded, inputs, training):
        return {"logits": self.head(encoded["sequence_output"], training=training)}


@keras.saving.register_keras_serializable(package="bert_tf")
class TracedSpanLabeler(_Traced, BertSpanLabeler):
    """`BertSpanLabeler` with the training outputs of the distillation losses."""

    def __init__(self, encoder, head_initializer="truncated_normal", traced_attention=(),
                 projection_width=None, **kwargs):
        super().__init__(encoder, head_initializer=head_initializer,
                         traced_attention=traced_attention,
                         projection_width=projection_width, **kwargs)

    def head_outputs(self, encoded, inputs, training):
        start_logits, end_logits = self.head(encoded["sequence_output"])
        return {"start_logits": start_logits, "end_logits": end_logits}


TRACED = {BertClassifier: TracedClassifier, BertTokenClassifier: TracedTokenClassifier,
          BertSpanLabeler: TracedSpanLabeler}


def traced(model, traced_attention=(), projection_width=None):
    """The `Traced*` model of the same head and settings as `model` (unbuilt), on its
    encoder.

    Raises:
      ValueError: for a head model that has no traced version.
    """
    traced_class = next((TRACED[cls] for cls in type(model).__mro__ if cls in TRACED), None)
    if traced_class is None:
        raise ValueError(f"distillation of hidden states or attention maps supports "
                         f"{', '.join(cls.__name__ for cls in TRACED)} students, not "
                         f"{type(model).__name__}")
    config = model.get_config()
    head = {key: value for key, value in config.items()
            if key not in ("encoder", "name", "trainable", "dtype", "traced_attention",
                           "projection_width")}
    return traced_class(model.encoder, traced_attention=traced_attention,
                        projection_width=projection_width, **head)


def copy_layers(teacher, student, layers) -> None:
    """DistilBERT's initialisation: `student` takes the teacher's embeddings, its encoder
    layers `layers` (0-based, in order), its pooler and its head, weight for weight.

    Raises:
      ValueError: when the student does not have len(layers) layers of the teacher's
        width.
    """
    source, target = teacher.encoder, student.encoder
    if len(target.transformer_layers) != len(layers):
        raise ValueError(f"the student has {len(target.transformer_layers)} layers, "
                         f"{len(layers)} teacher layers were chosen")
    pairs = [(source.embeddings, target.embeddings), (source.pooler, target.pooler)]
    if source.embeddings_project is not None:
        pairs.append((source.embeddings_project, target.embeddings_project))
    pairs += [(source.transformer_layers[index], block)
              for index, block in zip(layers, target.transformer_layers)]
    pairs += list(zip(teacher.heads(), student.heads()))
    for origin, copy in pairs:
        copy.set_weights(origin.get_weights())
