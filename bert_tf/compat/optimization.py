"""google-research/bert's `optimization.create_optimizer`, as a Keras optimizer.

    from bert_tf.compat import optimization          # was: import optimization
    optimizer = optimization.create_optimizer(2e-5, num_train_steps, num_warmup_steps)
    model.compile(optimizer=optimizer, ...)           # or optimizer.apply_gradients(...)

The original's recipe, built by `bert_tf.train.optimization.create_optimizer`:

- learning rate at step t (0-based, the update's `optimizer.iterations`): while
  `t < num_warmup_steps`, `init_lr * t / num_warmup_steps`; after it the polynomial
  decay (power 1.0) over all steps, `init_lr * (1 - min(t, num_train_steps) /
  num_train_steps)`, 0 from `num_train_steps` on;
- its `AdamWeightDecayOptimizer`: Adam without bias correction, beta_1 0.9, beta_2
  0.999, epsilon 1e-6, decoupled weight decay 0.01 except for LayerNorm parameters and
  biases (matched by name: "LayerNorm", "layer_norm", "bias", and Keras' "gamma" and
  "beta");
- gradients clipped to a global norm of 1.0.

What differs: the original takes the loss first and returns a TF1 `train_op` that also
increments the global step; this returns the optimizer (its `iterations` is the global
step). `use_tpu` is accepted and ignored: build the optimizer inside the
`tf.distribute.TPUStrategy`'s `scope()` instead of wrapping it in a
`CrossShardOptimizer`.
"""

import numbers

from bert_tf.train import optimization

# The original's AdamWeightDecayOptimizer settings.
WEIGHT_DECAY_RATE = 0.01
EPSILON = 1e-6
CLIP_NORM = 1.0


def create_optimizer(init_lr, num_train_steps, num_warmup_steps, use_tpu=False):
    """The original's optimizer: warm-up, linear decay to 0, AdamW without bias correction.

    Args:
        init_lr: Peak learning rate.
        num_train_steps: Steps at which the rate reaches 0.
        num_warmup_steps: Steps of linear warm-up (0: none).
        use_tpu: Ignored (build the optimizer inside the strategy's `scope()`).

    Returns:
        A `keras.optimizers.Optimizer` (`bert_tf.train.optimization.AdamWeightDecay`).

    Raises:
        TypeError: when called as the original (`create_optimizer(loss, init_lr, ...)`).
        ValueError: naming the argument of a schedule that cannot work.
    """
    del use_tpu
    if isinstance(init_lr, bool) or not isinstance(init_lr, numbers.Real):
        raise TypeError(
            f"create_optimizer(init_lr, num_train_steps, num_warmup_steps): init_lr must "
            f"be a number, got {type(init_lr).__name__}. The original took the loss first "
            "and returned a TF1 train_op; this returns a Keras optimizer: drop the loss "
            "and call optimizer.apply_gradients (or model.compile(optimizer=...))")
    return optimization.create_optimizer(
        init_lr, num_train_steps, num_warmup_steps, optimizer_type="adamw",
        weight_decay_rate=WEIGHT_DECAY_RATE, clipnorm=CLIP_NORM, beta_1=0.9, beta_2=0.999,
        epsilon=EPSILON, exclude_from_weight_decay=optimization.DEFAULT_WEIGHT_DECAY_EXCLUSIONS,
        lr_schedule="google_research", adam_bias_correction=False)
