"""Tests for bert_tf.train.loop on a tiny regression model: resume, accumulation, kill,
SIGINT / SIGTERM (save, then stop) and a full disk."""

import errno
import glob
import os
import signal
import sys
import threading

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.train import loop
from bert_tf.train.inference import predict
from bert_tf.train import optimization
from bert_tf.train import preemption
from bert_tf.train import steps
from bert_tf.train import warm_start
from harness import (TinyRegressor, dataset_fn_factory, kill_once_checkpointed, make_arrays,
                     optimizer_fn, regression_loss, train_tiny, write_records)

HELPER = os.path.join(os.path.dirname(__file__), "harness.py")  # runs train_tiny


def _weights(model):
    return [v.numpy() for v in model.trainable_variables]


def _assert_same_weights(a, b, rtol=1e-6):
    for x, y in zip(_weights(a), _weights(b)):
        np.testing.assert_allclose(x, y, rtol=rtol, atol=1e-7)


def test_trains_saves_and_reports(tmp_path):
    result = train_tiny(str(tmp_path), 12, 4, keep_checkpoint_max=2)
    assert result.global_step == 12 and result.steps_this_run == 12
    assert result.history[-1]["total_loss"] < result.history[0]["total_loss"]
    assert [h["step"] for h in result.history] == [2, 4, 6, 8, 10, 12]
    kept = sorted(os.path.basename(p) for p in glob.glob(str(tmp_path / "ckpt-*.index")))
    assert kept == ["ckpt-12.index", "ckpt-8.index"]
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-12")
    # TensorBoard scalars: losses, learning rate, throughput at every loop.
    tags = {}
    for event_file in glob.glob(str(tmp_path / "train" / "events.*")):
        for event in tf.compat.v1.train.summary_iterator(event_file):
            for value in event.summary.value:
                tags.setdefault(value.tag, []).append(event.step)
    for tag in ("total_loss", "mean_error", "learning_rate", "sequences_per_second"):
        assert tags[tag] == [2, 4, 6, 8, 10, 12], tag


def test_resume_continues_with_same_optimizer_state_and_data_position(tmp_path):
    straight = train_tiny(str(tmp_path / "straight"), 12, 4)
    train_tiny(str(tmp_path / "resumed"), 8, 4)
    resumed = train_tiny(str(tmp_path / "resumed"), 12, 4)
    assert resumed.steps_this_run == 4 and resumed.global_step == 12
    _assert_same_weights(straight.model, resumed.model)
    # Without the input position in the checkpoint the resumed run sees other batches.
    train_tiny(str(tmp_path / "no_iter"), 8, 4, checkpoint_input_iterator=False)
    no_iter = train_tiny(str(tmp_path / "no_iter"), 12, 4, checkpoint_input_iterator=False)
    assert not np.allclose(_weights(straight.model)[0], _weights(no_iter.model)[0])


def test_finished_run_is_not_trained_again(tmp_path):
    train_tiny(str(tmp_path), 4, 2)
    again = train_tiny(str(tmp_path), 4, 2)
    assert again.steps_this_run == 0 and again.global_step == 4


def test_gradient_accumulation_matches_one_big_batch(tmp_path):
    whole = train_tiny(str(tmp_path / "whole"), 6, 6)
    split = train_tiny(str(tmp_path / "split"), 6, 6, gradient_accumulation_steps=4)
    np.testing.assert_allclose([h["total_loss"] for h in whole.history],
                               [h["total_loss"] for h in split.history], rtol=1e-5)
    _assert_same_weights(whole.model, split.model, rtol=1e-5)


@pytest.mark.slow
def test_xla_matches_plain(tmp_path):
    plain = train_tiny(str(tmp_path / "plain"), 4, 4)
    xla = train_tiny(str(tmp_path / "xla"), 4, 4, use_xla=True)
    _assert_same_weights(plain.model, xla.model, rtol=1e-4)


@pytest.mark.parametrize("precision", [pytest.param("bfloat16", marks=pytest.mark.slow),
                                       "float16"])
def test_mixed_precision_trains_with_float32_weights(tmp_path, precision):
    result = train_tiny(str(tmp_path), 6, 6, mixed_precision=precision)
    assert np.isfinite(result.losses["total_loss"])
    assert all(v.dtype == "float32" for v in result.model.trainable_variables)
    assert result.model.hidden.compute_dtype == precision
    assert keras.config.dtype_policy().name == "float32"  # global policy restored
    reader = tf.train.load_checkpoint(result.checkpoint)
    has_scale = any("dynamic_scale" in k or "loss_scale" in k
                    for k in reader.get_variable_to_shape_map())
    assert has_scale == (precision == "float16")


