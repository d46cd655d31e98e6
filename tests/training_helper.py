"""A tiny regression problem for exercising bert_tf.train.loop quickly (no BERT needed).

Also runnable as a script (used by the kill-and-resume test):
    python training_helper.py OUTPUT_DIR NUM_STEPS SAVE_STEPS [SLEEP_SECONDS]
"""

import sys
import time

import keras
import numpy as np
import tensorflow as tf

NUM_EXAMPLES, DIM = 64, 4


@keras.saving.register_keras_serializable(package="bert_tf_tests")
class TinyRegressor(keras.Model):
    """y = dense2(relu(dense1(x))), called with a feature dict."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.hidden = keras.layers.Dense(
            8, activation="relu", name="hidden",
            kernel_initializer=keras.initializers.GlorotUniform(seed=1))
        self.out = keras.layers.Dense(
            1, name="out", kernel_initializer=keras.initializers.GlorotUniform(seed=2))

    def call(self, features, training=None):
        return {"y": self.out(self.hidden(features["x"]))[:, 0]}


def regression_loss(features, outputs):
    error = tf.cast(outputs["y"], tf.float32) - features["target"]  # float32 losses
    return {"total_loss": tf.reduce_mean(error ** 2), "mean_error": tf.reduce_mean(error)}


def make_arrays(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(NUM_EXAMPLES, DIM)).astype("float32")
    target = (x @ np.array([1.0, -2.0, 0.5, 3.0], "float32") + 0.1).astype("float32")
    return x, target


def dataset_fn_factory(global_batch_size, seed=0, shuffle=True):
    x, target = make_arrays()

    def dataset_fn(input_context):
        batch = input_context.get_per_replica_batch_size(global_batch_size)
        dataset = tf.data.Dataset.from_tensor_slices({"x": x, "target": target}).repeat()
        if shuffle:
            dataset = dataset.shuffle(32, seed=seed)
        return dataset.batch(batch, drop_remainder=True)
    return dataset_fn


def optimizer_fn(num_steps=1000):
    from bert_tf.train import optimization  # pylint: disable=import-outside-toplevel
    return lambda: optimization.create_optimizer(0.05, num_steps, 2)


def train_tiny(output_dir, num_steps, save_steps, sleep_seconds=0.0, **kwargs):
    from bert_tf.train import loop  # pylint: disable=import-outside-toplevel
    loss_fn = regression_loss
    if sleep_seconds:
        def loss_fn(features, outputs):  # slows each step down, for the kill test
            tf.py_function(lambda: time.sleep(sleep_seconds), [], [])
            return regression_loss(features, outputs)
    kwargs.setdefault("steps_per_loop", 2)
    # The shuffle order depends on the global seed too: fix it, so that a run in this
    # process and one in a subprocess (the kill test) see the same data whatever seed
    # earlier tests in this process set.
    tf.random.set_seed(1234)
    return loop.train(
        tf.distribute.get_strategy(), TinyRegressor, loss_fn, dataset_fn_factory(8),
        optimizer_fn=optimizer_fn(), output_dir=output_dir, num_train_steps=num_steps,
        global_batch_size=8, save_checkpoints_steps=save_steps, **kwargs)


if __name__ == "__main__":
    train_tiny(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]),
               float(sys.argv[4]) if len(sys.argv) > 4 else 0.0)
