"""Re-initialising the top of a pre-trained encoder before fine-tuning.

Zhang et al. (2021), "Revisiting Few-sample BERT Fine-tuning": the pooler and the top
layers of a pre-trained BERT are specialised to the pre-training tasks; starting them
afresh makes fine-tuning on small data sets more stable. The driver calls
`reinitialize_top_layers` on a fresh run, after the weights are loaded
(`--reinit_top_layers=N`)::

    reinitialize_top_layers(model, num_layers=2, seed=12345)

Each variable gets the encoder's own initializer: kernels and embeddings a truncated
normal of stddev `initializer_range` (cut at two stddevs), LayerNorm gamma 1, LayerNorm
beta and biases 0. With a seed the values are the same on every run.
"""

import keras
from absl import logging

from bert_tf.models.encoder import encoder_of

FLAG = "reinit_top_layers"
_TRUNCATED_NORMAL = ("kernel", "embeddings")
_ONES = ("gamma",)
_ZEROS = ("beta", "bias")


def check_reinit_top_layers(value, num_layers, source="the model"):
    """Raises ValueError, naming the flag, unless 0 <= value <= num_layers.

    Args:
      value: The `--reinit_top_layers` value.
      num_layers: The encoder's layer count.
      source: What has `num_layers` layers (a config file), for the message.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{FLAG} must be an integer >= 0 (0: off), got {value!r}")
    if value > num_layers:
        raise ValueError(f"--{FLAG}={value}: {source} has only {num_layers} encoder "
                         f"layers; re-initialise at most {num_layers} (with the pooler)")


def _fresh_value(variable, initializer_range, seed):
    """A new value of `variable` from the encoder's initializer of its kind."""
    name = variable.path.rsplit("/", 1)[-1]
    shape, dtype = tuple(variable.shape), variable.dtype
    if name in _TRUNCATED_NORMAL:
        return keras.initializers.TruncatedNormal(stddev=initializer_range,
                                                  seed=seed)(shape, dtype)
    if name in _ONES:
        return keras.ops.ones(shape, dtype)
    if name in _ZEROS:
        return keras.ops.zeros(shape, dtype)
    raise ValueError(f"--{FLAG}: no initializer known for {variable.path} (expected "
                     "kernel, embeddings, gamma, beta or bias)")


def reinitialize_top_layers(model, num_layers, seed=None):
    """Re-initialises the pooler and the top `num_layers` encoder layers of `model`.

    Args:
      model: A built BERT model (a `BertEncoder`, or a head model around one).
      num_layers: How many of the top encoder layers; 0 does nothing.
      seed: Seeds the new values (None: random).

    Returns:
      The paths of the variables given new values.
    Raises:
      ValueError: naming the flag, for a count outside [0, the encoder's layers] or a
        model without a BERT encoder.
    """
    if not num_layers:
        return []
    try:
        encoder = encoder_of(model)
    except TypeError as error:
        raise ValueError(f"--{FLAG}: {error}") from None
    check_reinit_top_layers(num_layers, len(encoder.transformer_layers))
    layers = [encoder.pooler] + encoder.transformer_layers[-num_layers:]
    variables = [v for layer in layers for v in layer.weights]
    initializer_range = encoder.config.initializer_range
    for index, variable in enumerate(variables):
        variable.assign(_fresh_value(variable, initializer_range,
                                     None if seed is None else seed + index))
    logging.info("Re-initialised the pooler and encoder layers %s (--%s=%d, truncated "
                 "normal stddev %g)", ", ".join(layer.name for layer in layers[1:]), FLAG,
                 num_layers, initializer_range)
    return [variable.path for variable in variables]