@pytest.mark.parametrize("kwargs, match", [
    (dict(gradient_accumulation_steps=3), "gradient_accumulation_steps=3"),
    (dict(steps_per_loop=0), "steps_per_loop"),
    (dict(mixed_precision="float8"), "mixed_precision"),
])
def test_bad_arguments_fail_before_training(tmp_path, kwargs, match):
    with pytest.raises(ValueError, match=match):
        train_tiny(str(tmp_path), 4, 2, **kwargs)
    assert not glob.glob(str(tmp_path / "ckpt-*"))


def test_evaluate_and_predict_match_numpy(tmp_path):
    strategy = tf.distribute.get_strategy()
    model = loop.build_model(strategy, TinyRegressor,
                             dataset_fn_factory(8)(tf.distribute.InputContext()).element_spec)
    x, target = make_arrays()

    def eval_fn(_):
        return tf.data.Dataset.from_tensor_slices({"x": x, "target": target}).batch(10)

    def metrics_fn(features, outputs):
        error = outputs["y"] - features["target"]
        return {"mse": error ** 2, "weighted": (error, features["x"][:, 0] > 0)}

    got = loop.evaluate(strategy, model, eval_fn, metrics_fn)
    predictions = model({"x": x}, training=False)["y"].numpy()
    error = predictions - target
    assert got["eval_steps"] == 7  # 64 examples, batches of 10
    assert got["mse"] == pytest.approx(float(np.mean(error ** 2)), rel=1e-5)
    assert got["weighted"] == pytest.approx(float(error[x[:, 0] > 0].mean()), rel=1e-4)
    capped = loop.evaluate(strategy, model, eval_fn, metrics_fn, num_steps=2)
    assert capped["eval_steps"] == 2
    batches = list(predict(strategy, model, eval_fn, passthrough_keys=("target",)))
    np.testing.assert_allclose(np.concatenate([b["y"] for b in batches]), predictions,
                               rtol=1e-5)
    np.testing.assert_array_equal(np.concatenate([b["target"] for b in batches]), target)


def test_repeated_evaluation_and_prediction_trace_once_per_model():
    """Eval, predict, each evaluation while training: the steps are made once per model
    and reused, so four rounds trace each at most twice (two batch shapes, the second a
    relaxed trace). TensorFlow warns "triggered tf.function retracing" from the fifth
    trace of the same Python code in the process; counting the traces of the model's own
    steps does not depend on what other tests traced before."""
    strategy = tf.distribute.get_strategy()
    model = loop.build_model(strategy, TinyRegressor,
                             dataset_fn_factory(8)(tf.distribute.InputContext()).element_spec)
    x, target = make_arrays()

    def eval_fn(_):  # 64 examples in 7 batches, the last of 4: two shapes
        return tf.data.Dataset.from_tensor_slices({"x": x, "target": target}).batch(10)

    def metrics_fn(features, outputs):
        del features
        return {"y": outputs["y"]}

    for _ in range(4):
        loop.evaluate(strategy, model, eval_fn, metrics_fn)
        list(predict(strategy, model, eval_fn, passthrough_keys=("target",)))
    eval_step = steps.make_eval_step(strategy, model, metrics_fn)
    predict_step = steps.make_predict_step(strategy, model, ("target",))
    assert 1 <= eval_step.experimental_get_tracing_count() <= 2
    assert 1 <= predict_step.experimental_get_tracing_count() <= 2


