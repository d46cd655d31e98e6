"""Evaluation and prediction over a dataset, with progress every 30 seconds (`evaluate`
is also `bert_tf.train.loop.evaluate`).

    metrics = evaluate(strategy, model, eval_dataset_fn, metrics_fn)  # {name: mean}
    for batch in predict(strategy, model, dataset_fn, passthrough_keys=("unique_ids",)):
        ...                                                # numpy dict per batch
"""

import tensorflow as tf

from bert_tf.train import distribute
from bert_tf.train import progress
from bert_tf.train import steps


def batches(strategy, dataset_fn):
    """The batches of `dataset_fn` for a strategy's steps: the plain dataset on one
    replica of one worker (what tf.distribute would wrap in a generator-based device
    iterator, which tf.data then warns it cannot optimise), else the distributed one."""
    if strategy.num_replicas_in_sync == 1 and not (
            distribute.is_tpu(strategy) or distribute.is_multi_worker(strategy)):
        return dataset_fn(tf.distribute.InputContext())
    return strategy.distribute_datasets_from_function(dataset_fn)


def evaluate(strategy, model, eval_dataset_fn, metrics_fn, num_steps=None,
             name="Evaluating"):
    """Weighted means of `metrics_fn(features, outputs)` over an eval dataset.

    Args:
        strategy: The strategy `model` was built under.
        model: A built model.
        eval_dataset_fn: (InputContext) -> dataset of feature dicts (finite, or capped by
            `num_steps`).
        metrics_fn: (features, outputs) -> {name: values or (values, weights)}.
        num_steps: Stop after this many batches (None: the whole dataset).
        name: How the progress lines start.

    Returns:
        {name: float} weighted means, plus "eval_steps".
    """
    dataset = batches(strategy, eval_dataset_fn)
    eval_step = steps.make_eval_step(strategy, model, metrics_fn)
    totals, num_batches = {}, 0
    shown = progress.PhaseProgress(name, num_steps, unit="batches")
    for features in dataset:
        if num_steps is not None and num_batches >= num_steps:
            break
        sums = eval_step(features)
        for metric, (value, weight) in sums.items():
            total = totals.setdefault(metric, [0.0, 0.0])
            total[0] += float(value)
            total[1] += float(weight)
        num_batches += 1
        shown.update(1)
    shown.finish()
    results = {metric: value / weight if weight else 0.0
               for metric, (value, weight) in totals.items()}
    results["eval_steps"] = num_batches
    return results


def predict(strategy, model, dataset_fn, passthrough_keys=(), num_examples=None,
            name="Predicting", unit="examples"):
    """Yields numpy dicts of model outputs (+ `passthrough_keys` features) per batch,
    logging progress (of `num_examples`, when given) as it starts, every 30 seconds
    and at the end; the lines start with `name` ("Evaluating" when the predictions are
    scored against gold labels) and count rows as `unit` ("texts" where a row is not
    one of the task's examples)."""
    shown = progress.PhaseProgress(name, num_examples, unit=unit)
    shown.start()  # the first batch traces the step: 30 s without a line otherwise
    dataset = batches(strategy, dataset_fn)
    predict_step = steps.make_predict_step(strategy, model, passthrough_keys)
    for features in dataset:
        per_replica = predict_step(features)
        batch = {key: tf.concat(strategy.experimental_local_results(value), axis=0).numpy()
                 for key, value in per_replica.items()}
        shown.update(len(next(iter(batch.values()))))
        yield batch
    shown.finish()
