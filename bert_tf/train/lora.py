"""LoRA fine-tuning: low-rank adapters on the encoder's projections (Hu et al. 2021).

With `--lora_rank=R` the driver adds, after the pre-trained weights are loaded, adapters
A [in, R] and B [R, out] to the chosen projections of every encoder layer
(`Projection.enable_lora`: output = x W + b + dropout(x) A B * alpha / R, PEFT's
conventions: A kaiming-uniform, B zeros, so the model starts as the pre-trained one),
and freezes the encoder's original weights; the adapters and the task head train (and
the encoder's LayerNorms and / or biases with `--lora_train`)::

    apply_lora(model, LoraSettings(rank=8, alpha=16, targets=("query", "value")))
    merge_adapters(model)  # W + A B alpha/R into the kernels; a plain model again

Exports merge the adapters first, so every format writes an ordinary model.

A LoRA model's training checkpoints hold what trains alone (`checkpointed`): the
adapters, the encoder variables --lora_train trains, the task head, and the optimizer's
moments of those; the frozen encoder is the base checkpoint's, loaded before a
checkpoint is restored (`bert_tf.runs.lora_run` names and checks the base).
"""

import dataclasses
from typing import Optional

import keras
import tensorflow as tf
from absl import logging

from bert_tf.layers.dense import Projection, check_lora_arguments, is_lora_variable
from bert_tf.models.encoder import encoder_of
from bert_tf.train.lora_names import DEFAULT_TARGETS, TARGETS, parse_targets, parse_train


@dataclasses.dataclass(frozen=True)
class LoraSettings:
    """What `apply_lora` adds and trains (see the module docstring)."""
    rank: int
    alpha: Optional[float] = None  # None: rank (scale 1)
    dropout: float = 0.0
    targets: tuple = DEFAULT_TARGETS
    train: tuple = ()  # of TRAIN_PARTS

    @property
    def scale(self) -> float:
        return (self.rank if self.alpha is None else self.alpha) / self.rank


def settings_from_options(options) -> Optional[LoraSettings]:
    """The LoRA settings of `options` (an options object or a run config's "options"
    dict); None when LoRA is off (lora_rank 0 or absent)."""
    get = options.get if isinstance(options, dict) else (
        lambda name, default=None: getattr(options, name, default))
    rank = get("lora_rank", 0) or 0
    if not rank:
        return None
    return LoraSettings(rank=rank, alpha=get("lora_alpha"),
                        dropout=get("lora_dropout", 0.0) or 0.0,
                        targets=parse_targets(get("lora_targets") or DEFAULT_TARGETS),
                        train=parse_train(get("lora_train") or "none"))


def target_widths(target, hidden_size, intermediate_size) -> tuple:
    """(in, out) of a target projection."""
    return {"intermediate": (hidden_size, intermediate_size),
            "output": (intermediate_size, hidden_size)}.get(
                target, (hidden_size, hidden_size))


def check_rank(settings: LoraSettings, config, source="the model's config") -> None:
    """Refuses, naming the flag, a rank above a target projection's min(in, out)."""
    for target in settings.targets:
        width = min(target_widths(target, config.hidden_size, config.intermediate_size))
        if settings.rank > width:
            raise ValueError(f"--lora_rank={settings.rank} is above the width of the "
                             f"{target} projections of {source} (min(in, out) = {width}): "
                             f"pass --lora_rank <= {width}")


def target_projection(block, target) -> Projection:
    """The `Projection` of a `TransformerBlock` that --lora_targets name `target` means."""
    if target in ("query", "key", "value"):
        return getattr(block.self_attention, target)
    return getattr(block, {"output": "output_dense"}.get(target, target))


def target_of(projection, encoder) -> str:
    """The --lora_targets name of `projection`, a `Projection` of `encoder`'s layers.

    Raises:
      ValueError: `projection` is none of the targets of `encoder`.
    """
    for block in encoder.transformer_layers:
        for target in TARGETS:
            if target_projection(block, target) is projection:
                return target
    raise ValueError(f"{projection.name} is no --lora_targets projection of "
                     f"{encoder.name}; expected one of {', '.join(TARGETS)}")


