"""Continued pre-training (issue 27): from a released model (heads restored when present,
fresh and said so when not; an extended-vocab folder unchanged), and two phases
(phase 2 from phase 1's output_dir with its optimizer moments, its own schedule)."""

import logging
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.models import BertEncoder, BertPretrainer
from bert_tf.tasks.pretraining import task as pretraining
from bert_tf.tasks.pretraining.options import PretrainingOptions
from bert_tf.train import distribute, optimization, warm_start
from bert_tf.weights import checkpoints
from harness import (RUNNER_OVERRIDES, SPECIAL_TOKENS, tiny_config, tiny_model,
                     write_records, write_released_checkpoint, write_unmasked_records)

HEAD_NAMES = ("cls/predictions/transform/dense/kernel", "cls/predictions/output_bias",
              "cls/predictions/transform/LayerNorm/gamma",
              "cls/seq_relationship/output_weights", "cls/seq_relationship/output_bias")


def _config(**overrides):
    return tiny_config(**{"num_hidden_layers": 1, **RUNNER_OVERRIDES, **overrides})


def _options(tmp_path, output="out", **overrides):
    values = dict(do_train=True, bert_config=_config(),
                  input_file=str(tmp_path / "records" / "*"),
                  output_dir=str(tmp_path / output), max_seq_length=16,
                  max_predictions_per_seq=3, train_batch_size=32, learning_rate=1e-2,
                  num_train_steps=1, num_warmup_steps=1, save_checkpoints_steps=50,
                  steps_per_loop=25, seed=1)
    values.update(overrides)
    return PretrainingOptions(**values)


def _run(options):
    return pretraining.run_pretraining(options, distribute.get_strategy())


def _tensors(prefix, names):
    reader = tf.train.load_checkpoint(str(prefix))
    return {name: reader.get_tensor(name) for name in names}


def _assert_tensors_equal(got, expected):
    assert sorted(got) == sorted(expected)
    for name, value in expected.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)


def _continue_from_released(tmp_path, caplog, model_cls):
    """A tiny released folder of `model_cls`, then one step at learning rate 0 (warm-up
    starts at 0) from it: the final weights are the initial ones. Returns the names the
    released checkpoint holds, after checking that they were continued from."""
    write_records(tmp_path / "records", 1, 40)
    write_released_checkpoint(str(tmp_path / "released"),
                              tiny_model(model_cls, _config(), seed=7))
    caplog.set_level(logging.INFO, logger="absl")
    _run(_options(tmp_path, init_checkpoint=str(tmp_path / "released")))
    released = str(tmp_path / "released" / "bert_model.ckpt")
    names = list(tf.train.load_checkpoint(released).get_variable_to_shape_map())
    _assert_tensors_equal(_tensors(tmp_path / "out" / "bert_model.ckpt", names),
                          _tensors(released, names))
    return names


def test_released_model_with_heads_continues_from_them_and_says_so(tmp_path, caplog):
    names = _continue_from_released(tmp_path, caplog, BertPretrainer)
    assert set(HEAD_NAMES) <= set(names)
    assert f"loaded {len(names)} of the model's {len(names)} variables" in caplog.text
    assert "masked-LM head cls/predictions/*: loaded" in caplog.text
    assert "next-sentence head cls/seq_relationship/*: loaded" in caplog.text


def test_released_model_without_heads_starts_them_fresh_and_lists_them(tmp_path, caplog):
    """As the shared uncased_L-6_H-384_A-12, whose checkpoint has no cls/* at all."""
    names = _continue_from_released(tmp_path, caplog, BertEncoder)
    assert all(name.startswith("bert/") for name in names)  # the encoder is continued
    assert f"loaded {len(names)} of the model's {len(names) + 7} variables" in caplog.text
    assert ("masked-LM head cls/predictions/*: initialised fresh, not in the checkpoint "
            "(cls/predictions/transform/dense/kernel, ") in caplog.text
    assert ("next-sentence head cls/seq_relationship/*: initialised fresh, not in the "
            "checkpoint (cls/seq_relationship/output_weights, "
            "cls/seq_relationship/output_bias)") in caplog.text


