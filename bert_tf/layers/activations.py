"""Hidden activations named as in `bert_config.json` (`hidden_act`)."""

import tensorflow as tf


def gelu(x):
    """Exact GELU, x * Phi(x) with the erf form; what the released checkpoints used.

    `tf.nn.gelu` is the form TensorFlow's CPU graph optimizer fuses into the matmul.
    """
    return tf.nn.gelu(x, approximate=False)


def gelu_tanh(x):
    """Tanh approximation of GELU (Hendrycks & Gimpel, eq. 2)."""
    return tf.nn.gelu(x, approximate=True)


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
