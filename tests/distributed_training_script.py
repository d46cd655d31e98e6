"""Subprocess side of tests/test_distribute.py (logical devices and TF_CONFIG must be set
before TensorFlow initialises, so these runs need a fresh process).

    python distributed_training_script.py mirrored RECORD_DIR OUT_DIR RESULT_JSON
        one_device and mirrored (2 logical CPUs) runs of a tiny BERT; writes both loss
        curves.
    python distributed_training_script.py tiny_mirrored OUT_DIR RESULT_JSON
        the same with the tiny regressor of harness.py (fast).
    python distributed_training_script.py tiny_mirrored_float16 OUT_DIR RESULT_JSON
        the same in float16 (loss scaling) with 2 micro-batches per replica.
    python distributed_training_script.py worker OUT_DIR RESULT_JSON
        one worker of a MultiWorkerMirroredStrategy (TF_CONFIG from the environment).
"""

import json
import os
import sys

import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _tiny_bert_options(record_dir, out_dir, **overrides):
    from bert_tf.tasks.pretraining.options import (  # pylint: disable=import-outside-toplevel
        PretrainingOptions)
    from harness import RUNNER_OVERRIDES, tiny_config  # pylint: disable=import-outside-toplevel
    config = tiny_config(num_hidden_layers=1, **RUNNER_OVERRIDES)
    values = dict(do_train=True, bert_config=config, input_file=os.path.join(record_dir, "*"),
                  output_dir=out_dir, max_seq_length=16, max_predictions_per_seq=3,
                  train_batch_size=8, learning_rate=1e-2, num_train_steps=12,
                  num_warmup_steps=1, save_checkpoints_steps=12, steps_per_loop=1,
                  seed=3)
    values.update(overrides)
    return PretrainingOptions(**values)


def run_mirrored(record_dir, out_dir, result_path):
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from bert_tf.tasks.pretraining import task as pretraining  # pylint: disable=import-outside-toplevel
    from bert_tf.train import distribute  # pylint: disable=import-outside-toplevel
    from bert_tf.train import records  # pylint: disable=import-outside-toplevel

    # In-order data (no shuffling), so that the two replicas' halves of each global
    # batch are exactly the one-device batch.
    def ordered_dataset(options, is_training):
        def dataset_fn(context):
            return records.pretraining_dataset(
                options.input_file, 16, 3, options.train_batch_size, is_training=False,
                input_context=context, repeat=True)
        return dataset_fn
    pretraining._dataset_fn = ordered_dataset  # pylint: disable=protected-access
    curves = {}
    for name in ("one_device", "mirrored"):
        strategy = distribute.get_strategy(name)
        options = _tiny_bert_options(record_dir, os.path.join(out_dir, name))
        result = pretraining.run_pretraining(options, strategy)["train"]
        curves[name] = {"replicas": strategy.num_replicas_in_sync,
                        "losses": [h["total_loss"] for h in result.history]}
    with open(result_path, "w", encoding="utf-8") as stream:
        json.dump(curves, stream)


def run_tiny_mirrored(out_dir, result_path, float16=False):
    """The tiny regressor on one device and mirrored over 2 logical CPUs."""
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from bert_tf.train import distribute  # pylint: disable=import-outside-toplevel
    from bert_tf.train import loop  # pylint: disable=import-outside-toplevel
    from harness import (  # pylint: disable=import-outside-toplevel
        TinyRegressor, dataset_fn_factory, optimizer_fn, regression_loss)
    import keras  # pylint: disable=import-outside-toplevel
    # A loss scale that never overflows here: dynamic scaling starting at 2**15 skips
    # overflowing steps, and how many depends on the size of the partial gradients.
    scaled = lambda: keras.optimizers.LossScaleOptimizer(  # noqa: E731
        optimizer_fn()(), initial_scale=64.0)
    curves = {}
    runs = {"one_device": {}, "mirrored": {}}
    if float16:
        runs = {name: dict(mixed_precision="float16", gradient_accumulation_steps=2,
                           optimizer_fn=scaled) for name in runs}
    for name, extra in runs.items():
        strategy = distribute.get_strategy(name)
        make_optimizer = extra.pop("optimizer_fn", optimizer_fn())
        result = loop.train(
            strategy, TinyRegressor, regression_loss, dataset_fn_factory(8, shuffle=False),
            optimizer_fn=make_optimizer, settings=loop.LoopSettings(
                output_dir=os.path.join(out_dir, name), num_train_steps=16,
                global_batch_size=8, save_checkpoints_steps=16, steps_per_loop=4, **extra))
        curves[name] = {"replicas": strategy.num_replicas_in_sync,
                        "losses": [h["total_loss"] for h in result.history],
                        "weights": [v.numpy().tolist()
                                    for v in result.model.trainable_variables]}
    with open(result_path, "w", encoding="utf-8") as stream:
        json.dump(curves, stream)


def run_worker(out_dir, result_path):
    from bert_tf.train import distribute  # pylint: disable=import-outside-toplevel
    from bert_tf.train import loop  # pylint: disable=import-outside-toplevel
    from harness import (  # pylint: disable=import-outside-toplevel
        TinyRegressor, dataset_fn_factory, optimizer_fn, regression_loss)
    strategy = distribute.get_strategy("multi_worker_mirrored")
    result = loop.train(
        strategy, TinyRegressor, regression_loss, dataset_fn_factory(8),
        optimizer_fn=optimizer_fn(), settings=loop.LoopSettings(
            output_dir=out_dir, num_train_steps=4, global_batch_size=8,
            save_checkpoints_steps=4, steps_per_loop=2))
    with open(result_path, "w", encoding="utf-8") as stream:
        json.dump({"replicas": strategy.num_replicas_in_sync, "step": result.global_step,
                   "chief": distribute.is_chief(strategy),
                   "losses": [h["total_loss"] for h in result.history]}, stream)


if __name__ == "__main__":
    if sys.argv[1] == "mirrored":
        run_mirrored(*sys.argv[2:5])
    elif sys.argv[1] == "tiny_mirrored":
        run_tiny_mirrored(*sys.argv[2:4])
    elif sys.argv[1] == "tiny_mirrored_float16":
        run_tiny_mirrored(*sys.argv[2:4], float16=True)
    else:
        run_worker(*sys.argv[2:4])
