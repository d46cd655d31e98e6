"""A dense projection over the last axis that always runs as one 2-D matmul."""

import keras
import tensorflow as tf

from bert_tf.configs import KERNEL_DISTRIBUTIONS
from bert_tf.layers import activations
from bert_tf.layers.dropout import Dropout


def truncated_normal(initializer_range):
    """A fresh truncated-normal initializer (stddev `initializer_range`, cut at 2 sd).

    A new instance per weight: Keras 3 initializers with a fixed seed return the same
    values on every call, so sharing one instance would give identical weights.
    """
    return keras.initializers.TruncatedNormal(stddev=initializer_range)


LORA_VARIABLES = ("lora_a", "lora_b")


def is_lora_variable(variable):
    """Whether `variable` is a LoRA adapter of a `Projection` (no TF1 checkpoint name)."""
    return variable.path.rsplit("/", 1)[-1] in LORA_VARIABLES


def lora_a_initializer():
    """PEFT's start of LoRA's A: torch's kaiming-uniform with a = sqrt(5) on a [R, in]
    weight, i.e. U(-1/sqrt(in), 1/sqrt(in)) (Keras' fan_in of our [in, R] is `in`)."""
    return keras.initializers.VarianceScaling(scale=1.0 / 3.0, mode="fan_in",
                                              distribution="uniform")


