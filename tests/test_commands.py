"""Every command's flags come from its options (one source), the original's TPU
spellings work, and every task's train step runs under XLA with the static shapes a TPU
needs: on a faked TPU resolver, and as a one-line error on an unreachable one."""

import builtins
import dataclasses
import importlib
import os
import pathlib
import subprocess
import sys

import pytest
import tensorflow as tf

import test_electra
import test_run_classifier
import test_run_multiple_choice
import test_run_ner
import test_run_pretraining
import test_run_squad
import test_sentence_embeddings
from flag_contract import _parse, check_every_flag_reaches_options
from bert_tf.runs import driver, registry
from bert_tf.tasks.classification.task import ClassificationTask
from bert_tf.tasks.multiple_choice.task import MultipleChoiceTask
from bert_tf.tasks.ner.task import NerTask
from bert_tf.tasks.electra.task import ElectraTask
from bert_tf.tasks.pretraining.task import PretrainingTask
from bert_tf.tasks.sentence_embeddings.task import SentenceEmbeddingTask
from bert_tf.tasks.squad.task import SquadTask
from bert_tf.train import distribute

REPO = pathlib.Path(__file__).resolve().parents[1]
COMMANDS = sorted(p.stem for p in (REPO / "bert_tf" / "cli").glob("*.py")
                  if p.stem != "__init__")


def _options_and_required(module):
    """(options class, required flags) of a command; bert-train: of each task it runs."""
    if hasattr(module, "OPTIONS"):
        return [(module.OPTIONS, module.REQUIRED)]
    return [(registry.get(name).options_class, registry.get(name).required)
            for name in registry.names()]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_flag_of_every_command_reaches_its_options(command):
    module = importlib.import_module(f"bert_tf.cli.{command}")
    for options_class, required in _options_and_required(module):
        assert check_every_flag_reaches_options(options_class) >= 9
        assert set(required) <= {f.name for f in dataclasses.fields(options_class)}


def test_the_original_tpu_spellings_are_flags_of_every_training_runner():
    for command in ("run_pretraining", "run_classifier", "run_squad", "run_ner"):
        options_class = importlib.import_module(f"bert_tf.cli.{command}").OPTIONS
        _, parsed = _parse(options_class, [
            "--use_tpu", "--tpu_name=my-tpu", "--tpu_zone=us-central1-b",
            "--gcp_project=proj", "--num_tpu_cores=8", "--iterations_per_loop=7"])
        assert (parsed.distribution_strategy, parsed.tpu_name, parsed.tpu_zone,
                parsed.gcp_project, parsed.num_tpu_cores, parsed.steps_per_loop) == (
                    "tpu", "my-tpu", "us-central1-b", "proj", 8, 7), command
        _, parsed = _parse(options_class, ["--master=grpc://10.0.0.2:8470"])
        assert parsed.tpu_name == "grpc://10.0.0.2:8470"


def _command_line(command, options):
    """The flags that reproduce `options` of a tiny test run, for `command`."""
    flags = []
    for name in ("output_dir", "bert_config_file", "vocab_file", "task_name", "data_dir",
                 "input_file", "train_file", "max_seq_length", "max_predictions_per_seq",
                 "max_query_length", "doc_stride", "train_batch_size"):
        value = getattr(options, name, None)
        if value:
            flags.append(f"--{name}={value}")
    return [sys.executable, f"{command}.py", "--do_train", "--use_tpu",
            "--tpu_name=no-such-tpu-here", "--tpu_zone=us-central1-b", *flags]


TASKS = {
    "run_classifier": (test_run_classifier, ClassificationTask),
    "run_multiple_choice": (test_run_multiple_choice, MultipleChoiceTask),
    "run_ner": (test_run_ner, NerTask),
    "run_squad": (test_run_squad, SquadTask),
    "run_pretraining": (test_run_pretraining, PretrainingTask),
}
# The tasks bert-train alone runs (no script of the original's name) train on a TPU too.
TPU_TASKS = {**TASKS, "electra": (test_electra, ElectraTask),
             "sentence_embeddings": (test_sentence_embeddings, SentenceEmbeddingTask)}


def _tiny_run(command, tmp_path, **changes):
    """(options, task) of the test module's tiny run of `command`, with its data."""
    module, task_class = TPU_TASKS[command]
    module.write_tiny_inputs(tmp_path)
    options = module.tiny_options(tmp_path, **changes)
    return options, task_class(options)


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(TASKS))
def test_unreachable_tpu_is_one_line_naming_it(command, tmp_path):
    options, _ = _tiny_run(command, tmp_path)
    done = subprocess.run(_command_line(command, options), cwd=REPO, capture_output=True,
                          text=True, timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert done.returncode == 1, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"bert-{command.replace('_', '-')}: error: TPU 'no-such-tpu-here' (zone "
                           "'us-central1-b') could not be reached"), last
    assert "Traceback" not in done.stderr


class _FakeTpu:
    """Stands in for Cloud TPU: records the resolver calls; the strategy it builds runs
    on this CPU (no TPU kernels here), with the TPU settings of the run."""

    def __init__(self, monkeypatch):
        self.calls = []
        monkeypatch.setattr(distribute, "tpu_cluster_resolver", self.resolver)
        monkeypatch.setattr(tf.config, "experimental_connect_to_cluster",
                            lambda resolver: self.calls.append(("connect", resolver)))
        monkeypatch.setattr(tf.tpu.experimental, "initialize_tpu_system",
                            lambda resolver: self.calls.append(("initialize", resolver)))
        monkeypatch.setattr(tf.distribute, "TPUStrategy", self.strategy)

    def resolver(self, tpu_name, tpu_zone, gcp_project):
        self.calls.append(("resolver", tpu_name, tpu_zone, gcp_project))
        return f"resolver of {tpu_name}"

    def strategy(self, resolver):
        self.calls.append(("strategy", resolver))
        return tf.distribute.OneDeviceStrategy("/cpu:0")


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(TPU_TASKS))
def test_tpu_run_builds_the_strategy_and_trains_under_xla_on_static_shapes(
        command, tmp_path, monkeypatch):
    fake = _FakeTpu(monkeypatch)
    options, task = _tiny_run(command, tmp_path, distribution_strategy="tpu",
                              tpu_name="my-tpu", use_xla=True)
    shapes = []
    train_data = task.train_data

    def recording_train_data():
        data = train_data()
        spec = data.dataset_fn(tf.distribute.InputContext()).element_spec
        shapes.extend(value.shape for value in spec.values())
        return data

    task.train_data = recording_train_data
    outcome = driver.execute(task)
    assert [call[0] for call in fake.calls] == ["resolver", "connect", "initialize",
                                                "strategy"]
    assert fake.calls[0][1] == "my-tpu"
    assert shapes and all(shape.is_fully_defined() for shape in shapes), shapes
    result = outcome.runner.train_result
    assert result.global_step >= 1 and result.steps_this_run >= 1
    assert tf.train.latest_checkpoint(options.output_dir)


def test_one_finetuning_run_reads_its_config_and_vocab_once(tmp_path, monkeypatch):
    options, task = _tiny_run("run_classifier", tmp_path, do_train=True, do_eval=True,
                              do_predict=True, num_train_epochs=1.0)
    watched = {os.path.abspath(options.bert_config_file): 0,
               os.path.abspath(options.vocab_file): 0}
    real_open = builtins.open

    def counting_open(file, *args, **kwargs):
        path = os.path.abspath(file) if isinstance(file, (str, os.PathLike)) else None
        if path in watched:
            watched[path] += 1
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting_open)
    driver.run(task)
    assert list(watched.values()) == [1, 1], watched
