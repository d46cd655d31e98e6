"""Hidden activations named as in `bert_config.json` (`hidden_act`)."""

import contextlib
import contextvars

import tensorflow as tf

# Set while tracing for a converter whose target has no Erfc op (`erf_gelu`).
_ERF_GELU = contextvars.ContextVar("erf_gelu", default=False)
_SQRT_TWO = 1.4142135623730951


def gelu(x):
    """Exact GELU, x * Phi(x); what the released checkpoints used.

    `tf.nn.gelu` (0.5 x erfc(-x / sqrt 2)) is the form TensorFlow's CPU graph optimizer
    fuses into the matmul; inside `erf_gelu()` the same function is traced as
    (x (1 + erf(x / sqrt 2))) 0.5, equal to float32 rounding, in the order of ops that
    ONNX Runtime fuses into one Gelu (and the bias before it into BiasGelu).
    """
    if _ERF_GELU.get():
        return x * (1.0 + tf.math.erf(x / tf.cast(_SQRT_TWO, x.dtype))) * 0.5
    return tf.nn.gelu(x, approximate=False)


@contextlib.contextmanager
def erf_gelu():
    """Within it, `gelu` is traced with `Erf` instead of `Erfc` (ONNX has an Erf op and
    no Erfc; ONNX Runtime fuses the erf pattern into one Gelu)."""
    token = _ERF_GELU.set(True)
    try:
        yield
    finally:
        _ERF_GELU.reset(token)


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
