"""Tests for bert_tf.train.distribute: strategy choice, TPU resolver, mirrored, multi-worker."""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.train import distribute
from harness import write_records

SCRIPT = os.path.join(os.path.dirname(__file__), "distributed_training_script.py")



def tf_config_for_local_workers(num_workers, task_index, ports):
    """A TF_CONFIG JSON string for `num_workers` processes on 127.0.0.1."""
    workers = [f"127.0.0.1:{port}" for port in ports[:num_workers]]
    return json.dumps({"cluster": {"worker": workers},
                       "task": {"type": "worker", "index": task_index}})

def test_one_device_on_cpu():
    strategy = distribute.get_strategy("one_device")
    assert isinstance(strategy, tf.distribute.OneDeviceStrategy)
    assert strategy.num_replicas_in_sync == 1
    assert distribute.is_chief(strategy)


@pytest.mark.parametrize("kwargs, match", [
    (dict(distribution_strategy="horovod"), "distribution_strategy must be one of"),
    (dict(distribution_strategy="mirrored", tpu_name="my-tpu"), "distribution_strategy=tpu"),
    (dict(distribution_strategy="one_device", num_gpus=64), "num_gpus=64"),
])
def test_bad_strategy_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        distribute.get_strategy(**kwargs)


def test_tpu_strategy_is_built_from_name_zone_and_project(monkeypatch):
    calls = {}

    class FakeResolver:
        def __init__(self, tpu=None, zone=None, project=None):
            calls["resolver"] = dict(tpu=tpu, zone=zone, project=project)

    monkeypatch.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver", FakeResolver)
    monkeypatch.setattr(tf.config, "experimental_connect_to_cluster",
                        lambda resolver: calls.setdefault("connect", resolver))
    monkeypatch.setattr(tf.tpu.experimental, "initialize_tpu_system",
                        lambda resolver: calls.setdefault("initialize", resolver))
    monkeypatch.setattr(tf.distribute, "TPUStrategy",
                        lambda resolver: ("tpu-strategy", resolver))
    strategy = distribute.get_strategy("tpu", tpu_name="my-tpu", tpu_zone="us-central1-b",
                                       gcp_project="my-project")
    assert calls["resolver"] == dict(tpu="my-tpu", zone="us-central1-b",
                                     project="my-project")
    assert isinstance(calls["connect"], FakeResolver)
    assert calls["initialize"] is calls["connect"]
    assert strategy == ("tpu-strategy", calls["connect"])


def test_batch_size_checks():
    strategy = distribute.get_strategy("one_device")
    distribute.check_global_batch_size(8, strategy, micro_batches=4)
    with pytest.raises(ValueError, match="train_batch_size=8 gives 8 examples per replica"):
        distribute.check_global_batch_size(8, strategy, micro_batches=3)
    with pytest.raises(ValueError, match="eval_batch_size must be > 0"):
        distribute.check_global_batch_size(0, strategy, "eval_batch_size")


def _run_script(args, env=None, timeout=240):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **(env or {}))
    return subprocess.Popen([sys.executable, SCRIPT] + args, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_mirrored_on_two_cpus_matches_one_device(tmp_path):
    result_path = tmp_path / "curves.json"
    process = _run_script(["tiny_mirrored", str(tmp_path / "out"), str(result_path)])
    output, _ = process.communicate(timeout=240)
    assert process.returncode == 0, output[-3000:]
    curves = json.loads(result_path.read_text())
    assert curves["one_device"]["replicas"] == 1 and curves["mirrored"]["replicas"] == 2
    one, mirrored = curves["one_device"]["losses"], curves["mirrored"]["losses"]
    assert one[-1] < one[0] / 2  # it did train
    np.testing.assert_allclose(mirrored, one, rtol=1e-5)
    for a, b in zip(curves["one_device"]["weights"], curves["mirrored"]["weights"]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_mirrored_float16_with_accumulation_matches_one_device(tmp_path):
    result_path = tmp_path / "curves.json"
    process = _run_script(["tiny_mirrored_float16", str(tmp_path / "out"),
                           str(result_path)])
    output, _ = process.communicate(timeout=300)
    assert process.returncode == 0, output[-3000:]
    curves = json.loads(result_path.read_text())
    one, mirrored = curves["one_device"], curves["mirrored"]
    assert mirrored["replicas"] == 2
    assert one["losses"][-1] < one["losses"][0] / 2
    np.testing.assert_allclose(mirrored["losses"], one["losses"], rtol=2e-3)


@pytest.mark.slow
def test_mirrored_tiny_bert_gives_the_one_device_loss_curve(tmp_path):
    # Every record has 3 masked tokens: each replica's mean loss weighs its tokens like
    # the one-device mean does, so the curves must agree up to float rounding.
    write_records(tmp_path / "records", 2, 24, num_masked=3)
    result_path = tmp_path / "curves.json"
    process = _run_script(["mirrored", str(tmp_path / "records"), str(tmp_path / "out"),
                           str(result_path)])
    output, _ = process.communicate(timeout=240)
    assert process.returncode == 0, output[-3000:]
    curves = json.loads(result_path.read_text())
    assert curves["one_device"]["replicas"] == 1 and curves["mirrored"]["replicas"] == 2
    one, mirrored = curves["one_device"]["losses"], curves["mirrored"]["losses"]
    assert len(one) == len(mirrored) == 12
    # It did train: the second pass over the 6 batches has lower losses than the first.
    assert np.mean(one[6:]) < np.mean(one[:6]) - 0.1
    np.testing.assert_allclose(mirrored, one, rtol=2e-5)


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


@pytest.mark.slow
def test_multi_worker_mirrored_with_two_local_workers(tmp_path):
    ports = _free_ports(2)
    out = tmp_path / "out"
    processes = [
        _run_script(["worker", str(out), str(tmp_path / f"worker{index}.json")],
                    env={"TF_CONFIG": tf_config_for_local_workers(2, index, ports)})
        for index in range(2)]
    outputs = [p.communicate(timeout=300)[0] for p in processes]
    for process, output in zip(processes, outputs):
        assert process.returncode == 0, output[-3000:]
    results = [json.loads((tmp_path / f"worker{i}.json").read_text()) for i in range(2)]
    assert [r["chief"] for r in results] == [True, False]
    assert all(r["replicas"] == 2 and r["step"] == 4 for r in results)
    assert results[0]["losses"] == results[1]["losses"]  # one synchronous model
    assert sorted(os.path.basename(p) for p in tf.io.gfile.glob(str(out / "ckpt-*"))) == [
        "ckpt-4.data-00000-of-00001", "ckpt-4.index"]
    assert not os.path.exists(out / ".worker_tmp" / "worker_1")