def _layer_norm_variables(layer) -> set:
    return {id(v) for sub in layer._flatten_layers(include_self=True)
            if isinstance(sub, keras.layers.LayerNormalization) for v in sub.weights}


def apply_lora(model, settings: LoraSettings) -> list:
    """Adds the adapters to `model`'s encoder and sets what trains (see the module
    docstring): adapters, and the encoder's LayerNorms / biases per `settings.train`;
    every other encoder variable is frozen. Variables outside the encoder (the task
    head) keep their trainable flag.

    Returns:
      The encoder's variables that train.
    """
    try:
        encoder = encoder_of(model)
    except TypeError as error:
        raise ValueError(f"--lora_rank: {error}") from None
    check_lora_arguments(settings.rank, settings.alpha, settings.dropout)
    targets = parse_targets(settings.targets)
    check_rank(settings, encoder.config)
    for block in encoder.transformer_layers:
        for target in targets:
            target_projection(block, target).enable_lora(settings.rank, settings.alpha,
                                                         settings.dropout)
    layer_norms = _layer_norm_variables(encoder)
    training = []
    for variable in encoder.weights:
        trains = (is_lora_variable(variable)
                  or ("layer_norm" in settings.train and id(variable) in layer_norms)
                  or ("bias" in settings.train and variable.path.endswith("/bias")))
        variable.trainable = trains
        if trains:
            training.append(variable)
    adapters = sum(1 for v in training if is_lora_variable(v))
    logging.info(
        "LoRA: rank %d, alpha %s (scale %g), dropout %g on %s of %d encoder layers: "
        "%d adapter variables (%d weights) train%s; the other encoder weights are frozen",
        settings.rank, settings.alpha if settings.alpha is not None else settings.rank,
        settings.scale, settings.dropout, ", ".join(targets),
        len(encoder.transformer_layers), adapters,
        sum(int(v.numpy().size) for v in training if is_lora_variable(v)),
        f", with the encoder's {' and '.join(settings.train)}" if settings.train else "")
    return training


def merge_adapters(model) -> int:
    """Folds every adapter of `model` into its kernel (W + A B alpha/R) and removes it,
    and makes every encoder variable trainable again: a plain model with the same outputs.

    Returns:
      How many projections were merged.
    """
    merged = 0
    for layer in model._flatten_layers(include_self=True):
        if isinstance(layer, Projection) and layer.lora_enabled:
            layer.merge_lora()
            merged += 1
    if merged:
        try:
            encoder = encoder_of(model)
        except TypeError:
            encoder = model
        for variable in encoder.weights:
            variable.trainable = True
        logging.info("LoRA: merged the adapters of %d projections into their kernels",
                     merged)
    return merged


def has_adapters(model) -> bool:
    """Whether a projection of `model` holds LoRA adapters (not merged)."""
    return any(isinstance(layer, Projection) and layer.lora_enabled
               for layer in model._flatten_layers(include_self=True))


def checkpointed(model):
    """What a training checkpoint holds of `model` under "model": the model itself, or,
    when it has LoRA adapters, its trained parts alone (see the module docstring):
    "encoder" (each adapter and trained encoder variable, by its path inside the
    encoder) and "head" (every variable outside the encoder, by its path inside the
    model). The frozen encoder variables are not saved, nor restored."""
    if not has_adapters(model):
        return model
    encoder = encoder_of(model)
    inside = {id(variable) for variable in encoder.weights}
    encoder_parts = {_inside(variable.path, encoder.name): variable
                     for variable in encoder.weights
                     if variable.trainable or is_lora_variable(variable)}
    head = {_inside(variable.path, model.name): variable for variable in model.weights
            if id(variable) not in inside}
    return tf.train.Checkpoint(encoder=tf.train.Checkpoint(**encoder_parts),
                               head=tf.train.Checkpoint(**head))


def _inside(path, owner):
    """`path` from below the layer named `owner` ("bert_classifier/bert_encoder/x" inside
    "bert_encoder": "x")."""
    parts = path.split("/")
    return "/".join(parts[parts.index(owner) + 1:]) if owner in parts else path
