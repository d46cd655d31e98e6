"""Tests for run_pretraining: learning, eval_results.txt, init checkpoint, bad input."""

import collections
import logging
import os
import subprocess
import sys
import types

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.tasks.pretraining import task as pretraining
from bert_tf.tasks.pretraining.options import PretrainingOptions
from bert_tf.weights import checkpoints
from bert_tf.train import distribute
from bert_tf.train import records
from bert_tf.configs import BertConfig
from bert_tf.models import BertPretrainer
from harness import (RUNNER_OVERRIDES, SPECIAL_TOKENS, kill_once_checkpointed, tiny_config,
                     tiny_model, write_bad_record_file, write_records,
                     write_released_checkpoint, write_unmasked_records, write_vocab)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _config(**overrides):
    return tiny_config(**{"num_hidden_layers": 1, **RUNNER_OVERRIDES, **overrides})


def _options(tmp_path, **overrides):
    values = dict(do_train=True, bert_config=_config(),
                  input_file=str(tmp_path / "records" / "*"),
                  output_dir=str(tmp_path / "out"), max_seq_length=16,
                  max_predictions_per_seq=3, train_batch_size=32, eval_batch_size=32,
                  learning_rate=1e-2, num_train_steps=100, num_warmup_steps=10,
                  save_checkpoints_steps=50, steps_per_loop=25, seed=1)
    values.update(overrides)
    return PretrainingOptions(**values)


def test_tiny_bert_learns_and_eval_results_are_written(tmp_path):
    _, targets = write_records(tmp_path / "records", 2, 128)
    baseline = collections.Counter(targets).most_common(1)[0][1] / len(targets)
    options = _options(tmp_path, do_eval=True)
    result = pretraining.run_pretraining(options, distribute.get_strategy())
    history = result["train"].history
    assert history[-1]["masked_lm_loss"] < history[0]["masked_lm_loss"] - 1.0
    evaluation = result["eval"]
    # The most frequent masked token is ~2% of the targets; the model gets > 10%.
    assert evaluation["masked_lm_accuracy"] > max(3 * baseline, baseline + 0.1)
    assert evaluation["global_step"] == 100
    lines = (tmp_path / "out" / "eval_results.txt").read_text().splitlines()
    keys = [line.split(" = ")[0] for line in lines]
    assert keys == ["global_step", "loss", "masked_lm_accuracy", "masked_lm_loss",
                    "next_sentence_accuracy", "next_sentence_loss"]
    assert lines[0] == "global_step = 100"
    assert float(lines[2].split(" = ")[1]) == pytest.approx(evaluation["masked_lm_accuracy"])
    # The final model in the google-research layout, with its config.
    out = tmp_path / "out"
    assert BertConfig.from_json_file(str(out / "bert_config.json")) == options.bert_config
    reader = tf.train.load_checkpoint(str(out / "bert_model.ckpt"))
    names = reader.get_variable_to_shape_map()
    assert "bert/encoder/layer_0/attention/self/query/kernel" in names
    np.testing.assert_array_equal(
        reader.get_tensor("cls/predictions/output_bias"),
        _google_tensor(result["train"].model, "cls/predictions/output_bias"))
    # Eval only, from the training checkpoint, gives the same numbers.
    again = pretraining.run_pretraining(
        _options(tmp_path, do_train=False, do_eval=True), distribute.get_strategy())["eval"]
    assert again == pytest.approx(evaluation)


def _google_tensor(model, name):
    variable, transposed = checkpoints.google_variable_map(model)[name]
    value = variable.numpy()
    return value.T if transposed else value


def _write_google_checkpoint(folder, config, seed):
    return write_released_checkpoint(folder, tiny_model(BertPretrainer, config, seed))


def test_eval_from_google_checkpoint_uses_its_weights(tmp_path):
    write_records(tmp_path / "records", 1, 40)
    source = _write_google_checkpoint(str(tmp_path / "released"), _config(), seed=7)
    options = _options(tmp_path, do_train=False, do_eval=True,
                       init_checkpoint=str(tmp_path / "released"))
    got = pretraining.run_pretraining(options, distribute.get_strategy())["eval"]
    # The same metrics computed directly from the model that wrote the checkpoint.
    dataset = records.pretraining_dataset(options.input_file, 16, 3, 40, is_training=False)
    features = next(iter(dataset))
    outputs = source(features, training=False)
    predictions = np.argmax(outputs["masked_lm_logits"].numpy(), -1)
    weights = features["masked_lm_weights"].numpy()
    correct = (predictions == features["masked_lm_ids"].numpy()) * weights
    assert got["masked_lm_accuracy"] == pytest.approx(correct.sum() / weights.sum())
    assert got["global_step"] == 0


