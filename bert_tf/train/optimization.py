"""Optimizers for BERT: AdamW or LAMB, linear warm-up then linear decay, clipping.

`create_optimizer` builds the optimizer BERT is fine-tuned and pre-trained with:

* `AdamWeightDecay` (registered): Adam with decoupled weight decay, epsilon added to the
  bias-corrected root as torch / Hugging Face transformers do (`bias_correction=True`,
  the default), or exactly google-research/bert's `AdamWeightDecayOptimizer`, which has no
  bias correction (`bias_correction=False`). Keras' own Adam adds epsilon to the
  uncorrected root, an effective epsilon 30x larger at step 1, which slows the early
  fine-tuning steps; it is not used. LAMB is `keras.optimizers.Lamb`;
* learning rate: `WarmupLinearDecay`, a registered `LearningRateSchedule`: linear warm-up
  from 0 to `init_lr` over `num_warmup_steps`, then linear decay from `init_lr` to 0 at
  `num_train_steps` (`lr_schedule="linear"`, as transformers'
  `get_linear_schedule_with_warmup`), or google-research/bert's polynomial decay over all
  steps that the warm-up overrides (`lr_schedule="google_research"`: the rate right
  after warm-up is already `init_lr * (1 - warmup / total)`);
* decoupled weight decay `weight_decay_rate` (0.01), skipped for LayerNorm parameters and
  biases (`DEFAULT_WEIGHT_DECAY_EXCLUSIONS`, matched against variable names);
* global-norm gradient clipping at `clipnorm` (1.0);
* layer-wise learning-rate decay `layerwise_lr_decay` (google-research/electra's
  `_get_layer_lrs`, Clark et al. 2020): depth 0 for the embeddings, `i + 1` for encoder
  layer `i` of `n`, `n + 2` for the pooler and the task head; a variable trains at
  `rate * decay^(n + 2 - depth)`: the head and pooler at the rate, the top layer at
  `rate * decay^2` (ELECTRA leaves depth `n + 1` unused), the embeddings at
  `rate * decay^(n + 2)`. Each variable's rate is scaled (its update and its decoupled
  weight decay), after clipping; not its gradient, to which Adam is invariant
  (`layerwise_lr_multipliers`);
* optionally wrapped in `keras.optimizers.LossScaleOptimizer` for float16 training.
"""

import re

import keras
from absl import logging

from bert_tf.train.choices import (
    LR_SCHEDULES, OPTIMIZER_TYPES, check_layerwise_lr_decay, validate_schedule)

# The original excludes ["LayerNorm", "layer_norm", "bias"] by (scoped) TF1 name. Keras 3
# variable names are short ("gamma", "beta", "bias", "kernel"), so the LayerNorm
# parameters are matched by their own names as well.
DEFAULT_WEIGHT_DECAY_EXCLUSIONS = ("LayerNorm", "layer_norm", "gamma", "beta", "bias")


