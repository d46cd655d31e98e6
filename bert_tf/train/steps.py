"""The compiled steps under `bert_tf.train.loop`: train loop, eval and predict steps.

`make_train_loop` returns a `tf.function(iterator, num_steps)` that runs `num_steps`
optimizer steps in one call (`steps_per_loop`, the original's `iterations_per_loop`).
Each step, on every replica:

1. splits its batch into `gradient_accumulation_steps` micro-batches and sums their
   gradients (one forward/backward pass each);
2. scales each micro-batch loss by `1 / (replicas * micro_batches)`, so the summed
   gradient is the gradient of the mean loss over replicas and micro-batches (the
   original's TPU `CrossShardOptimizer` also averaged the per-core losses);
3. all-reduces the gradients across replicas once, then hands them to the Keras
   optimizer, which clips the *global* gradient norm, unscales float16 losses, applies
   weight decay and updates. The optimizer's own all-reduce is turned off
   (`disable_optimizer_all_reduce`): Keras would otherwise clip each replica's partial
   gradient before summing, which is not global-norm clipping.

With `use_xla`, a single replica's whole step (passes and update) is one XLA cluster;
with several replicas the forward/backward pass is, and the all-reduce and update are not.
"""

import keras
import tensorflow as tf

from bert_tf.train import optimization


def as_loss_dict(losses):
    """A loss function's result as a dict with `total_loss` (float32 scalars)."""
    if not isinstance(losses, dict):
        losses = {"total_loss": losses}
    if "total_loss" not in losses:
        raise ValueError(f"loss_fn must return a scalar or a dict with 'total_loss'; got "
                         f"keys {sorted(losses)}")
    return {name: tf.cast(value, tf.float32) for name, value in losses.items()}


def disable_optimizer_all_reduce(optimizer):
    """Makes the (inner) Keras optimizer take already all-reduced gradients as they are."""
    inner = optimization.inner_optimizer(optimizer)
    if not hasattr(inner, "_all_reduce_sum_gradients"):
        raise RuntimeError(
            f"{type(inner).__name__} has no _all_reduce_sum_gradients: this Keras version "
            "aggregates gradients differently; bert_tf.train.loop needs updating")
    inner._all_reduce_sum_gradients = lambda grads_and_vars: grads_and_vars  # pylint: disable=protected-access


def _split_micro_batches(features, micro_batches):
    """[B, ...] -> [micro_batches, B / micro_batches, ...] for every feature."""
    def split(tensor):
        shape = tf.shape(tensor)
        return tf.reshape(tensor, tf.concat([[micro_batches, shape[0] // micro_batches],
                                             shape[1:]], axis=0))
    return tf.nest.map_structure(split, features)


def _next_replica_batches(strategy, iterator):
    """One batch per replica from a plain (host) iterator of per-replica batches."""
    replicas = strategy.num_replicas_in_sync
    if replicas == 1:
        return next(iterator)
    batches = [next(iterator) for _ in range(replicas)]
    return strategy.experimental_distribute_values_from_function(
        lambda context: batches[context.replica_id_in_sync_group])


def loss_names(model, loss_fn, element_spec):
    """The keys `loss_fn` returns, read from a trace on `element_spec`. Nothing runs: a
    batch whose shapes follow from its values (rows packing a varying number of texts)
    has no stand-in of zeros."""
    def names(features):
        with tf.name_scope("loss_names"):  # a model's own name need not be a root scope
            return as_loss_dict(loss_fn(features, model(features, training=False)))
    return sorted(tf.function(names).get_concrete_function(element_spec).structured_outputs)


def make_train_loop(strategy, model, loss_fn, optimizer, global_step, loss_names,
                    gradient_accumulation_steps=1, use_xla=False, host_iterator=False):
    """Returns `train_loop(iterator, num_steps) -> dict of mean losses over the steps`.

    `loss_names` are the keys `loss_fn` returns (see `loss_names`).

    `iterator` is a distributed iterator, or with `host_iterator` a plain iterator of
    per-replica batches (one is taken for each replica).
    """
    variables = model.trainable_variables
    micro_batches = gradient_accumulation_steps
    one_replica = strategy.num_replicas_in_sync == 1
    disable_optimizer_all_reduce(optimizer)
    forward_backward = _forward_backward_fn(
        model, loss_fn, optimizer, variables,
        loss_scale=1.0 / (strategy.num_replicas_in_sync * micro_batches))
    if use_xla and not one_replica:  # the all-reduce stays outside XLA
        forward_backward = tf.function(forward_backward, jit_compile=True)
    if micro_batches > 1:
        forward_backward = _accumulated(forward_backward, micro_batches)

    def replica_step(features):
        losses, grads = forward_backward(features)
        context = tf.distribute.get_replica_context()
        if strategy.num_replicas_in_sync > 1:
            grads = context.all_reduce(tf.distribute.ReduceOp.SUM, grads)
        optimizer.apply_gradients(zip(grads, variables))
        return losses

    if use_xla and one_replica:  # the optimizer update is compiled too
        replica_step = tf.function(replica_step, jit_compile=True)

    @tf.function
    def train_loop(iterator, num_steps):
        totals = {name: tf.constant(0.0) for name in loss_names}
        for _ in tf.range(num_steps):
            features = (_next_replica_batches(strategy, iterator) if host_iterator
                        else next(iterator))
            per_replica = strategy.run(replica_step, args=(features,))
            losses = {k: strategy.reduce(tf.distribute.ReduceOp.MEAN, v, axis=None)
                      for k, v in per_replica.items()}
            global_step.assign_add(1)
            totals = {k: totals[k] + losses[k] for k in loss_names}
        return {k: v / tf.cast(num_steps, tf.float32) for k, v in totals.items()}

    return train_loop


def _forward_backward_fn(model, loss_fn, optimizer, variables, loss_scale):
    """`forward_backward(features) -> (losses, gradients of variables)` of one batch, the
    loss scaled by `loss_scale` (1 / (replicas x micro-batches): their sum is the mean)
    and by a `LossScaleOptimizer`'s scale."""
    scales_loss = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)

    def forward_backward(features):
        with tf.GradientTape() as tape:
            outputs = model(features, training=True)
            losses = as_loss_dict(loss_fn(features, outputs))
            loss = losses["total_loss"]
            if model.losses:
                loss += tf.cast(tf.add_n(model.losses), tf.float32)
            loss = loss * loss_scale
            if scales_loss:
                loss = optimizer.scale_loss(loss)
        grads = tape.gradient(loss, variables)
        # Variables the loss does not reach (the pooler under a span or token head) get
        # zero gradients instead of None, so that summing and all-reduce work.
        return losses, [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
                        for g, v in zip(grads, variables)]
    return forward_backward