@pytest.mark.slow
def test_init_from_google_checkpoint(tmp_path):
    write_records(tmp_path / "records", 1, 16)
    source = _write_google_checkpoint(str(tmp_path / "released"), _config(), seed=7)
    # One step whose learning rate is 0 (warm-up starts at 0): the exported weights are
    # exactly the initial checkpoint's.
    options = _options(tmp_path, init_checkpoint=str(tmp_path / "released"),
                       num_train_steps=1, num_warmup_steps=1, steps_per_loop=1)
    result = pretraining.run_pretraining(options, distribute.get_strategy())["train"]
    assert result.global_step == 1
    reader = tf.train.load_checkpoint(str(tmp_path / "out" / "bert_model.ckpt"))
    for name in ("bert/embeddings/word_embeddings", "bert/encoder/layer_0/output/dense/kernel",
                 "cls/seq_relationship/output_weights", "bert/pooler/dense/bias"):
        np.testing.assert_array_equal(reader.get_tensor(name), _google_tensor(source, name))


def test_bad_input_is_rejected_before_training(tmp_path):
    write_records(tmp_path / "records", 1, 4)
    strategy = distribute.get_strategy()
    cases = [
        (dict(num_train_steps=10, num_warmup_steps=20), "num_warmup_steps \\(20\\)"),
        (dict(gradient_accumulation_steps=5), "gradient_accumulation_steps=5"),
        (dict(do_train=False), "--do_train or --do_eval"),
        (dict(max_seq_length=32), "max_seq_length 32 exceeds max_position_embeddings 16"),
        (dict(input_file=str(tmp_path / "nothing*")), "matches no file"),
        (dict(input_file=str(tmp_path / "empty.tfrecord")), "empty \\(no records\\)"),
        (dict(output_dir=str(tmp_path / "empty.tfrecord" / "out")),
         "lies under .*empty.tfrecord', which is a file: expected a folder"),
    ]
    (tmp_path / "empty.tfrecord").write_bytes(b"")
    for overrides, match in cases:
        with pytest.raises(ValueError, match=match):
            pretraining.run_pretraining(_options(tmp_path, **overrides), strategy)
    three_replicas = types.SimpleNamespace(
        strategy=types.SimpleNamespace(num_replicas_in_sync=3), config=_config(), vocab=None)
    with pytest.raises(ValueError, match="train_batch_size=32 is not divisible by the 3"):
        pretraining.check_options(_options(tmp_path), three_replicas)
    with pytest.raises(ValueError, match="records-00000.tfrecord: record 0, feature "
                                         "'masked_lm_positions' has 3 values, expected 5"):
        pretraining.run_pretraining(_options(tmp_path, max_predictions_per_seq=5),
                                    strategy)
    assert not os.path.exists(tmp_path / "out" / "checkpoint")


def test_packed_dynamic_masked_run_without_next_sentence_learns_and_restores(tmp_path):
    """--pack_sequences --dynamic_masking --next_sentence=false end to end."""
    (tmp_path / "records").mkdir()
    write_unmasked_records(tmp_path / "records" / "plain.tfrecord", 256, min_length=5,
                           next_sentence=False)
    vocab = write_vocab(tmp_path / "vocab.txt", SPECIAL_TOKENS, size=99)
    options = _options(tmp_path, do_eval=True, pack_sequences=True, max_sequences_per_row=3,
                       packing_window=64, dynamic_masking=True, vocab_file=vocab,
                       next_sentence=False, train_batch_size=16, eval_batch_size=16,
                       num_train_steps=100, save_checkpoints_steps=100)
    result = pretraining.run_pretraining(options, distribute.get_strategy())
    history = result["train"].history
    assert "next_sentence_loss" not in history[-1]
    assert history[-1]["masked_lm_loss"] < history[0]["masked_lm_loss"] - 0.5
    model = result["train"].model
    assert model.next_sentence is None
    # The unused pooler is frozen at its initial weights (not decayed towards 0).
    task = pretraining.PretrainingTask(options)
    task.context = types.SimpleNamespace(config=options.bert_config)
    initial = task.create_model()  # seeded as the run's
    initial.build()
    assert not any("pooler" in v.path for v in model.trainable_variables)
    np.testing.assert_array_equal(model.encoder.pooler.dense.kernel.numpy(),
                                  initial.encoder.pooler.dense.kernel.numpy())
    assert result["eval"]["masked_lm_accuracy"] > 0.03  # chance: about 1/94
    assert "next_sentence_accuracy" not in result["eval"]
    names = tf.train.load_checkpoint(str(tmp_path / "out" / "bert_model.ckpt")
                                     ).get_variable_to_shape_map()
    assert "cls/predictions/output_bias" in names
    assert not any(name.startswith("cls/seq_relationship") for name in names)
    again = pretraining.run_pretraining(
        _options(tmp_path, do_train=False, do_eval=True, pack_sequences=True,
                 packing_window=64, dynamic_masking=True, vocab_file=vocab,
                 next_sentence=False, eval_batch_size=16), distribute.get_strategy())
    assert again["eval"] == pytest.approx(result["eval"])


