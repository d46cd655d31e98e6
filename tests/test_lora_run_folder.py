"""A LoRA run folder (--lora_rank): its checkpoints hold the adapters and the head
alone, against full fine-tuning's; the base named in config.json by path and digest,
read again by evaluation, a --config rerun and the best checkpoint; a base that moved or
changed; what the digest covers."""

import dataclasses
import hashlib
import re
import shutil
import types

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.models import BertEncoder
from bert_tf.runs import driver, export_checkpoint
from bert_tf.tasks.classification import task as classification_task
from bert_tf.tasks.classification.options import ClassifierOptions
from bert_tf.weights import checkpoints, digest
from harness import tiny_config, tiny_model, write_released_checkpoint
from test_lora import H, I, LAYERS, _checkpoint_weights, _lora_settings, _released
from test_run_classifier import options, write_sst2
from test_run_config import _rerun_options


def test_a_config_rerun_evaluates_base_and_adapters(tmp_path):
    # bert-train --config=<run>/config.json --nodo_train --do_eval: the options the file
    # gives (base and LoRA settings among them) score the model the run trained.
    write_sst2(tmp_path / "data", train=16, dev=5)
    _released(tmp_path)
    trained = classification_task.run(options(tmp_path, do_train=True, do_eval=True,
                                              **_lora_settings(tmp_path)))
    rerun = dataclasses.replace(
        _rerun_options(types.SimpleNamespace(options_class=ClassifierOptions),
                       tmp_path / "out" / "config.json"), do_train=False, do_eval=True)
    assert rerun.lora_rank == 4 and rerun.init_checkpoint == str(tmp_path / "released")
    results = classification_task.run(rerun)
    assert results["eval_loss"] == pytest.approx(trained["eval_loss"], abs=1e-6)


def test_a_lora_run_folder_holds_adapters_and_head_alone(tmp_path):
    # The same tiny run, full fine-tuning and LoRA: what the checkpoint saves.
    write_sst2(tmp_path / "data", train=16, dev=5)
    _released(tmp_path)
    common = dict(init_checkpoint=str(tmp_path / "released"), allow_random_encoder=False,
                  num_train_epochs=1.0)
    full = driver.execute(classification_task.ClassificationTask(options(
        tmp_path, do_train=True, output_dir=str(tmp_path / "full"), **common)))
    small = driver.execute(classification_task.ClassificationTask(options(
        tmp_path, do_train=True, output_dir=str(tmp_path / "lora"),
        **_lora_settings(tmp_path, **common))))
    full_names = _checkpoint_weights(str(tmp_path / "full" / "ckpt-1"))
    lora_names = _checkpoint_weights(str(tmp_path / "lora" / "ckpt-1"))
    model = small.runner.model
    trained = sum(int(np.prod(v.shape)) for v in model.trainable_variables)
    assert len(lora_names) == len(model.trainable_variables) == 12 + 2
    assert sum(lora_names.values()) == trained == \
        LAYERS * 4 * ((H + H) + (H + H) + (I + H)) + H * 2 + 2
    assert sum(full_names.values()) == sum(
        int(np.prod(v.shape)) for v in full.runner.model.weights)
    assert all("lora_" in name or name.startswith("model/head/") for name in lora_names)
    moments = [shape for name, shape in tf.train.list_variables(
        str(tmp_path / "lora" / "ckpt-1")) if name.startswith("optimizer/_variables/")]
    assert sum(int(np.prod(shape)) for shape in moments) == 2 * trained  # Adam m and v

    def weight_bytes(folder):  # the tensors but the input position (the same in both)
        return sum(4 * int(np.prod(shape)) for name, shape in tf.train.list_variables(
            str(tmp_path / folder / "ckpt-1")) if not name.startswith(("iterator/", "_")))
    # Weights and both Adam moments: 18,508 weights (222 kB) against 1,642 (20 kB) here,
    # an eleventh; on BERT-base with rank 8 on query and value, 0.3M of 110M weights.
    assert weight_bytes("lora") * 10 < weight_bytes("full"), (
        weight_bytes("lora"), weight_bytes("full"))
    # Alone, it is no model to start from: named as what it is.
    with pytest.raises(ValueError, match="is a LoRA run's: it holds the adapters"):
        checkpoints.from_pretrained(BertEncoder, str(tmp_path / "lora"))