def _accumulated(forward_backward, micro_batches):
    """`forward_backward` over a batch cut into `micro_batches` parts: the gradients
    summed, the losses averaged."""
    def accumulate(features):
        micro = _split_micro_batches(features, micro_batches)
        first = tf.nest.map_structure(lambda t: t[0], micro)
        losses, grads = forward_backward(first)
        for index in tf.range(1, micro_batches):
            part = tf.nest.map_structure(lambda t, i=index: t[i], micro)
            more_losses, more_grads = forward_backward(part)
            losses = {k: losses[k] + more_losses[k] for k in losses}
            grads = [g + h for g, h in zip(grads, more_grads)]
        return {k: v / micro_batches for k, v in losses.items()}, grads
    return accumulate


def _once_per_model(model, key, make_step):
    """`make_step()`, made once per model and `key`, then reused.

    A run evaluates and predicts several times (eval, predict, each evaluation while
    training, each set of texts): a new tf.function each time would trace again, and
    TensorFlow counts traces per Python function, not per tf.function, so the fifth
    warned "triggered tf.function retracing". Kept on the model, untracked (never
    saved), and gone with it.
    """
    steps = model.__dict__.get("_bert_tf_steps")
    if steps is None:
        steps = {}
        object.__setattr__(model, "_bert_tf_steps", steps)  # past Keras's tracking
    if key not in steps:
        steps[key] = make_step()
    return steps[key]


def make_eval_step(strategy, model, metrics_fn):
    """Returns `eval_step(features) -> {name: (weighted sum, weight sum)}` over replicas
    (one per model, strategy and `metrics_fn`: see `_once_per_model`).

    `metrics_fn(features, outputs)` returns `{name: values}` or `{name: (values,
    weights)}`; the evaluation reports `sum(values * weights) / sum(weights)`.
    """
    return _once_per_model(model, ("eval", strategy, metrics_fn),
                           lambda: _make_eval_step(strategy, model, metrics_fn))


def _make_eval_step(strategy, model, metrics_fn):
    def replica_step(features):
        outputs = model(features, training=False)
        sums = {}
        for name, value in metrics_fn(features, outputs).items():
            values, weights = value if isinstance(value, tuple) else (value, None)
            values = tf.cast(values, tf.float32)
            weights = tf.ones_like(values) if weights is None else tf.broadcast_to(
                tf.cast(weights, tf.float32), tf.shape(values))
            sums[name] = (tf.reduce_sum(values * weights), tf.reduce_sum(weights))
        return sums

    # Batches trimmed to their longest sequence vary in length: trace once for any length.
    @tf.function(reduce_retracing=True)
    def eval_step(features):
        per_replica = strategy.run(replica_step, args=(features,))
        return tf.nest.map_structure(
            lambda v: strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None),
            per_replica)

    return eval_step


def make_predict_step(strategy, model, passthrough_keys=()):
    """Returns `predict_step(features) -> per-replica dict of outputs + passthrough`
    (one per model, strategy and keys: see `_once_per_model`)."""
    return _once_per_model(model, ("predict", strategy, tuple(passthrough_keys)),
                           lambda: _make_predict_step(strategy, model, passthrough_keys))


def _make_predict_step(strategy, model, passthrough_keys):
    def replica_step(features):
        outputs = dict(model(features, training=False))
        for key in passthrough_keys:
            outputs[key] = features[key]
        return outputs

    @tf.function(reduce_retracing=True)  # batches of varying length, as eval_step
    def predict_step(features):
        return strategy.run(replica_step, args=(features,))

    return predict_step