@keras.saving.register_keras_serializable(package="bert_tf")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up to `peak_learning_rate`, then linear decay to 0.

    While `step < num_warmup_steps`: `peak * step / num_warmup_steps`. After it:

    * `decay_from="warmup_end"` (transformers' `get_linear_schedule_with_warmup`):
      `peak * (num_train_steps - step) / (num_train_steps - num_warmup_steps)`, so the
      decay starts from the peak;
    * `decay_from="start"` (google-research/bert's `create_optimizer`):
      `peak * (1 - step / num_train_steps)`, one decay over all steps that the warm-up
      overrides, so the rate right after warm-up is `peak * (1 - warmup / total)`.

    Both are 0 from `num_train_steps` on.

    Args:
        peak_learning_rate: The rate at the end of warm-up (the `--learning_rate` flag).
        num_train_steps: Step at which the rate reaches 0.
        num_warmup_steps: Length of the linear warm-up; 0 disables it.
        decay_from: "warmup_end" or "start" (see above).
    """

    def __init__(self, peak_learning_rate, num_train_steps, num_warmup_steps,
                 decay_from="warmup_end"):
        super().__init__()
        validate_schedule(peak_learning_rate, num_train_steps, num_warmup_steps)
        if decay_from not in ("warmup_end", "start"):
            raise ValueError(f"decay_from must be 'warmup_end' or 'start', got {decay_from!r}")
        self.peak_learning_rate = float(peak_learning_rate)
        self.num_train_steps = int(num_train_steps)
        self.num_warmup_steps = int(num_warmup_steps)
        self.decay_from = decay_from

    def __call__(self, step):
        step = keras.ops.minimum(keras.ops.cast(step, "float32"), float(self.num_train_steps))
        decay_start = float(self.num_warmup_steps) if self.decay_from == "warmup_end" else 0.0
        decay_length = max(float(self.num_train_steps) - decay_start, 1.0)
        # step <= num_train_steps and decay_start <= num_train_steps: never negative.
        decayed = self.peak_learning_rate * (
            float(self.num_train_steps) - keras.ops.maximum(step, decay_start)) / decay_length
        if self.num_warmup_steps == 0:
            return decayed
        warmup = self.peak_learning_rate * step / float(self.num_warmup_steps)
        return keras.ops.where(step < float(self.num_warmup_steps), warmup, decayed)

    def get_config(self):
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps,
            "decay_from": self.decay_from,
        }


# Scopes of a variable's path that place it (ELECTRA's `_get_layer_lrs` keys).
_LAYER_SCOPE = re.compile(r"layer_(\d+)")
_EMBEDDING_SCOPES = ("embeddings", "embeddings_project")


def variable_path(variable):
    """A Keras variable's path (`bert_classifier/bert_encoder/layer_0/.../kernel`)."""
    return getattr(variable, "path", None) or variable.name


def layer_depth(path, num_layers):
    """ELECTRA's depth of a variable, counted from the bottom: 0 for the embeddings (and
    their projection), `i + 1` for encoder layer `layer_i`, `num_layers + 2` for the
    rest (pooler, task head)."""
    scopes = path.split("/")[:-1]
    for scope in scopes:
        match = _LAYER_SCOPE.fullmatch(scope)
        if match:
            return int(match.group(1)) + 1
    if any(scope in _EMBEDDING_SCOPES for scope in scopes):
        return 0
    return num_layers + 2


def layerwise_lr_multipliers(variables, decay, num_layers=None):
    """{variable path: decay ** (num_layers + 2 - depth)} (see `layer_depth`).

    Args:
        variables: Keras variables (or their paths).
        decay: In (0, 1].
        num_layers: The encoder's layer count; default: the highest `layer_<i>` + 1.

    Raises:
        ValueError: for a decay outside (0, 1], or a decay < 1 and no variable in a
            `layer_<i>` scope (not a BERT encoder).
    """
    check_layerwise_lr_decay(decay)
    paths = [v if isinstance(v, str) else variable_path(v) for v in variables]
    if num_layers is None:
        indices = [int(m.group(1)) for path in paths for scope in path.split("/")[:-1]
                   for m in [_LAYER_SCOPE.fullmatch(scope)] if m]
        if not indices and decay != 1:
            raise ValueError(f"layerwise_lr_decay={decay} needs an encoder whose layers are "
                             f"named layer_<i>; none among the {len(paths)} variables "
                             f"({', '.join(paths[:3])}, ...)")
        num_layers = max(indices, default=-1) + 1
    return {path: float(decay) ** (num_layers + 2 - layer_depth(path, num_layers))
            for path in paths}


class LayerwiseLearningRates:
    """Optimizer mixin: each variable's rate times its `layerwise_lr_multipliers`.

    The multipliers are computed from the variables' paths when the optimizer is built;
    `update_step` gets the scaled rate, and the decoupled weight decay uses it too (done
    there, variable by variable, instead of Keras's one rate for all). With
    `layerwise_lr_decay=1` the optimizer is the base class unchanged.

    Args:
        layerwise_lr_decay: In (0, 1]; 1 disables it.
        **kwargs: The base optimizer's.
    """

    def __init__(self, layerwise_lr_decay=1.0, **kwargs):
        super().__init__(**kwargs)
        check_layerwise_lr_decay(layerwise_lr_decay)
        self.layerwise_lr_decay = float(layerwise_lr_decay)
        self._lr_multipliers = None

    def build(self, variables):
        super().build(variables)
        if self.layerwise_lr_decay != 1.0:
            table = layerwise_lr_multipliers(variables, self.layerwise_lr_decay)
            self._lr_multipliers = tuple(table[variable_path(v)] for v in variables)
            logging.info("Layer-wise learning-rate decay %g: rate x %g (head, pooler) to x "
                         "%g (embeddings)", self.layerwise_lr_decay,
                         max(self._lr_multipliers), min(self._lr_multipliers))

    def lr_multiplier(self, variable):
        """The factor of `variable`'s learning rate (1.0 without layer-wise decay)."""
        if self._lr_multipliers is None:
            return 1.0
        return self._lr_multipliers[self._get_variable_index(variable)]

    def _apply_weight_decay(self, variables):
        if self._lr_multipliers is None:
            super()._apply_weight_decay(variables)
        # else: in update_step, at each variable's own rate

    def update_step(self, gradient, variable, learning_rate):
        if self._lr_multipliers is None:
            return super().update_step(gradient, variable, learning_rate)
        learning_rate = keras.ops.cast(learning_rate, variable.dtype) * keras.ops.cast(
            self.lr_multiplier(variable), variable.dtype)
        if self.weight_decay is not None and self._use_weight_decay(variable):
            decay = keras.ops.cast(self.weight_decay, variable.dtype)
            self.assign_sub(variable, variable * decay * learning_rate)
        return super().update_step(gradient, variable, learning_rate)

    def get_config(self):
        config = super().get_config()
        config["layerwise_lr_decay"] = self.layerwise_lr_decay
        return config


@keras.saving.register_keras_serializable(package="bert_tf")
class LayerwiseLamb(LayerwiseLearningRates, keras.optimizers.Lamb):
    """`keras.optimizers.Lamb` with layer-wise learning-rate decay (`LayerwiseLearningRates`)."""


class _AdamWeightDecayUpdate(keras.optimizers.Adam):
    """The update of `AdamWeightDecay` (below), at the rate it is given."""

    def __init__(self, bias_correction=True, **kwargs):
        super().__init__(**kwargs)
        self.bias_correction = bool(bias_correction)

    def update_step(self, gradient, variable, learning_rate):
        lr = keras.ops.cast(learning_rate, variable.dtype)
        gradient = keras.ops.cast(gradient, variable.dtype)
        m = self._momentums[self._get_variable_index(variable)]
        v = self._velocities[self._get_variable_index(variable)]
        self.assign_add(m, (gradient - m) * (1 - self.beta_1))
        self.assign_add(v, (keras.ops.square(gradient) - v) * (1 - self.beta_2))
        if self.bias_correction:
            local_step = keras.ops.cast(self.iterations + 1, variable.dtype)
            first = m / (1 - keras.ops.power(keras.ops.cast(self.beta_1, variable.dtype),
                                             local_step))
            second = v / (1 - keras.ops.power(keras.ops.cast(self.beta_2, variable.dtype),
                                              local_step))
        else:
            first, second = m, v
        self.assign_sub(variable, lr * first / (keras.ops.sqrt(second) + self.epsilon))

    def get_config(self):
        config = super().get_config()
        config["bias_correction"] = self.bias_correction
        return config


@keras.saving.register_keras_serializable(package="bert_tf")
class AdamWeightDecay(LayerwiseLearningRates, _AdamWeightDecayUpdate):
    """Adam with decoupled weight decay, bias-corrected as torch or uncorrected as the original.

    The update of a variable `w` with gradient `g` at step `t` (1-based), after the
    decoupled decay `w -= lr * weight_decay * w` that Keras' base optimizer applies:

        m = beta_1 * m + (1 - beta_1) * g
        v = beta_2 * v + (1 - beta_2) * g^2
        bias_correction=True:  w -= lr * m_hat / (sqrt(v_hat) + epsilon),
                               m_hat = m / (1 - beta_1^t), v_hat = v / (1 - beta_2^t)
                               (torch.optim.AdamW, Hugging Face transformers)
        bias_correction=False: w -= lr * m / (sqrt(v) + epsilon)
                               (google-research/bert's AdamWeightDecayOptimizer)

    With layer-wise decay, `lr` is each variable's rate (`LayerwiseLearningRates`).
    Slots and their names are Keras Adam's, so checkpoints of either variant resume in
    the other.

    Args:
        bias_correction: See above.
        layerwise_lr_decay: In (0, 1]: ELECTRA's layer-wise rates; 1 (default): off.
        **kwargs: Those of `keras.optimizers.Adam` (`learning_rate`, `weight_decay`,
            `beta_1`, `beta_2`, `epsilon`, `global_clipnorm`, ...).
    """


def create_optimizer(init_lr, num_train_steps, num_warmup_steps, optimizer_type="adamw",
                     weight_decay_rate=0.01, clipnorm=1.0, beta_1=0.9, beta_2=0.999,
                     epsilon=1e-6,
                     exclude_from_weight_decay=DEFAULT_WEIGHT_DECAY_EXCLUSIONS,
                     loss_scale=False, lr_schedule="linear", adam_bias_correction=True,
                     layerwise_lr_decay=1.0):
    """Builds the BERT optimizer; call it inside `strategy.scope()`.

    Args:
        init_lr: Peak learning rate (reached at the end of warm-up).
        num_train_steps: Total optimizer steps; the rate decays to 0 there.
        num_warmup_steps: Steps of linear warm-up (<= num_train_steps).
        optimizer_type: "adamw" or "lamb".
        weight_decay_rate: Decoupled weight decay; 0 disables it.
        clipnorm: Global-norm clipping threshold; None or 0 disables clipping.
        beta_1: Adam first-moment decay.
        beta_2: Adam second-moment decay.
        epsilon: Adam epsilon.
        exclude_from_weight_decay: Substrings (regular expressions) of variable names
            that get no weight decay.
        loss_scale: Wrap the optimizer in a dynamic `LossScaleOptimizer` (float16).
        lr_schedule: "linear" (decay from the peak after warm-up, as transformers) or
            "google_research" (the original's decay over all steps).
        adam_bias_correction: AdamW only: epsilon added to the bias-corrected root, as
            torch (True), or the original's Adam without bias correction (False).
        layerwise_lr_decay: In (0, 1]; below 1, ELECTRA's layer-wise rates: the head and
            pooler at the rate, encoder layer i of n at `rate * decay^(n + 1 - i)`, the
            embeddings at `rate * decay^(n + 2)` (AdamW and LAMB). 1: off.

    Returns:
        A `keras.optimizers.Optimizer`.

    Raises:
        ValueError: naming the argument that cannot work.
    """
    validate_schedule(init_lr, num_train_steps, num_warmup_steps)
    if optimizer_type not in OPTIMIZER_TYPES:
        raise ValueError(
            f"optimizer_type must be one of {OPTIMIZER_TYPES}, got {optimizer_type!r}")
    if lr_schedule not in LR_SCHEDULES:
        raise ValueError(f"lr_schedule must be one of {LR_SCHEDULES}, got {lr_schedule!r}")
    if weight_decay_rate < 0:
        raise ValueError(f"weight_decay_rate must be >= 0, got {weight_decay_rate}")
    check_layerwise_lr_decay(layerwise_lr_decay)
    schedule = WarmupLinearDecay(
        init_lr, num_train_steps, num_warmup_steps,
        decay_from="warmup_end" if lr_schedule == "linear" else "start")
    common = dict(learning_rate=schedule, weight_decay=float(weight_decay_rate) or None,
                  beta_1=beta_1, beta_2=beta_2, epsilon=epsilon,
                  global_clipnorm=clipnorm or None, name=optimizer_type)
    if optimizer_type == "lamb":
        optimizer = (keras.optimizers.Lamb(**common) if layerwise_lr_decay == 1 else
                     LayerwiseLamb(layerwise_lr_decay=layerwise_lr_decay, **common))
    else:
        optimizer = AdamWeightDecay(bias_correction=adam_bias_correction,
                                    layerwise_lr_decay=layerwise_lr_decay, **common)
    if weight_decay_rate and exclude_from_weight_decay:
        optimizer.exclude_from_weight_decay(var_names=list(exclude_from_weight_decay))
    if loss_scale:
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


def inner_optimizer(optimizer):
    """The optimizer doing the updates (unwraps a `LossScaleOptimizer`)."""
    return getattr(optimizer, "inner_optimizer", optimizer)


def current_learning_rate(optimizer):
    """The learning rate the next update uses, as a float32 tensor."""
    return keras.ops.cast(inner_optimizer(optimizer).learning_rate, "float32")