def test_the_best_checkpoint_of_a_lora_run_holds_adapters_and_head_too(tmp_path):
    # --best_metric keeps best/ckpt-N: also the trained parts alone, read onto the base.
    write_sst2(tmp_path / "data", train=16, dev=5)
    _released(tmp_path)
    settings = _lora_settings(tmp_path, num_train_epochs=3.0, eval_every_steps=1,
                              steps_per_loop=1, best_metric="loss")
    trained = classification_task.run(options(tmp_path, do_train=True, do_eval=True,
                                              **settings))
    best, = (tmp_path / "out" / "best").glob("ckpt-*.index")
    names = [n for n in _checkpoint_weights(str(best)[:-len(".index")])
             if n.startswith("model/")]
    assert len(names) == 14 and all("lora_" in n or "/head/" in n for n in names)
    again = classification_task.run(options(tmp_path, do_eval=True, **dict(
        settings, init_checkpoint=None)))
    assert again["global_step"] == trained["global_step"] == int(best.stem.split("-")[1])
    assert again["eval_loss"] == pytest.approx(trained["eval_loss"], abs=1e-6)


def test_a_changed_or_moved_base_is_refused_naming_both_digests(tmp_path):
    write_sst2(tmp_path / "data", train=16, dev=5)
    _released(tmp_path)
    settings = _lora_settings(tmp_path, num_train_epochs=1.0)
    classification_task.run(options(tmp_path, do_train=True, **settings))
    recorded = digest.weights_digest(tmp_path / "released")["sha256"]
    # Moved: found again where --init_checkpoint says.
    shutil.move(tmp_path / "released", tmp_path / "moved")
    with pytest.raises(ValueError, match="base checkpoint .*released.* is not there"):
        classification_task.run(options(tmp_path, do_eval=True, **dict(
            settings, init_checkpoint=None)))
    moved = classification_task.run(options(tmp_path, do_eval=True, **dict(
        settings, init_checkpoint=str(tmp_path / "moved"))))
    assert moved["global_step"] == 1
    # Changed: other weights at the base's path, refused by eval, resume and export.
    _released(tmp_path, seed=4)
    changed = digest.weights_digest(tmp_path / "released")["sha256"]
    message = (f"base checkpoint {re.escape(str(tmp_path / 'released'))} .* has digest "
               f"{changed}, the run was trained on digest {recorded}")
    for step in (dict(do_eval=True), dict(do_train=True, num_train_epochs=2.0)):
        with pytest.raises(ValueError, match=message):
            classification_task.run(options(tmp_path, **dict(settings, **step)))
    with pytest.raises(ValueError, match=message):
        export_checkpoint.load_model("classifier", ClassifierOptions(
            task_name="SST-2", init_checkpoint=str(tmp_path / "out"),
            output_dir=str(tmp_path / "x")), {"num_classes": 2})
    assert sorted(p.name for p in (tmp_path / "out").glob("ckpt-*.index")) == \
        ["ckpt-1.index"]


def test_the_digest_covers_every_weight_and_safetensors_whole(tmp_path):
    _released(tmp_path)
    first = digest.weights_digest(tmp_path / "released")
    assert first["weights"] == str(tmp_path / "released" / "bert_model.ckpt")
    assert digest.weights_digest(tmp_path / "released") == first
    # One weight changed by one ulp changes the index's CRC32C, so the digest.
    model = tiny_model(BertEncoder, tiny_config(max_position_embeddings=16), 3)
    kernel = model.weights[-1]
    kernel.assign(np.nextafter(kernel.numpy(), np.inf))
    write_released_checkpoint(tmp_path / "released", model)
    assert digest.weights_digest(tmp_path / "released")["sha256"] != first["sha256"]
    path = tmp_path / "hf" / "model.safetensors"
    path.parent.mkdir()
    path.write_bytes(b"0123456789")
    assert digest.weights_digest(path.parent)["sha256"] == hashlib.sha256(
        b"0123456789").hexdigest()
