"""Optimizers for BERT: AdamW or LAMB, linear warm-up then linear decay, clipping.

`create_optimizer` builds a stock Keras optimizer (`keras.optimizers.AdamW` or
`keras.optimizers.Lamb`) configured as google-research/bert trains:

* learning rate: `WarmupLinearDecay`, a registered `LearningRateSchedule` that rises
  linearly from 0 to `init_lr` over `num_warmup_steps` and otherwise decays linearly from
  `init_lr` to 0 at `num_train_steps` (exactly the original's polynomial decay with
  power 1 and its warm-up override);
* decoupled weight decay `weight_decay_rate` (0.01), skipped for LayerNorm parameters and
  biases (`DEFAULT_WEIGHT_DECAY_EXCLUSIONS`, matched against variable names);
* global-norm gradient clipping at `clipnorm` (1.0);
* optionally wrapped in `keras.optimizers.LossScaleOptimizer` for float16 training.

Differences from the original `AdamWeightDecayOptimizer`: Keras' Adam applies bias
correction to the moment estimates (the original does not), and `epsilon` defaults to the
original's 1e-6.
"""

import keras

OPTIMIZER_TYPES = ("adamw", "lamb")

# The original excludes ["LayerNorm", "layer_norm", "bias"] by (scoped) TF1 name. Keras 3
# variable names are short ("gamma", "beta", "bias", "kernel"), so the LayerNorm
# parameters are matched by their own names as well.
DEFAULT_WEIGHT_DECAY_EXCLUSIONS = ("LayerNorm", "layer_norm", "gamma", "beta", "bias")


@keras.saving.register_keras_serializable(package="bert_tf")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up to `peak_learning_rate`, then linear decay to 0.

    `lr(step) = peak * step / num_warmup_steps` while `step < num_warmup_steps`, else
    `peak * (1 - min(step, num_train_steps) / num_train_steps)`, as google-research/bert's
    `create_optimizer` computes it (the decay runs over all `num_train_steps`, so the
    rate right after warm-up is `peak * (1 - num_warmup_steps / num_train_steps)`).

    Args:
        peak_learning_rate: The rate at the end of warm-up (the `--learning_rate` flag).
        num_train_steps: Step at which the rate reaches 0.
        num_warmup_steps: Length of the linear warm-up; 0 disables it.
    """

    def __init__(self, peak_learning_rate, num_train_steps, num_warmup_steps):
        super().__init__()
        validate_schedule(peak_learning_rate, num_train_steps, num_warmup_steps)
        self.peak_learning_rate = float(peak_learning_rate)
        self.num_train_steps = int(num_train_steps)
        self.num_warmup_steps = int(num_warmup_steps)

    def __call__(self, step):
        step = keras.ops.cast(step, "float32")
        decayed = self.peak_learning_rate * (
            1.0 - keras.ops.minimum(step, float(self.num_train_steps))
            / float(self.num_train_steps))
        if self.num_warmup_steps == 0:
            return decayed
        warmup = self.peak_learning_rate * step / float(self.num_warmup_steps)
        return keras.ops.where(step < float(self.num_warmup_steps), warmup, decayed)

    def get_config(self):
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps,
        }


def validate_schedule(init_lr, num_train_steps, num_warmup_steps):
    """Raises ValueError naming the argument when the schedule cannot work."""
    if not init_lr > 0:
        raise ValueError(f"learning_rate must be > 0, got {init_lr}")
    if isinstance(num_train_steps, bool) or int(num_train_steps) != num_train_steps \
            or num_train_steps <= 0:
        raise ValueError(f"num_train_steps must be a positive integer, got {num_train_steps}")
    if int(num_warmup_steps) != num_warmup_steps or num_warmup_steps < 0:
        raise ValueError(
            f"num_warmup_steps must be an integer >= 0, got {num_warmup_steps}")
    if num_warmup_steps > num_train_steps:
        raise ValueError(
            f"num_warmup_steps ({num_warmup_steps}) must not exceed num_train_steps "
            f"({num_train_steps}): the learning rate would never finish warming up")


def create_optimizer(init_lr, num_train_steps, num_warmup_steps, optimizer_type="adamw",
                     weight_decay_rate=0.01, clipnorm=1.0, beta_1=0.9, beta_2=0.999,
                     epsilon=1e-6,
                     exclude_from_weight_decay=DEFAULT_WEIGHT_DECAY_EXCLUSIONS,
                     loss_scale=False):
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

    Returns:
        A `keras.optimizers.Optimizer`.

    Raises:
        ValueError: naming the argument that cannot work.
    """
    validate_schedule(init_lr, num_train_steps, num_warmup_steps)
    if optimizer_type not in OPTIMIZER_TYPES:
        raise ValueError(
            f"optimizer_type must be one of {OPTIMIZER_TYPES}, got {optimizer_type!r}")
    if weight_decay_rate < 0:
        raise ValueError(f"weight_decay_rate must be >= 0, got {weight_decay_rate}")
    schedule = WarmupLinearDecay(init_lr, num_train_steps, num_warmup_steps)
    if optimizer_type == "lamb":
        optimizer_class = keras.optimizers.Lamb
    else:  # keras' AdamW insists on a float decay; plain Adam when there is none.
        optimizer_class = keras.optimizers.AdamW if weight_decay_rate else keras.optimizers.Adam
    optimizer = optimizer_class(
        learning_rate=schedule,
        weight_decay=float(weight_decay_rate) or None,
        beta_1=beta_1,
        beta_2=beta_2,
        epsilon=epsilon,
        global_clipnorm=clipnorm or None,
        name=optimizer_type)
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
