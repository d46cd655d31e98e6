"""Dropout whose random mask is cheap under XLA as well as in plain graphs."""

import keras
import tensorflow as tf


def in_xla_context():
    """True while tracing code that XLA compiles (`jit_compile=True`, TPU replicas).

    `tf.__internal__.get_enclosing_xla_context` is TensorFlow's exported (tf_export) form
    of the check: it walks the default graph and its outer graphs for the XLA context a
    jit-compiled `tf.function` or a TPU replica enters. No `tf.*` symbol outside
    `__internal__` tells a trace for XLA from a plain one.
    """
    return tf.__internal__.get_enclosing_xla_context() is not None


@keras.saving.register_keras_serializable(package="bert_tf")
class Dropout(keras.layers.Dropout):
    """`keras.layers.Dropout` with the random algorithm chosen for the compiler.

    Keras draws its mask with the default stateless algorithm, which XLA:CPU compiles
    to a slow Philox: in a jit-compiled BERT pre-training step on CPU that was ~11% of
    the step. Under XLA this layer draws with ThreeFry, XLA's native generator (about
    4x faster there, and available on every XLA device); elsewhere it keeps the
    kernel's automatic choice, since TensorFlow's CPU kernels have no ThreeFry.
    Same arguments, seeding (`seed`, a `SeedGenerator` per layer) and scaling
    (kept values / (1 - rate)) as `keras.layers.Dropout`; a `noise_shape` falls back
    to Keras's implementation.

    The `SeedGenerator` (a variable) is made in `build`, inside the layer's name scope,
    so that its variable is `.../<layer name>/seed_generator/seed_generator_state`.
    (`keras.layers.Dropout` makes it in `__init__`, outside any scope: there its variable
    gets a process-wide auto name such as `seed_generator_7/seed_generator_state`.)
    """

    def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
        if not 0 <= rate <= 1:
            raise ValueError(f"Dropout rate must be in [0, 1], got {rate!r}.")
        # Rate 0 here: the base class then makes no SeedGenerator (see `build`).
        super().__init__(0.0, noise_shape=noise_shape, seed=seed, **kwargs)
        self.rate = rate

    def build(self, input_shape=None):
        if self.rate > 0:
            self.seed_generator = keras.random.SeedGenerator(self.seed, name="seed_generator")
        self.built = True

    def call(self, inputs, training=False):
        if not training or self.rate == 0 or self.noise_shape is not None:
            return super().call(inputs, training=training)
        seed = self.seed_generator.next()
        # Stateless random ops want int32 seeds; the generator's state is int64.
        seed = tf.cast(tf.bitwise.bitwise_and(tf.cast(seed, tf.int64), 0xFFFFFFFF), tf.int32)
        algorithm = "threefry" if in_xla_context() else "auto_select"
        uniform = tf.random.stateless_uniform(tf.shape(inputs), seed, alg=algorithm)
        keep = uniform >= self.rate
        scale = tf.cast(1.0 / (1.0 - self.rate), inputs.dtype)
        return tf.where(keep, inputs * scale, tf.zeros_like(inputs))
