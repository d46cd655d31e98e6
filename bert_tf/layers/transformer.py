"""Post-LayerNorm Transformer encoder block as in BERT (Devlin et al., 2019)."""

import keras

from bert_tf.layers.attention import MultiHeadSelfAttention
from bert_tf.layers.dense import Projection
from bert_tf.layers.dropout import Dropout
from bert_tf.layers.embeddings import LAYER_NORM_EPSILON


@keras.saving.register_keras_serializable(package="bert_tf")
class TransformerBlock(keras.layers.Layer):
    """x1 = LN(x + Drop(W_o Attn(x))); out = LN(x1 + Drop(W_2 act(W_1 x1))).

    Sub-layers, with their google-research names under `bert/encoder/layer_N/`:
    `self_attention` (attention/self), `attention_output` (attention/output/dense),
    `attention_layer_norm` (attention/output/LayerNorm), `intermediate`
    (intermediate/dense), `output_dense` (output/dense), `output_layer_norm`
    (output/LayerNorm).

    Args:
        hidden_size, num_heads, intermediate_size, hidden_act, hidden_dropout_prob,
        attention_probs_dropout_prob, initializer_range: as in `BertConfig`.
    """

    def __init__(self, hidden_size, num_heads, intermediate_size, hidden_act="gelu",
                 hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                 initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.initializer_range = initializer_range
        policy = self.dtype_policy
        self.self_attention = MultiHeadSelfAttention(
            hidden_size, num_heads, attention_probs_dropout_prob, initializer_range,
            name="self_attention", dtype=policy)
        self.attention_output = Projection(
            hidden_size, initializer_range=initializer_range, name="attention_output",
            dtype=policy)
        self.attention_dropout = Dropout(
            hidden_dropout_prob, name="attention_dropout", dtype=policy)
        self.attention_layer_norm = keras.layers.LayerNormalization(
            epsilon=LAYER_NORM_EPSILON, name="attention_layer_norm", dtype=policy)
        self.intermediate = Projection(
            intermediate_size, activation=hidden_act, initializer_range=initializer_range,
            name="intermediate", dtype=policy)
        self.output_dense = Projection(
            hidden_size, initializer_range=initializer_range, name="output_dense",
            dtype=policy)
        self.output_dropout = Dropout(
            hidden_dropout_prob, name="output_dropout", dtype=policy)
        self.output_layer_norm = keras.layers.LayerNormalization(
            epsilon=LAYER_NORM_EPSILON, name="output_layer_norm", dtype=policy)

    def build(self, input_shape=None):
        width = (None, None, self.hidden_size)
        self.self_attention.build(width)
        self.attention_output.build(width)
        self.attention_dropout.build(width)
        self.attention_layer_norm.build(width)
        self.intermediate.build(width)
        self.output_dense.build((None, None, self.intermediate_size))
        self.output_dropout.build(width)
        self.output_layer_norm.build(width)
        self.built = True

    def call(self, hidden_states, input_mask, training=None):
        """Args: hidden_states [B, S, H]; input_mask int [B, S] or [B, S, S] (see
        `MultiHeadSelfAttention.call`)."""
        context = self.self_attention(hidden_states, input_mask, training=training)
        attended = self.attention_dropout(self.attention_output(context), training=training)
        attended = self.attention_layer_norm(hidden_states + attended)  # [B, S, H]
        inner = self.intermediate(attended)  # [B, S, I]
        outputs = self.output_dropout(self.output_dense(inner), training=training)
        return self.output_layer_norm(attended + outputs)  # [B, S, H]

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, num_heads=self.num_heads,
                      intermediate_size=self.intermediate_size,
                      hidden_act=self.hidden_act,
                      hidden_dropout_prob=self.hidden_dropout_prob,
                      attention_probs_dropout_prob=self.attention_probs_dropout_prob,
                      initializer_range=self.initializer_range)
        return config
