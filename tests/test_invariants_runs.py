"""Issue 38, invariant 4: a run continues only what it can continue correctly.

Every setting that shapes the checkpoint, the input pipeline or the schedule is compared
with the run's saved config (`run_config.check_continuation`) before any work; a
difference stops the run with one line naming the setting, the saved value and the new
one. The settings are generated: any of them, changed to another value of its kind.
Also: bert_config.json values that cannot work, and a damaged latest checkpoint.
"""

import dataclasses
import json
import math
import os

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import harness
from bert_tf import options as options_lib
from bert_tf.configs import BertConfig
from bert_tf.tasks.pretraining import task as pretraining
from bert_tf.tasks.pretraining.options import PretrainingOptions
from bert_tf.runs import run_config
from bert_tf.train import distribute

FAST = settings(max_examples=30, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def _config(**changes):
    return {"format": 1, "command": "pretraining", "task": "pretraining",
            "model_type": "pretrainer", "labels": None,
            "options": {name: 1 for name in run_config.CONTINUATION_OPTIONS},
            "model": harness.tiny_config_dict(), "vocab": {"sha256": "ab" * 32,
                                                           "do_lower_case": True},
            **changes}


def _changed(value):
    """Another value of the kind of `value`."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value * 2 + 1
    if isinstance(value, str):
        return value + "x"
    return [value, "x"]


SETTINGS = ([("option", name) for name in run_config.CONTINUATION_OPTIONS]
            + [("model", name) for name in harness.tiny_config_dict()]
            + [("top", name) for name in ("task", "model_type", "labels")]
            + [("vocab", "sha256")])


@FAST
@given(setting=st.sampled_from(SETTINGS))
def test_every_shaping_setting_that_differs_is_named_with_both_values(setting):
    kind, name = setting
    saved, new = _config(labels=["a", "b"]), _config(labels=["a", "b"])
    if kind == "option":
        new["options"] = dict(new["options"], **{name: _changed(saved["options"][name])})
    elif kind == "model":
        new["model"] = dict(new["model"], **{name: _changed(saved["model"][name])})
    elif kind == "vocab":
        new["vocab"] = dict(new["vocab"], sha256="cd" * 32)
    else:
        new[name] = _changed(saved[name])
    differ = run_config.continuation_differences(saved, new)
    assert len(differ) == 1 and name in differ[0][0]
    assert differ[0][1] != differ[0][2]
    assert run_config.continuation_differences(saved, saved) == []


def test_options_that_do_not_shape_the_run_may_change():
    saved = _config()
    new = _config(options=dict(saved["options"], eval_batch_size=3, do_eval=True,
                               save_checkpoints_steps=7, keep_checkpoint_max=2))
    assert run_config.continuation_differences(saved, new) == []


def test_every_training_option_is_classified():
    """A new option of a task (every task of the registry) is either compared on
    continuation or listed here as not shaping the run: this test fails until it is one
    of the two."""
    not_shaping = {
        "do_train", "do_eval", "do_predict", "eval_batch_size", "predict_batch_size",
        "save_checkpoints_steps", "keep_checkpoint_max", "steps_per_loop", "use_xla",
        "distribution_strategy", "num_gpus", "tpu_name", "tpu_zone", "gcp_project",
        "num_tpu_cores", "trim_padding", "eval_every_steps", "best_metric",
        "early_stopping_patience", "progress_every_seconds", "verbose_logging",
        # where the model, vocab and data come from (their content is compared: the
        # config, the vocab's SHA-256, the labels; the task by name)
        "init_checkpoint", "bert_config_file", "allow_random_encoder", "vocab_file",
        "do_lower_case", "allow_case_mismatch", "output_dir", "export_dir", "data_dir",
        "train_file", "predict_file", "eval_file", "input_file", "input_compression",
        "task_name", "processor_module", "labels", "label_separator", "xnli_language",
        "restore_optimizer_state",
        "text_column", "text_pair_column", "label_column", "id_column", "tag_column",
        "word_column", "score_column", "sentence1_column", "sentence2_column",
        "retrieval_dir", "retrieval_split",
        # how the trained model is scored or served
        "max_eval_steps", "window_pooling",
        # the length: a continued run may be longer (run_config.LENGTH_OPTIONS)
        "num_train_steps", "num_train_epochs", "multi_label_threshold", "max_answer_length",
        "n_best_size", "null_score_diff_threshold",
        # several seeds: each seed's own run (output_dir/seed-N) has none of them
        "seeds", "num_seeds", "stop_bad_seeds_after",
    }
    from bert_tf.runs import registry  # pylint: disable=import-outside-toplevel
    names = {spec.name for entry in registry.TASKS.values()
             for spec in options_lib.option_specs(entry.options_class)}
    unclassified = names - set(run_config.CONTINUATION_OPTIONS) - not_shaping
    assert not unclassified, ("say whether these options shape a continued run "
                              f"(run_config.CONTINUATION_OPTIONS): {sorted(unclassified)}")


def _options(tmp_path, **overrides):
    values = dict(do_train=True, bert_config=harness.tiny_config(num_hidden_layers=1),
                  input_file=str(tmp_path / "records" / "*"),
                  output_dir=str(tmp_path / "out"), max_seq_length=16,
                  max_predictions_per_seq=3, train_batch_size=8, eval_batch_size=8,
                  learning_rate=1e-3, num_train_steps=2, num_warmup_steps=1,
                  save_checkpoints_steps=2, steps_per_loop=1, seed=1)
    values.update(overrides)
    return PretrainingOptions(**values)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A pre-training run of 2 steps, and how to run it again with changes."""
    tmp_path = tmp_path_factory.mktemp("continued")
    harness.write_records(tmp_path / "records", 1, 32)
    pretraining.run_pretraining(_options(tmp_path), distribute.get_strategy())
    return tmp_path


@pytest.mark.parametrize("change, named", [
    ({"bert_config": harness.tiny_config(num_hidden_layers=1, hidden_act="relu")},
     "bert_config hidden_act: 'gelu' there, 'relu' now"),
    ({"train_batch_size": 4}, "train_batch_size: 8 there, 4 now"),
    ({"max_predictions_per_seq": 4}, "max_predictions_per_seq: 3 there, 4 now"),
    ({"learning_rate": 2e-3}, "learning_rate: 0.001 there, 0.002 now"),
])
def test_a_continued_run_with_other_settings_stops_before_any_work(trained, change, named):
    output_dir = trained / "out"
    before = {name: os.path.getmtime(output_dir / name) for name in os.listdir(output_dir)
              if os.path.isfile(output_dir / name)}
    with pytest.raises(ValueError, match=rf"holds a run at ckpt-2 .*{named}"):
        pretraining.run_pretraining(_options(trained, **change), distribute.get_strategy())
    after = {name: os.path.getmtime(output_dir / name) for name in os.listdir(output_dir)
             if os.path.isfile(output_dir / name)}
    assert after == before  # nothing rewritten (bert_config.json was)


def test_a_longer_run_continues_and_says_how(trained, caplog):
    options = _options(trained, num_train_steps=3)
    caplog.set_level("WARNING")
    run_config.check_continuation(
        options.output_dir, dict(run_config.read(options.output_dir),
                                 options=dict(run_config.read(options.output_dir)["options"],
                                              num_train_steps=3)),
        str(trained / "out" / "ckpt-2"))
    assert "num_train_steps=3 (it was started with 2)" in caplog.text


def test_a_truncated_latest_checkpoint_is_one_line(tmp_path):
    harness.train_tiny(str(tmp_path), 2, 2)
    data = next(p for p in tmp_path.iterdir() if p.name.startswith("ckpt-2.data"))
    with open(data, "r+b") as file:
        file.truncate(data.stat().st_size // 2)
    with pytest.raises(ValueError, match=r"ckpt-2 is truncated .*remove its files"):
        run_config.check_checkpoint_complete(str(tmp_path / "ckpt-2"))
    index = tmp_path / "ckpt-2.index"
    index.write_bytes(index.read_bytes()[:20])
    with pytest.raises(ValueError, match=r"ckpt-2 is damaged"):
        run_config.check_checkpoint_complete(str(tmp_path / "ckpt-2"))


@pytest.fixture(scope="module")
def checkpoint_files(tmp_path_factory):
    """{name: bytes} of a tiny training run's ckpt-2 (weights, moments, iterator state)."""
    folder = tmp_path_factory.mktemp("ckpt")
    harness.train_tiny(str(folder), 2, 2)
    return {path.name: path.read_bytes() for path in folder.iterdir()
            if path.name.startswith("ckpt-2.")}


def _copy(files, folder):
    for name, content in files.items():
        (folder / name).write_bytes(content)
    return str(folder / "ckpt-2")


@FAST
@given(cut=st.integers(1, 10_000))
def test_a_checkpoint_cut_anywhere_is_named_truncated(tmp_path, checkpoint_files, cut):
    # Issue 49, class 7: the index against the data file's size (and the object graph,
    # written last), whatever the number of bytes lost.
    prefix = _copy(checkpoint_files, tmp_path)
    data = next(p for p in tmp_path.iterdir() if p.name.startswith("ckpt-2.data"))
    data.write_bytes(checkpoint_files[data.name][:max(0, len(checkpoint_files[data.name])
                                                         - cut)])
    with pytest.raises(ValueError, match=r"ckpt-2 is truncated .*remove its files"):
        run_config.check_checkpoint_complete(prefix)


def test_a_missing_data_file_is_named(tmp_path, checkpoint_files):
    prefix = _copy({name: content for name, content in checkpoint_files.items()
                    if ".data-" not in name}, tmp_path)
    with pytest.raises(ValueError, match=r"ckpt-2 is damaged \(ckpt-2.data-00000-of-00001 "
                                         "is missing\\)"):
        run_config.check_checkpoint_complete(prefix)


def test_the_check_reads_no_weight(tmp_path, checkpoint_files, monkeypatch):
    # Issue 49, class 7: resuming BERT-large read 1.3 GB; only strings are read now.
    prefix = _copy(checkpoint_files, tmp_path)
    read, load = [], tf.train.load_checkpoint

    class Counting:
        def __init__(self, reader):
            self.reader = reader

        def __getattr__(self, name):
            return getattr(self.reader, name)

        def get_tensor(self, name):
            read.append(self.reader.get_variable_to_dtype_map()[name])
            return self.reader.get_tensor(name)

    monkeypatch.setattr(tf.train, "load_checkpoint", lambda path: Counting(load(path)))
    run_config.check_checkpoint_complete(prefix)
    assert read and set(read) == {tf.string}


def test_expected_data_bytes_is_the_data_file_size_without_variants(tmp_path):
    # The formula, checked exactly where no variant tensor (iterator state) is saved.
    checkpoint = tf.train.Checkpoint(a=tf.Variable(np.ones([3, 5], np.float32)),
                                     b=tf.Variable(np.ones([7], np.int64)),
                                     c=tf.Variable(np.ones([2, 2], np.float16)))
    prefix = checkpoint.write(str(tmp_path / "plain"))
    size = sum(path.stat().st_size for path in tmp_path.glob("plain.data-*"))
    assert run_config.expected_data_bytes(tf.train.load_checkpoint(prefix)) == size


# ------------------------------------------------------------------ bert_config.json

_FLOAT_FIELDS = ("initializer_range", "hidden_dropout_prob", "attention_probs_dropout_prob")


@FAST
@given(field=st.sampled_from(_FLOAT_FIELDS),
       value=st.sampled_from([math.nan, math.inf, -math.inf, -0.5, 1.0, 1e300, True]))
def test_config_values_that_cannot_work_are_refused_naming_the_field(field, value):
    values = dict(harness.tiny_config_dict(), **{field: value})
    if field == "initializer_range" and value is not True and value in (1e300, 1.0):
        BertConfig.from_dict(values)  # finite and positive: a bad idea, not an error
        return
    with pytest.raises(ValueError, match=rf"`{field}` must be"):
        BertConfig.from_dict(json.loads(json.dumps(values)), source="bert_config.json")


@FAST
@given(keys=st.lists(st.sampled_from(
    ["directionality", "pooler_fc_size", "pooler_num_attention_heads",
     "pooler_num_fc_layers", "pooler_size_per_head", "pooler_type"]), unique=True))
def test_google_released_config_keys_load(keys):
    values = dict(harness.tiny_config_dict(), **{key: 1 for key in keys})
    assert BertConfig.from_dict(values) == BertConfig.from_dict(harness.tiny_config_dict())
    with pytest.raises(ValueError, match="unknown BERT config keys"):
        BertConfig.from_dict(dict(values, num_hiden_layers=2))


def test_head_dropout_of_one_is_refused():
    from bert_tf.runs.options import HeadDropout  # pylint: disable=import-outside-toplevel
    for value in (1.0, 1.5, math.nan, -0.1):
        with pytest.raises(ValueError, match="dropout_rate must be in"):
            dataclasses.replace(HeadDropout(), dropout_rate=value).check()


def test_records_of_a_larger_vocab_are_refused_before_any_step(trained, tmp_path):
    options = _options(trained, output_dir=str(tmp_path / "small"),
                       bert_config=harness.tiny_config(num_hidden_layers=1, vocab_size=20))
    with pytest.raises(ValueError, match=r"token id \d+ is outside the model's vocab_size 20"):
        pretraining.run_pretraining(options, distribute.get_strategy())
    assert not any(name.startswith("ckpt") for name in os.listdir(tmp_path / "small")) \
        if (tmp_path / "small").exists() else True
