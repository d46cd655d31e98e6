"""A dense projection over the last axis that always runs as one 2-D matmul."""

import keras
import tensorflow as tf

from bert_tf.layers import activations


# "truncated_normal": google-research/bert's N(0, r) cut at 2r (its std is 0.88 r);
# "normal": N(0, r), as Hugging Face transformers initialises new heads.
KERNEL_DISTRIBUTIONS = ("truncated_normal", "normal")


def truncated_normal(initializer_range):
    """A fresh truncated-normal initializer (stddev `initializer_range`, cut at 2 sd).

    A new instance per weight: Keras 3 initializers with a fixed seed return the same
    values on every call, so sharing one instance would give identical weights.
    """
    return keras.initializers.TruncatedNormal(stddev=initializer_range)


def kernel_initializer(initializer_range, distribution="truncated_normal"):
    """A fresh initializer of `distribution` (see `KERNEL_DISTRIBUTIONS`), scale r."""
    if distribution not in KERNEL_DISTRIBUTIONS:
        raise ValueError(f"kernel distribution must be one of {KERNEL_DISTRIBUTIONS}, got "
                         f"{distribution!r}")
    if distribution == "normal":
        return keras.initializers.RandomNormal(stddev=initializer_range)
    return truncated_normal(initializer_range)


@keras.saving.register_keras_serializable(package="bert_tf")
class Projection(keras.layers.Layer):
    """`activation(x @ kernel + bias)` over the last axis of `x` of any rank.

    Unlike `keras.layers.Dense` on a rank-3 input, this flattens the leading axes
    and runs one [N, in] x [in, out] matmul, the layout that is fastest on CPU and
    under XLA (no broadcast batch-matmul in the backward pass).

    Args:
        units: Output width.
        activation: A `hidden_act` name ("gelu", "gelu_tanh", "relu", "swish"),
            "tanh", or None for linear.
        use_bias: Whether to add a bias.
        initializer_range: Scale r of the kernel initializer.
        kernel_distribution: "truncated_normal" (N(0, r) cut at 2r, google-research)
            or "normal" (N(0, r), Hugging Face transformers).
    """

    def __init__(self, units, activation=None, use_bias=True, initializer_range=0.02,
                 kernel_distribution="truncated_normal", **kwargs):
        super().__init__(**kwargs)
        kernel_initializer(initializer_range, kernel_distribution)  # validates the name
        self.units = units
        self.activation = activation
        self.use_bias = use_bias
        self.initializer_range = initializer_range
        self.kernel_distribution = kernel_distribution
        self._activation_fn = tf.tanh if activation == "tanh" else (
            activations.get_activation(activation))

    def build(self, input_shape):
        input_width = input_shape[-1]
        self.kernel = self.add_weight(
            name="kernel", shape=(input_width, self.units),
            initializer=kernel_initializer(self.initializer_range, self.kernel_distribution))
        self.bias = self.add_weight(
            name="bias", shape=(self.units,), initializer="zeros") if self.use_bias else None
        self.built = True

    def call(self, inputs):
        kernel = tf.cast(self.kernel, self.compute_dtype)
        flat = tf.reshape(inputs, [-1, kernel.shape[0]])  # [N, in]
        outputs = tf.matmul(flat, kernel)  # [N, out]
        if self.bias is not None:
            outputs = tf.nn.bias_add(outputs, tf.cast(self.bias, self.compute_dtype))
        if self._activation_fn is not None:
            outputs = self._activation_fn(outputs)
        return tf.reshape(outputs, tf.concat([tf.shape(inputs)[:-1], [self.units]], 0))

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.units,)

    def get_config(self):
        config = super().get_config()
        config.update(units=self.units, activation=self.activation,
                      use_bias=self.use_bias, initializer_range=self.initializer_range,
                      kernel_distribution=self.kernel_distribution)
        return config