def test_an_extended_vocab_folder_continues_unchanged(tmp_path, caplog):
    """What bert-extend-vocab --mode=append writes: a released folder whose vocab_size,
    word embeddings and masked-LM output bias grew (99 -> 110 ids); no other flag."""
    (tmp_path / "records").mkdir()
    write_unmasked_records(tmp_path / "records" / "plain.tfrecord", 64)
    config = _config(vocab_size=110)
    vocab = SPECIAL_TOKENS + [f"w{i}" for i in range(94)] + [f"new{i}" for i in range(11)]
    write_released_checkpoint(str(tmp_path / "extended"),
                              tiny_model(BertPretrainer, config, seed=3), vocab=vocab)
    caplog.set_level(logging.INFO, logger="absl")
    # bert_config.json and vocab.txt (for the dynamic masks) come from the folder.
    result = _run(_options(tmp_path, bert_config=None, dynamic_masking=True,
                           init_checkpoint=str(tmp_path / "extended")))
    assert result["train"].model.encoder.config.vocab_size == 110
    names = ["bert/embeddings/word_embeddings", *HEAD_NAMES]
    _assert_tensors_equal(_tensors(tmp_path / "out" / "bert_model.ckpt", names),
                          _tensors(tmp_path / "extended" / "bert_model.ckpt", names))
    assert "masked-LM head cls/predictions/*: loaded" in caplog.text


def _phase_options(tmp_path, phase, output=None, **overrides):
    """Phase 1: seq 16; phase 2: seq 32, from phase 1's output_dir. The config has 32
    positions in both (phase 1 trains the first 16)."""
    values = dict(bert_config=_config(max_position_embeddings=32),
                  input_file=str(tmp_path / f"records{phase}" / "*"), learning_rate=1e-2,
                  train_batch_size=32, steps_per_loop=10, save_checkpoints_steps=100)
    if phase == 1:
        values.update(max_seq_length=16, num_train_steps=100, num_warmup_steps=10)
    else:
        values.update(max_seq_length=32, max_predictions_per_seq=5, num_train_steps=40,
                      num_warmup_steps=20, init_checkpoint=str(tmp_path / "phase1"),
                      restore_optimizer_state=True)
    values.update(overrides)
    return _options(tmp_path, output=output or f"phase{phase}", **values)


def _capture_warm_start(monkeypatch):
    """What the model and optimizer hold right after `start_from`, before any step."""
    seen = {}
    original = warm_start.start_from

    def start_from(model, optimizer, *args, **kwargs):
        report = original(model, optimizer, *args, **kwargs)
        inner = optimization.inner_optimizer(optimizer)
        seen.update(
            weights={name: (variable.numpy().T if transposed else variable.numpy())
                     for name, (variable, transposed)
                     in checkpoints.google_variable_map(model).items()},
            moments=[v.numpy() for v in inner.variables if v is not inner.iterations],
            iterations=int(inner.iterations.numpy()))
        return report
    monkeypatch.setattr(warm_start, "start_from", start_from)
    return seen