def test_packing_and_masking_flags_refuse_what_cannot_work(tmp_path):
    write_records(tmp_path / "records", 1, 4)
    (tmp_path / "plain").mkdir()
    write_unmasked_records(tmp_path / "plain" / "p.tfrecord", 4)
    vocab = write_vocab(tmp_path / "vocab.txt", SPECIAL_TOKENS, size=99)
    strategy = distribute.get_strategy()
    plain = str(tmp_path / "plain" / "*")
    cases = [
        (dict(pack_sequences=True, max_sequences_per_row=0),
         "--max_sequences_per_row=0: a packed row must hold at least one sequence"),
        (dict(dynamic_masking=True, vocab_file=vocab),
         "--dynamic_masking: the records .* already carry masks"),
        (dict(input_file=plain), "the records carry no masks .* add --dynamic_masking"),
        (dict(input_file=plain, dynamic_masking=True), "--dynamic_masking needs --vocab_file"),
        (dict(whole_word_masking=True), "--whole_word_masking applies to masks drawn"),
        (dict(input_file=plain, dynamic_masking=True, vocab_file=vocab, max_ngram_size=3),
         "max_ngram_size=3 masks spans of whole words: set whole_word_masking"),
    ]
    for overrides, match in cases:
        with pytest.raises(ValueError, match=match):
            pretraining.run_pretraining(_options(tmp_path, **overrides), strategy)
    assert not os.path.exists(tmp_path / "out" / "checkpoint")


def test_init_checkpoint_not_matching_config_is_rejected(tmp_path):
    write_records(tmp_path / "records", 1, 4)
    _write_google_checkpoint(str(tmp_path / "wide"), _config(hidden_size=48), seed=1)
    with pytest.raises(ValueError, match="hidden_size: 48 there, 32 in --bert_config_file"):
        pretraining.run_pretraining(
            _options(tmp_path, init_checkpoint=str(tmp_path / "wide")),
            distribute.get_strategy())
    # Without a bert_config.json beside it, the weights themselves are checked.
    _write_google_checkpoint(str(tmp_path / "deep"), _config(num_hidden_layers=3), seed=1)
    os.remove(tmp_path / "deep" / "bert_config.json")
    with pytest.raises(ValueError, match=r"32 of its tensors fit no variable of the model "
                                         r"and would be dropped \(bert/encoder/layer_1"):
        pretraining.run_pretraining(
            _options(tmp_path, init_checkpoint=str(tmp_path / "deep" / "bert_model.ckpt")),
            distribute.get_strategy())
    assert not os.path.exists(tmp_path / "out" / "checkpoint")