def check_lora_arguments(rank, alpha, dropout, input_width=None, units=None):
    """Raises ValueError unless rank is an integer >= 0, alpha > 0 (or None), dropout in
    [0, 1) and rank <= min(input_width, units) (when known)."""
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        raise ValueError(f"lora_rank must be an integer >= 0 (0: off), got {rank!r}")
    if alpha is not None and not alpha > 0:
        raise ValueError(f"lora_alpha must be > 0, got {alpha!r}")
    if not 0 <= dropout < 1:
        raise ValueError(f"lora_dropout must be in [0, 1), got {dropout!r}")
    widths = [w for w in (input_width, units) if w is not None]
    if rank and widths and rank > min(widths):
        raise ValueError(f"lora_rank={rank} is above the projection's width min(in, out) = "
                         f"{min(widths)}: a rank that high is no low-rank update")


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

    LoRA (Hu et al. 2021, with PEFT's conventions): with `lora_rank` R > 0 (or after
    `enable_lora`) the layer holds adapters `lora_a` [in, R] (kaiming-uniform, as PEFT)
    and `lora_b` [R, out] (zeros) and computes
    `activation(x @ kernel + bias + dropout(x) @ lora_a @ lora_b * lora_alpha / R)`;
    the kernel is then not trainable. `merge_lora` folds the adapters into the kernel
    and removes them.

    Args:
        units: Output width.
        activation: A `hidden_act` name ("gelu", "gelu_tanh", "relu", "swish"),
            "tanh", or None for linear.
        use_bias: Whether to add a bias.
        initializer_range: Scale r of the kernel initializer.
        kernel_distribution: "truncated_normal" (N(0, r) cut at 2r, google-research)
            or "normal" (N(0, r), Hugging Face transformers).
        lora_rank: Rank R of the LoRA adapters; 0: none.
        lora_alpha: LoRA's alpha: the update is scaled by alpha / R (None: R, scale 1).
        lora_dropout: Dropout on the adapters' input while training.
    """

    def __init__(self, units, activation=None, use_bias=True, initializer_range=0.02,
                 kernel_distribution="truncated_normal", lora_rank=0, lora_alpha=None,
                 lora_dropout=0.0, **kwargs):
        super().__init__(**kwargs)
        kernel_initializer(initializer_range, kernel_distribution)  # validates the name
        check_lora_arguments(lora_rank, lora_alpha, lora_dropout, units=units)
        self.lora_rank = lora_rank
        self.lora_alpha = lora_alpha
        self.lora_dropout = lora_dropout
        self.lora_a = self.lora_b = self._lora_dropout_layer = None
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
        if self.lora_rank:
            self._add_adapters(input_width)
        self.built = True

    # ------------------------------------------------------------------------ LoRA
    @property
    def lora_enabled(self):
        return self.lora_a is not None

    @property
    def lora_scale(self):
        """alpha / R (PEFT's `scaling`)."""
        alpha = self.lora_rank if self.lora_alpha is None else self.lora_alpha
        return alpha / self.lora_rank

    def _add_adapters(self, input_width):
        check_lora_arguments(self.lora_rank, self.lora_alpha, self.lora_dropout,
                             input_width, self.units)
        self.lora_a = self.add_weight(name="lora_a", shape=(input_width, self.lora_rank),
                                      initializer=lora_a_initializer())
        self.lora_b = self.add_weight(name="lora_b", shape=(self.lora_rank, self.units),
                                      initializer="zeros")
        if self.lora_dropout > 0:
            self._lora_dropout_layer = Dropout(self.lora_dropout, name="lora_dropout",
                                               dtype=self.dtype_policy)
            self._lora_dropout_layer.build()
        self.kernel.trainable = False

    def enable_lora(self, rank, alpha=None, dropout=0.0):
        """Adds LoRA adapters of rank `rank` to this built layer and freezes its kernel
        (its bias keeps its trainable flag). See the class docstring."""
        if not self.built:
            raise ValueError(f"{self.name}: build the layer before enable_lora")
        if self.lora_enabled:
            raise ValueError(f"{self.name}: LoRA is already enabled")
        check_lora_arguments(rank, alpha, dropout, units=self.units)
        if not rank:
            return
        self.lora_rank, self.lora_alpha, self.lora_dropout = rank, alpha, dropout
        self._tracker.unlock()
        try:
            with keras.name_scope(self.name, caller=self):
                self._add_adapters(self.kernel.shape[0])
        finally:
            self._tracker.lock()

    def lora_kernel_delta(self):
        """A @ B * alpha / R [in, out], float32 (None without adapters)."""
        if not self.lora_enabled:
            return None
        return tf.matmul(tf.convert_to_tensor(self.lora_a),
                         tf.convert_to_tensor(self.lora_b)) * self.lora_scale

    def lora_update(self, flat, training=None):
        """dropout(flat) @ A @ B * alpha / R for `flat` [N, in], in the compute dtype."""
        dtype = self.compute_dtype
        if self._lora_dropout_layer is not None:
            flat = self._lora_dropout_layer(flat, training=training)
        low = tf.matmul(flat, tf.cast(self.lora_a, dtype))  # [N, R]
        return tf.matmul(low, tf.cast(self.lora_b, dtype) * tf.cast(self.lora_scale, dtype))

    def merge_lora(self):
        """Folds the adapters into the kernel (W + A B alpha/R) and removes them: the
        layer is then a plain projection (lora_rank 0) with the same outputs."""
        if not self.lora_enabled:
            return
        self.kernel.assign(tf.cast(tf.convert_to_tensor(self.kernel)
                                   + self.lora_kernel_delta(), self.kernel.dtype))
        self.kernel.trainable = True
        self._tracker.unlock()
        try:
            del self.lora_a
            del self.lora_b
            if self._lora_dropout_layer is not None:
                self._layers.remove(self._lora_dropout_layer)
                del self._lora_dropout_layer
        finally:
            self._tracker.lock()
        self.lora_a = self.lora_b = self._lora_dropout_layer = None
        self.lora_rank, self.lora_alpha, self.lora_dropout = 0, None, 0.0

    def call(self, inputs, training=None):
        kernel = tf.cast(self.kernel, self.compute_dtype)
        flat = tf.reshape(inputs, [-1, kernel.shape[0]])  # [N, in]
        outputs = tf.matmul(flat, kernel)  # [N, out]
        if self.lora_enabled:
            outputs = outputs + self.lora_update(flat, training)
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
                      kernel_distribution=self.kernel_distribution,
                      lora_rank=self.lora_rank, lora_alpha=self.lora_alpha,
                      lora_dropout=self.lora_dropout)
        return config