def test_sigkill_mid_run_then_restart_finishes_like_an_uninterrupted_run(tmp_path):
    out = str(tmp_path / "killed")
    killed_at = kill_once_checkpointed([sys.executable, HELPER, out, "40", "4", "0.05"], out,
                                       8, 120, dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert 8 <= killed_at < 40
    resumed = train_tiny(out, 40, 4)
    assert resumed.global_step == 40 and resumed.steps_this_run == 40 - killed_at
    straight = train_tiny(str(tmp_path / "straight"), 40, 4)
    _assert_same_weights(straight.model, resumed.model, rtol=1e-5)


def test_loss_fn_must_give_total_loss(tmp_path):
    with pytest.raises(ValueError, match="total_loss"):
        loop.train(tf.distribute.get_strategy(), TinyRegressor,
                   lambda f, o: {"mse": tf.reduce_mean(o["y"])}, dataset_fn_factory(8),
                   optimizer_fn=optimizer_fn(), settings=loop.LoopSettings(
                       output_dir=str(tmp_path), num_train_steps=2, global_batch_size=8))


@pytest.mark.parametrize("saved_precision", ["none", "float16"])
def test_moments_of_a_run_go_to_another_optimizer_without_its_step(tmp_path,
                                                                   saved_precision):
    """warm_start.restore_moments: AdamW moments (saved with or without float16's
    LossScaleOptimizer) into a LAMB wrapped for float16; the step counter stays 0."""
    train_tiny(str(tmp_path / "a"), 6, 6, mixed_precision=saved_precision)
    prefix = tf.train.latest_checkpoint(str(tmp_path / "a"))
    model = TinyRegressor()
    model({"x": tf.zeros([1, 4])})
    optimizer = keras.optimizers.LossScaleOptimizer(optimization.create_optimizer(
        0.05, 10, 2, optimizer_type="lamb"))
    optimizer.build(model.trainable_variables)
    assert warm_start.restore_moments(optimizer, prefix) == 8  # m and v of 4 variables
    inner = optimizer.inner_optimizer
    assert int(inner.iterations.numpy()) == 0
    reader = tf.train.load_checkpoint(prefix)
    stored = sorted((name for name in reader.get_variable_to_shape_map()
                     if "_variables/" in name),
                    key=lambda name: int(name.split("_variables/")[1].split("/")[0]))
    moments = [v.numpy() for v in inner.variables if v is not inner.iterations]
    assert len(stored) == len(moments)
    for got, name in zip(moments, stored):
        np.testing.assert_array_equal(got, reader.get_tensor(name))
    assert any(np.abs(moment).max() > 0 for moment in moments)
    # Moments of other variables are refused, naming the checkpoint.
    other = keras.Sequential([keras.layers.Dense(3)])
    other(tf.zeros([1, 4]))
    optimizer = optimization.create_optimizer(0.05, 10, 2)
    optimizer.build(other.trainable_variables)
    with pytest.raises(ValueError, match=f"optimizer state of {prefix} is of other "
                                         "variables: 8 moment variables there, 4 here"):
        warm_start.restore_moments(optimizer, prefix)


class _IdsRegressor(keras.Model):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dense = keras.layers.Dense(1, name="dense")

    def call(self, features, training=None):
        return {"y": self.dense(tf.cast(features["input_ids"], tf.float32))[:, 0]}


def test_resume_after_the_input_files_changed_starts_a_fresh_input_pass(tmp_path):
    from bert_tf.train import records  # pylint: disable=import-outside-toplevel
    paths, _ = write_records(tmp_path / "records", 3, 16)

    def loss_fn(features, outputs):
        target = tf.cast(features["masked_lm_ids"][:, 0], tf.float32)
        return tf.reduce_mean((outputs["y"] - target) ** 2)

    def run(files, steps):
        return loop.train(
            tf.distribute.get_strategy(), _IdsRegressor, loss_fn,
            lambda context: records.pretraining_dataset(files, 16, 3, 4, True, context, seed=0),
            optimizer_fn=optimizer_fn(), settings=loop.LoopSettings(
                output_dir=str(tmp_path / "out"), num_train_steps=steps,
                global_batch_size=4, save_checkpoints_steps=2, steps_per_loop=2))

    run(paths[:2], 4)
    resumed = run(paths, 8)  # one more file: the saved interleave state does not fit
    assert resumed.global_step == 8 and resumed.steps_this_run == 4


def _train_signalled(output_dir, signal_number, at_call, num_steps=12):
    """`train_tiny`'s run (steps_per_loop=3, saves every 4), whose loss sends
    `signal_number` to this process on its `at_call`-th execution (one per step;
    `loss_names` only traces it)."""
    calls = []

    def send():
        calls.append(None)
        if len(calls) == at_call:
            os.kill(os.getpid(), signal_number)

    def loss_fn(features, outputs):
        tf.py_function(send, [], [])
        return regression_loss(features, outputs)

    tf.random.set_seed(1234)  # as train_tiny
    return loop.train(
        tf.distribute.get_strategy(), TinyRegressor, loss_fn, dataset_fn_factory(8),
        optimizer_fn=optimizer_fn(), settings=loop.LoopSettings(
            output_dir=output_dir, num_train_steps=num_steps, global_batch_size=8,
            save_checkpoints_steps=4, steps_per_loop=3))


def _saved_steps(path):
    reader = tf.train.load_checkpoint(path)
    return (int(reader.get_tensor("global_step/.ATTRIBUTES/VARIABLE_VALUE")),
            int(reader.get_tensor("optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE")))


@pytest.mark.parametrize("signal_number, second", [(signal.SIGTERM, signal.SIGINT),
                                                   (signal.SIGINT, signal.SIGINT)])
def test_a_signal_saves_at_the_step_reached_then_stops_and_a_rerun_resumes(
        tmp_path, monkeypatch, signal_number, second):
    out = str(tmp_path / "signalled")
    previous = signal.getsignal(signal_number)
    save = tf.train.CheckpointManager.save

    def save_signalled_again(manager, checkpoint_number=None, **kwargs):
        if checkpoint_number % 4:  # the stop's own save: a second signal during it
            os.kill(os.getpid(), second)
        return save(manager, checkpoint_number=checkpoint_number, **kwargs)

    monkeypatch.setattr(tf.train.CheckpointManager, "save", save_signalled_again)
    # Loops of 3 steps: [1-3] [4] (saved) [5-7] ... The signal comes in step 5, so the
    # run stops after step 7, with that step saved.
    with pytest.raises(preemption.TrainingInterrupted) as raised:
        _train_signalled(out, signal_number, at_call=5)
    monkeypatch.undo()
    stopped = raised.value
    name = signal.Signals(signal_number).name
    assert (stopped.signal_name, stopped.signal_number, stopped.step) == (
        name, signal_number, 7)
    assert stopped.exit_code == 128 + signal_number and isinstance(stopped, KeyboardInterrupt)
    assert stopped.checkpoint_path == os.path.join(out, "ckpt-7")
    assert str(stopped) == (f"interrupted by {name} at step 7; saved {out}/ckpt-7; rerun "
                            "the same command to resume")
    assert signal.getsignal(signal_number) == previous  # the handlers are restored
    assert tf.train.latest_checkpoint(out) == stopped.checkpoint_path
    assert _saved_steps(stopped.checkpoint_path) == (7, 7)  # steps done, no more, no less
    assert not glob.glob(os.path.join(out, "*_temp*"))
    resumed = train_tiny(out, 12, 4, steps_per_loop=3)
    assert resumed.steps_this_run == 5 and resumed.global_step == 12
    straight = train_tiny(str(tmp_path / "straight"), 12, 4, steps_per_loop=3)
    _assert_same_weights(straight.model, resumed.model, rtol=1e-5)


def test_a_signal_in_the_last_loop_stops_after_the_final_save(tmp_path):
    out = str(tmp_path)
    with pytest.raises(preemption.TrainingInterrupted) as raised:
        _train_signalled(out, signal.SIGTERM, at_call=3, num_steps=3)
    assert raised.value.step == 3 and raised.value.checkpoint_path.endswith("ckpt-3")
    assert train_tiny(out, 3, 4, steps_per_loop=3).steps_this_run == 0


def test_outside_the_main_thread_no_handler_is_installed():
    installed = []

    def enter():
        before = signal.getsignal(signal.SIGTERM)
        with preemption.StopRequests() as stop:
            installed.append(signal.getsignal(signal.SIGTERM) is not before)
            installed.append(stop.requested)

    thread = threading.Thread(target=enter)
    thread.start()
    thread.join()
    assert installed == [False, False]


def _failing_save(error):
    """A CheckpointManager.save that leaves what a save cut short leaves, then raises."""
    def save(manager, checkpoint_number=None, **_):
        temp = os.path.join(manager.directory, f"ckpt-{checkpoint_number}_temp")
        os.makedirs(temp)
        with open(os.path.join(temp, "part-00000-of-00001.data-00000-of-00001"), "wb") as f:
            f.write(b"\0" * 1000)
        with open(os.path.join(manager.directory, f"ckpt-{checkpoint_number}.index"),
                  "wb") as f:
            f.write(b"partial")
        with open(os.path.join(manager.directory, "checkpoint.tmp0123abcd"), "w") as f:
            f.write("partial")
        raise error
    return save


@pytest.mark.parametrize("error", [
    tf.errors.ResourceExhaustedError(None, None, "ckpt-8_temp/part-00000-of-00001.data; "
                                     "No space left on device"),
    OSError(errno.ENOSPC, "No space left on device"),
    OSError(errno.EDQUOT, "Disk quota exceeded"),
], ids=["tf", "enospc", "edquot"])
def test_a_full_disk_removes_the_partial_save_and_names_output_dir(tmp_path, monkeypatch,
                                                                   error):
    out = str(tmp_path / "out")
    train_tiny(out, 4, 4)  # ckpt-4, complete
    before = sorted(os.listdir(out))
    monkeypatch.setattr(tf.train.CheckpointManager, "save", _failing_save(error))
    with pytest.raises(preemption.DiskFullError) as raised:
        train_tiny(out, 8, 4)
    message = str(raised.value)
    assert f"in output_dir {out}: no space left on device (E" in message and "\n" not in message
    assert message.endswith(f"resume from {out}/ckpt-4")
    assert raised.value.errno in (errno.ENOSPC, errno.EDQUOT) and raised.value.output_dir == out
    assert sorted(os.listdir(out)) == before  # the partial save is gone, ckpt-4 kept
    monkeypatch.undo()
    assert train_tiny(out, 8, 4).steps_this_run == 4


def test_another_failed_save_is_cleaned_up_and_re_raised(tmp_path, monkeypatch):
    out = str(tmp_path)
    error = tf.errors.InternalError(None, None, "ckpt-4_temp: something else")
    monkeypatch.setattr(tf.train.CheckpointManager, "save", _failing_save(error))
    with pytest.raises(tf.errors.InternalError):
        train_tiny(out, 4, 4)
    assert sorted(os.listdir(out)) == ["train"]


def test_a_read_only_save_is_cleaned_up_and_named(tmp_path, monkeypatch):
    out = str(tmp_path)
    error = tf.errors.PermissionDeniedError(None, None, f"{out}/ckpt-4_temp: Permission denied")
    monkeypatch.setattr(tf.train.CheckpointManager, "save", _failing_save(error))
    with pytest.raises(preemption.CheckpointNotSaved, match="read-only / permission denied"):
        train_tiny(out, 4, 4)
    assert sorted(os.listdir(out)) == ["train"]


def test_long_loops_are_cut_to_report_progress_every_period(tmp_path, caplog):
    """--steps_per_loop=1000 over 24 steps: progress lines come every period anyway, and
    the loop's history and checkpoints are those of one loop."""
    from absl import logging as absl_logging
    absl_logging.set_verbosity(absl_logging.INFO)
    result = train_tiny(str(tmp_path), 24, 1000, sleep_seconds=0.02, steps_per_loop=1000,
                        progress_every_seconds=0.1)
    assert [h["step"] for h in result.history] == [24]
    assert "the first step (tracing and compiling the loop) took" in caplog.text
    lines = [record.getMessage() for record in caplog.records
             if record.getMessage().startswith("step ")]
    assert len(lines) >= 2, caplog.text
    assert all("/24 (" in line and "examples/s, about" in line and "learning_rate = " in line
               for line in lines)
    steps = set()
    for event_file in glob.glob(str(tmp_path / "train" / "events.*")):
        for event in tf.compat.v1.train.summary_iterator(event_file):
            for value in event.summary.value:
                if value.tag == "examples_per_second":
                    steps.add(event.step)
    assert len(steps) >= 3 and 24 in steps  # the lines' and the loop's


def test_a_non_finite_loss_stops_the_run_without_saving(tmp_path):
    def diverging_optimizer():
        return optimization.create_optimizer(1e30, 100, 0)
    with pytest.raises(preemption.NonFiniteLoss, match=r"total_loss = (nan|inf).*not saved"):
        loop.train(tf.distribute.get_strategy(), TinyRegressor, regression_loss,
                   dataset_fn_factory(8), optimizer_fn=diverging_optimizer,
                   settings=loop.LoopSettings(output_dir=str(tmp_path), num_train_steps=40,
                                              global_batch_size=8, steps_per_loop=40,
                                              save_checkpoints_steps=40))
    assert tf.train.latest_checkpoint(str(tmp_path)) is None


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"cluster": [1]}'])
def test_a_tf_config_that_is_not_a_cluster_object_is_refused_naming_it(text):
    from bert_tf.train import distribute
    with pytest.raises(ValueError, match="^TF_CONFIG (is not valid JSON|must be a JSON "
                                         "object)"):
        distribute.check_tf_config(text)
    distribute.check_tf_config('{"cluster": {"worker": ["localhost:1"]}, '
                               '"task": {"type": "worker", "index": 0}}')
