"""`tf.distribute` strategies from the runners' flags, and multi-worker helpers.

`get_strategy` maps `--distribution_strategy` to a strategy:

* `one_device`: `OneDeviceStrategy` on `/gpu:0` when `num_gpus > 0`, else `/cpu:0`;
* `mirrored`: `MirroredStrategy` over `num_gpus` GPUs, or over every logical CPU device
  when `num_gpus == 0` (tests split the CPU into logical devices);
* `multi_worker_mirrored`: `MultiWorkerMirroredStrategy`; the cluster comes from the
  `TF_CONFIG` environment variable;
* `tpu`: `TPUStrategy` over a `TPUClusterResolver(tpu=tpu_name, zone=tpu_zone,
  project=gcp_project)`, as google-research/bert's `--tpu_name/--tpu_zone/--gcp_project`.
"""

import json
import os

import tensorflow as tf

from bert_tf.process import supervisor
from bert_tf.train.choices import STRATEGIES


def tpu_cluster_resolver(tpu_name=None, tpu_zone=None, gcp_project=None):
    """The `TPUClusterResolver` for a Cloud TPU name (or "local" on a TPU VM)."""
    return tf.distribute.cluster_resolver.TPUClusterResolver(
        tpu=tpu_name, zone=tpu_zone, project=gcp_project)


def get_strategy(distribution_strategy="one_device", num_gpus=0, tpu_name=None,
                 tpu_zone=None, gcp_project=None):
    """Builds the `tf.distribute.Strategy` named by `distribution_strategy`.

    Args:
        distribution_strategy: One of `STRATEGIES`.
        num_gpus: GPUs to use for one_device / mirrored (0: CPU).
        tpu_name: Cloud TPU name or grpc address ("local" on a TPU VM); tpu only.
        tpu_zone: GCE zone of the Cloud TPU; tpu only.
        gcp_project: GCP project of the Cloud TPU; tpu only.

    Returns:
        A `tf.distribute.Strategy`.

    Raises:
        ValueError: for an unknown strategy name, more GPUs than are visible, or TPU
            flags given with another strategy.
    """
    if distribution_strategy not in STRATEGIES:
        raise ValueError(f"distribution_strategy must be one of {STRATEGIES}, "
                         f"got {distribution_strategy!r}")
    if distribution_strategy != "tpu" and tpu_name:
        raise ValueError(f"tpu_name={tpu_name!r} is set but distribution_strategy is "
                         f"{distribution_strategy!r}; use distribution_strategy=tpu")
    if num_gpus < 0:
        raise ValueError(f"num_gpus must be >= 0, got {num_gpus}")
    if distribution_strategy in ("one_device", "mirrored") and num_gpus:
        visible = len(tf.config.list_logical_devices("GPU"))
        if num_gpus > visible:
            raise ValueError(f"num_gpus={num_gpus} but only {visible} GPU(s) are visible")
    if distribution_strategy == "one_device":
        return tf.distribute.OneDeviceStrategy("/gpu:0" if num_gpus else "/cpu:0")
    if distribution_strategy == "mirrored":
        if num_gpus:
            devices = [f"/gpu:{index}" for index in range(num_gpus)]
        else:
            devices = [device.name for device in tf.config.list_logical_devices("CPU")]
        return tf.distribute.MirroredStrategy(devices=devices)
    if distribution_strategy == "multi_worker_mirrored":
        check_tf_config(os.environ.get("TF_CONFIG"))
        strategy = tf.distribute.MultiWorkerMirroredStrategy()  # waits for the workers
        supervisor.notify_joined()  # a command's parent may pass signals on now
        return strategy
    return tpu_strategy(tpu_name, tpu_zone, gcp_project)