@pytest.mark.slow
def test_cli_killed_and_restarted_finishes_with_all_checkpoints(tmp_path):
    write_records(tmp_path / "records", 2, 64)
    config_path = tmp_path / "bert_config.json"
    _config().to_json_file(str(config_path))
    out = tmp_path / "out"
    command = [sys.executable, os.path.join(REPO, "run_pretraining.py"),
               f"--bert_config_file={config_path}",
               f"--input_file={tmp_path / 'records' / '*'}", f"--output_dir={out}",
               "--do_train", "--do_eval", "--max_seq_length=16",
               "--max_predictions_per_seq=3", "--train_batch_size=16",
               "--num_train_steps=400", "--num_warmup_steps=10",
               "--save_checkpoints_steps=20", "--iterations_per_loop=10",
               "--keep_checkpoint_max=3", "--learning_rate=1e-3"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    kill_once_checkpointed(command, out, 40, 300, env)
    assert not (out / "eval_results.txt").exists()
    completed = subprocess.run(command, env=env, capture_output=True, text=True,
                               timeout=600, check=False)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert tf.train.latest_checkpoint(str(out)).endswith("ckpt-400")
    kept = tf.train.get_checkpoint_state(str(out)).all_model_checkpoint_paths
    assert [p.rsplit("-", 1)[1] for p in kept] == ["360", "380", "400"]
    assert "global_step = 400" in (out / "eval_results.txt").read_text()
    assert (out / "bert_model.ckpt.index").exists()


@pytest.mark.slow
def test_bad_record_in_the_middle_of_a_file_is_named(tmp_path):
    write_records(tmp_path / "records", 1, 40)
    write_bad_record_file(tmp_path / "records" / "zz-bad.tfrecord", bad_index=2)
    options = _options(tmp_path, num_train_steps=20, train_batch_size=8,
                       steps_per_loop=20)
    with pytest.raises(ValueError, match="zz-bad.tfrecord: record 2, feature 'input_ids'"):
        pretraining.run_pretraining(options, distribute.get_strategy())


@pytest.mark.slow
def test_real_checkpoint_continues_pretraining_on_records_from_our_tool(tmp_path,
                                                                        shared_data_dir,
                                                                        caplog):
    """Wikipedia XML -> create_pretraining_data -> run_pretraining from a released BERT."""
    caplog.set_level(logging.INFO, logger="absl")
    released = shared_data_dir / "checkpoints" / "uncased_L-6_H-384_A-12"
    records = tmp_path / "wiki.tfrecord"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    made = subprocess.run(
        [sys.executable, "-m", "data_prep.create_pretraining_data",
         f"--input_file={shared_data_dir / 'wiki' / 'enwiki-sample-pages-articles.xml.bz2'}",
         f"--output_file={records}", f"--vocab_file={released / 'vocab.txt'}",
         "--do_lower_case", "--max_seq_length=64", "--max_predictions_per_seq=10",
         "--dupe_factor=1", "--gzip"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert made.returncode == 0, made.stderr[-3000:]
    record_files = [str(p) for p in tmp_path.glob("wiki.tfrecord*")
                    if not p.name.endswith(".json")]  # the tool's stats file
    assert record_files
    options = PretrainingOptions(
        do_train=True, bert_config=BertConfig.from_json_file(str(released / "bert_config.json")),
        input_file=",".join(record_files), output_dir=str(tmp_path / "out"),
        init_checkpoint=str(released), do_eval=True, max_seq_length=64,
        max_predictions_per_seq=10, train_batch_size=16, eval_batch_size=16,
        learning_rate=2e-3, num_train_steps=40, num_warmup_steps=5,
        save_checkpoints_steps=40, steps_per_loop=10, max_eval_steps=5, seed=0)
    result = pretraining.run_pretraining(options, distribute.get_strategy())
    history = result["train"].history
    # The released checkpoint has no cls/* heads: the report says so at the start; the
    # MLM head starts from scratch and learns quickly on top of the pretrained encoder.
    assert "loaded 103 of the model's 110 variables" in caplog.text
    assert ("masked-LM head cls/predictions/*: initialised fresh, not in the checkpoint "
            "(cls/predictions/transform/dense/kernel, ") in caplog.text
    assert ("next-sentence head cls/seq_relationship/*: initialised fresh, not in the "
            "checkpoint") in caplog.text
    assert history[-1]["masked_lm_loss"] < history[0]["masked_lm_loss"] - 1.0
    assert result["eval"]["masked_lm_loss"] < history[0]["masked_lm_loss"] - 1.0


def write_tiny_inputs(tmp_path):
    """The records of `tiny_options` (shared with test_commands)."""
    write_records(tmp_path / "records", 1, 40)


def tiny_options(tmp_path, **changes):
    """A short training run of this task (shared with test_commands)."""
    config_file = tmp_path / "bert_config.json"
    _config().to_json_file(str(config_file))
    return _options(tmp_path, **{"bert_config": None, "bert_config_file": str(config_file),
                                 "do_train": True, "num_train_steps": 4,
                                 "num_warmup_steps": 1, "save_checkpoints_steps": 4,
                                 "steps_per_loop": 2, "train_batch_size": 8, **changes})


def test_a_text_file_named_tfrecord_is_named_before_training(tmp_path):
    (tmp_path / "records").mkdir()
    (tmp_path / "records" / "x.tfrecord").write_text("hello world, this is text\n" * 4)
    with pytest.raises(ValueError, match=r"x.tfrecord: not a readable TFRecord file "
                                         r"\(compression 'none'\): corrupted record at 0"):
        pretraining.run_pretraining(_options(tmp_path))
    assert tf.train.latest_checkpoint(str(tmp_path / "out")) is None
