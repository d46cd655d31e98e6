"""Hidden activations named as in `bert_config.json` (`hidden_act`)."""

import math

import tensorflow as tf

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_SQRT_TWO_OVER_PI = math.sqrt(2.0 / math.pi)


def gelu(x):
    """Exact GELU, x * Phi(x) with the erf form; what the released checkpoints used."""
    return 0.5 * x * (1.0 + tf.math.erf(x * tf.cast(_SQRT_HALF, x.dtype)))


def gelu_tanh(x):
    """Tanh approximation of GELU (Hendrycks & Gimpel, eq. 2)."""
    cubic = x + tf.cast(0.044715, x.dtype) * x * x * x
    return 0.5 * x * (1.0 + tf.tanh(tf.cast(_SQRT_TWO_OVER_PI, x.dtype) * cubic))


def relu(x):
    return tf.nn.relu(x)


def swish(x):
    return x * tf.sigmoid(x)


_ACTIVATIONS = {"gelu": gelu, "gelu_tanh": gelu_tanh, "relu": relu, "swish": swish}


def get_activation(name):
    """Returns the activation function for a `hidden_act` name, or None for None/linear.

    Raises:
        ValueError: naming the unknown activation and the accepted names.
    """
    if name is None or name == "linear":
        return None
    if name not in _ACTIVATIONS:
        raise ValueError(
            f"unknown activation {name!r}; expected one of {', '.join(_ACTIVATIONS)}.")
    return _ACTIVATIONS[name]