def check_tf_config(text):
    """Raises ValueError naming TF_CONFIG unless `text` (its value) is unset or a JSON
    object whose "cluster" and "task" are objects, as MultiWorkerMirroredStrategy reads
    it."""
    if not text:
        return
    try:
        config = json.loads(text)
    except ValueError as error:
        raise ValueError(f"TF_CONFIG is not valid JSON ({error}): expected "
                         '{"cluster": {"worker": ["host:port", ...]}, "task": {"type": '
                         '"worker", "index": 0}}') from None
    if not isinstance(config, dict) or not all(
            isinstance(config.get(key, {}), dict) for key in ("cluster", "task")):
        raise ValueError(f"TF_CONFIG must be a JSON object with a \"cluster\" object and a "
                         f"\"task\" object, got {text[:200]!r}")


# What resolving or connecting to an absent or unreachable TPU raises: a failed name or
# metadata lookup (URLError is an OSError), an unknown name, a refused connection.
TPU_CONNECTION_ERRORS = (OSError, ValueError, RuntimeError, ImportError,
                         tf.errors.OpError)


def tpu_strategy(tpu_name=None, tpu_zone=None, gcp_project=None):
    """`TPUStrategy` on the named Cloud TPU (resolved by `tpu_cluster_resolver`).

    Raises:
        ValueError: naming the TPU (and zone, project) when it cannot be found or reached.
    """
    try:
        resolver = tpu_cluster_resolver(tpu_name, tpu_zone, gcp_project)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except TPU_CONNECTION_ERRORS as error:
        where = ", ".join(f"{name} {value!r}" for name, value in (
            ("zone", tpu_zone), ("project", gcp_project)) if value)
        raise ValueError(
            f"TPU {tpu_name!r}{f' ({where})' if where else ''} could not be reached: "
            f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}; "
            "check --tpu_name, --tpu_zone and --gcp_project (on a TPU VM: "
            "--tpu_name=local)") from error
    return tf.distribute.TPUStrategy(resolver)


def is_tpu(strategy) -> bool:
    """Whether `strategy` runs on TPU cores (read off its extended object's class)."""
    return "TPU" in type(strategy.extended).__name__


def is_multi_worker(strategy) -> bool:
    """Whether `strategy` spans several workers (MultiWorkerMirroredStrategy of more
    than one)."""
    return (isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
            and strategy.extended._num_workers > 1)  # pylint: disable=protected-access


def is_chief(strategy):
    """True on the worker that writes summaries, final exports and results."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    if task_type in (None, "chief"):
        return True
    cluster = resolver.cluster_spec().as_dict()
    return task_type == "worker" and task_id == 0 and "chief" not in cluster


def worker_checkpoint_dir(strategy, output_dir):
    """Where this worker saves checkpoints: `output_dir` on the chief.

    Every worker of a MultiWorkerMirroredStrategy must take part in a save; the others
    write to a private `output_dir/.worker_tmp/<task>` that `cleanup_worker_dir` removes.
    """
    if is_chief(strategy):
        return output_dir
    resolver = strategy.cluster_resolver
    return os.path.join(output_dir, ".worker_tmp", f"{resolver.task_type}_{resolver.task_id}")


def cleanup_worker_dir(strategy, checkpoint_dir):
    """Removes a non-chief worker's private checkpoint folder."""
    if not is_chief(strategy) and tf.io.gfile.exists(checkpoint_dir):
        tf.io.gfile.rmtree(checkpoint_dir)


def check_global_batch_size(global_batch_size, strategy, name="train_batch_size",
                            micro_batches=1):
    """Raises ValueError unless the batch splits evenly over replicas (and micro-batches)."""
    replicas = strategy.num_replicas_in_sync
    if global_batch_size <= 0:
        raise ValueError(f"{name} must be > 0, got {global_batch_size}")
    if global_batch_size % replicas:
        raise ValueError(f"{name}={global_batch_size} is not divisible by the "
                         f"{replicas} replicas of the distribution strategy")
    per_replica = global_batch_size // replicas
    if per_replica % micro_batches:
        raise ValueError(
            f"{name}={global_batch_size} gives {per_replica} examples per replica, not "
            f"divisible by gradient_accumulation_steps={micro_batches}")