def test_two_phases_continue_weights_and_moments_with_their_own_schedule(tmp_path,
                                                                         monkeypatch):
    write_records(tmp_path / "records1", 1, 256, seq_length=16, max_predictions=3)
    write_records(tmp_path / "records2", 1, 256, seq_length=32, max_predictions=5, seed=1)
    phase1 = _run(_phase_options(tmp_path, 1))["train"]
    seen = _capture_warm_start(monkeypatch)
    phase2 = _run(_phase_options(tmp_path, 2))["train"]
    # Weights: the whole pretrainer (heads too) as phase 1 ended.
    final = _tensors(tmp_path / "phase1" / "bert_model.ckpt", list(seen["weights"]))
    _assert_tensors_equal(seen["weights"], final)
    # Moments: phase 1's saved slots, read straight from its last checkpoint (Keras
    # keeps them as optimizer/_variables/1.. after the step counter, m and v a variable).
    reader = tf.train.load_checkpoint(str(tmp_path / "phase1" / "ckpt-100"))
    saved = [reader.get_tensor(f"optimizer/_variables/{i}/.ATTRIBUTES/VARIABLE_VALUE")
             for i in range(1, len(seen["moments"]) + 1)]
    assert len(saved) == 2 * len(phase1.model.trainable_variables)
    for got, expected in zip(seen["moments"], saved):
        np.testing.assert_array_equal(got, expected)
    assert any(np.abs(moment).max() > 0 for moment in saved)
    # Its own schedule: step counter from 0, its own warm-up (20 steps to 1e-2).
    assert seen["iterations"] == 0
    assert phase2.global_step == 40 and phase2.steps_this_run == 40
    assert [h["learning_rate"] for h in phase2.history[:2]] == pytest.approx([5e-3, 1e-2])
    assert phase1.history[0]["learning_rate"] == pytest.approx(1e-2)  # warm-up 10 steps
    # The loss goes on down: below phase 2 from scratch at every loop, and falling.
    # (It rises at the switch: positions 16-31 were never trained in phase 1, as
    # 128-511 in the paper's recipe.)
    scratch = _run(_phase_options(tmp_path, 2, output="scratch", init_checkpoint=None,
                                  restore_optimizer_state=False))["train"]
    assert phase1.history[-1]["masked_lm_loss"] < phase1.history[0]["masked_lm_loss"] - 1.0
    continued = [h["masked_lm_loss"] for h in phase2.history]
    fresh = [h["masked_lm_loss"] for h in scratch.history]
    assert continued[0] < fresh[0]
    assert all(ours < theirs - 0.2 for ours, theirs in zip(continued[1:], fresh[1:]))
    assert continued == sorted(continued, reverse=True)
    assert continued[-1] < continued[0] - 0.5
    assert os.path.exists(tmp_path / "phase2" / "bert_model.ckpt.index")


def test_phase_two_inputs_that_cannot_work_are_refused_before_training(tmp_path):
    write_records(tmp_path / "records1", 1, 64, seq_length=16, max_predictions=3)
    write_records(tmp_path / "records2", 1, 64, seq_length=32, max_predictions=5)
    write_released_checkpoint(str(tmp_path / "released"),
                              tiny_model(BertPretrainer, _config(), seed=7))
    # Phase 1 with 16 positions and without the next-sentence head.
    short = _config(max_position_embeddings=16)
    _run(_phase_options(tmp_path, 1, bert_config=short, num_train_steps=2,
                        num_warmup_steps=1, next_sentence=False))
    released = str(tmp_path / "released")
    cases = [
        (dict(init_checkpoint=released, max_seq_length=16, max_predictions_per_seq=3,
              input_file=str(tmp_path / "records1" / "*"), bert_config=_config()),
         f"--restore_optimizer_state: --init_checkpoint={released} holds no optimizer "
         "state"),
        (dict(init_checkpoint=None), "--restore_optimizer_state needs --init_checkpoint"),
        (dict(output_dir=str(tmp_path / "phase1"), bert_config=short, max_seq_length=16,
              max_predictions_per_seq=3, input_file=str(tmp_path / "records1" / "*")),
         "the new phase needs an output_dir"),
        # The config of phase 1 has too few positions for phase 2's sequences.
        (dict(bert_config=short), "max_seq_length 32 exceeds max_position_embeddings 16"),
        (dict(), "max_position_embeddings: 16 there, 32 in --bert_config_file"),
        # Phase 1 had no next-sentence head (and a frozen pooler): other moments.
        (dict(max_seq_length=16, max_predictions_per_seq=3, bert_config=short,
              input_file=str(tmp_path / "records1" / "*")),
         "the optimizer state of .*phase1/ckpt-2 is of other variables: 52 moment "
         "variables there, 60 here"),
    ]
    for overrides, match in cases:
        with pytest.raises(ValueError, match=match):
            _run(_phase_options(tmp_path, 2, **overrides))
        assert tf.train.latest_checkpoint(str(tmp_path / "phase2")) is None
