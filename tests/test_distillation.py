"""Task distillation: the losses against numpy formulas, the student's start, a tiny
distillation of a tiny fine-tuned classifier that exports, and the refusals."""

import dataclasses
import json
import logging
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import test_run_classifier
import test_run_ner
import test_run_squad
from bert_tf.models import BertClassifier
from bert_tf.runs import driver, export_checkpoint, registry, run_config
from bert_tf.tasks.distillation import data as distill_data
from bert_tf.tasks.distillation import losses, objective, student, teacher
from bert_tf.tasks.distillation.options import DistillationOptions
from bert_tf.tasks.distillation.task import DistillationTask
from bert_tf.tasks.ner import task as ner_task
from bert_tf.tasks.squad import task as squad_task
from harness import tiny_config, tiny_model

RNG = np.random.default_rng(7)


# ------------------------------------------------------------------ numpy golden values
def np_log_softmax(x):
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def np_kl_rows(student_logits, teacher_logits):
    """sum_c p (log p - log q) per row, p the teacher's softmax."""
    log_p, log_q = np_log_softmax(teacher_logits), np_log_softmax(student_logits)
    return (np.exp(log_p) * (log_p - log_q)).sum(-1)


def test_soft_target_loss_is_batchmean_kl_times_t_squared():
    student_logits, teacher_logits = RNG.normal(size=(5, 3)), RNG.normal(size=(5, 3)) * 3
    for temperature in (1.0, 2.0, 4.5):
        expected = np_kl_rows(student_logits / temperature,
                              teacher_logits / temperature).mean() * temperature ** 2
        got = losses.soft_target_loss(student_logits, teacher_logits, temperature)
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5)
    # Per token with weights: the mean over the weighted rows only.
    s, t = RNG.normal(size=(2, 4, 3)), RNG.normal(size=(2, 4, 3))
    mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0]], np.float32)
    rows = np_kl_rows(s / 2, t / 2) * 4
    np.testing.assert_allclose(losses.soft_target_loss(s, t, 2.0, mask).numpy(),
                               (rows * mask).sum() / mask.sum(), rtol=1e-5)
    assert abs(float(losses.soft_target_loss(s, s, 3.0))) < 1e-6  # same logits: 0


def test_sigmoid_soft_targets_are_bernoulli_kl_per_label():
    s, t = RNG.normal(size=(4, 5)), RNG.normal(size=(4, 5)) * 2
    temperature = 2.0
    p, q = 1 / (1 + np.exp(-t / temperature)), 1 / (1 + np.exp(-s / temperature))
    kl = p * np.log(p / q) + (1 - p) * np.log((1 - p) / (1 - q))
    np.testing.assert_allclose(losses.sigmoid_soft_target_loss(s, t, temperature).numpy(),
                               kl.mean() * temperature ** 2, rtol=1e-5)


def test_hidden_losses_match_mse_and_cosine_formulas():
    s, t = RNG.normal(size=(2, 3, 8)), RNG.normal(size=(2, 3, 8))
    np.testing.assert_allclose(losses.hidden_mse(s, t).numpy(), ((s - t) ** 2).mean(),
                               rtol=1e-5)
    mask = np.array([[1, 1, 0], [1, 0, 0]], np.float32)
    per_token = ((s - t) ** 2).mean(-1)
    np.testing.assert_allclose(losses.hidden_mse(s, t, mask).numpy(),
                               (per_token * mask).sum() / mask.sum(), rtol=1e-5)
    cos = (s * t).sum(-1) / np.linalg.norm(s, axis=-1) / np.linalg.norm(t, axis=-1)
    np.testing.assert_allclose(losses.hidden_cosine(s, t).numpy(), (1 - cos).mean(),
                               rtol=1e-5)
    np.testing.assert_allclose(losses.hidden_cosine(s, t, mask).numpy(),
                               ((1 - cos) * mask).sum() / mask.sum(), rtol=1e-5)


def test_attention_losses_match_tinybert_and_minilm_formulas():
    s, t = RNG.normal(size=(2, 2, 4, 4)), RNG.normal(size=(2, 2, 4, 4))
    s[..., -1] = t[..., -1] = -10000.0  # a masked key: 0 on both sides
    zeroed = lambda x: np.where(x <= -100, 0.0, x)  # noqa: E731
    np.testing.assert_allclose(losses.attention_score_mse(s, t).numpy(),
                               ((zeroed(s) - zeroed(t)) ** 2).mean(), rtol=1e-5)
    mask = np.array([[1, 1, 1, 0], [1, 1, 1, 1]], np.float32)
    rows = np_kl_rows(s, t)  # [B, A, S]
    weights = np.broadcast_to(mask[:, None, :], rows.shape)
    np.testing.assert_allclose(losses.relation_kl(s, t, mask).numpy(),
                               (rows * weights).sum() / weights.sum(), rtol=1e-5)
    values = RNG.normal(size=(2, 2, 4, 3))
    relation = values @ values.transpose(0, 1, 3, 2) / math.sqrt(3)
    np.testing.assert_allclose(losses.value_relation_logits(values).numpy(), relation,
                               rtol=1e-5)


def test_each_model_types_soft_targets_follow_its_declared_outputs():
    """The head's soft targets come from its model type's record: a span head's start
    and end are a softmax over the real positions, a token classifier's a softmax over
    tags at each real token, a classifier's over its classes."""
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.float32)
    features = {"input_mask": mask}
    s, t = RNG.normal(size=(2, 5)), RNG.normal(size=(2, 5)) * 2
    span = objective.Head.of_model_type("squad")
    assert (span.outputs, span.over_positions, span.per_token) == (
        ("start_logits", "end_logits"), ("start_logits", "end_logits"), ())
    # Padded positions are left out: the softmax runs over the real ones only.
    expected = np.mean([np_kl_rows(s[i, :n] / 2, t[i, :n] / 2) * 4
                        for i, n in enumerate((3, 5))])
    got = objective.soft_loss(span, features, {"start_logits": s, "end_logits": s},
                              {"start_logits": t, "end_logits": t}, 2.0)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5)
    tokens = objective.Head.of_model_type("ner")
    assert (tokens.outputs, tokens.over_positions, tokens.per_token) == (
        ("logits",), (), ("logits",))
    s, t = RNG.normal(size=(2, 5, 4)), RNG.normal(size=(2, 5, 4))
    rows = np_kl_rows(s, t)  # [B, S]
    np.testing.assert_allclose(
        objective.soft_loss(tokens, features, {"logits": s}, {"logits": t}, 1.0).numpy(),
        (rows * mask).sum() / mask.sum(), rtol=1e-5)
    # With the task's label weights (first pieces of words), only those positions count.
    first_pieces = np.array([[0, 1, 0, 0, 0], [0, 1, 1, 0, 1]], np.int32)
    np.testing.assert_allclose(
        objective.soft_loss(tokens, dict(features, label_weights=first_pieces),
                            {"logits": s}, {"logits": t}, 1.0).numpy(),
        (rows * first_pieces).sum() / first_pieces.sum(), rtol=1e-5)
    classes = objective.Head.of_model_type("classifier")
    assert (classes.over_positions, classes.per_token) == ((), ())
    s, t = RNG.normal(size=(2, 3)), RNG.normal(size=(2, 3))
    np.testing.assert_allclose(
        objective.soft_loss(classes, features, {"logits": s}, {"logits": t}, 1.0).numpy(),
        np_kl_rows(s, t).mean(), rtol=1e-5)


def test_layer_choice_and_mapping():
    assert teacher.student_layers("0,2,4", 6) == [0, 2, 4]
    assert teacher.student_layers("3", 6) == [0, 2, 4]
    assert teacher.student_layers(None, 12) == [0, 2, 4, 6, 8, 10]
    assert teacher.student_layers("1,", 2) == [1]
    with pytest.raises(ValueError, match=r"--student_layers=0,6: layer 6 is out of range"):
        teacher.student_layers("0,6", 6)
    with pytest.raises(ValueError, match="--student_layers=7: a count"):
        teacher.student_layers("7", 6)
    assert teacher.layer_mapping(None, 3, 6) == [0, 2, 4, 6]
    assert teacher.layer_mapping("1,3,6", 3, 6) == [0, 1, 3, 6]
    with pytest.raises(ValueError, match="--layer_map=1,2: expected 3"):
        teacher.layer_mapping("1,2", 3, 6)
    assert objective.attention_layers("minilm", [0, 2, 4, 6]) == ([2], [5])
    assert objective.attention_layers("tinybert", [0, 2, 4]) == ([0, 1], [1, 3])


def test_student_from_layers_copies_exactly_the_chosen_teacher_weights():
    config = tiny_config(num_hidden_layers=4)
    big = tiny_model(BertClassifier, config, seed=3, num_classes=3)
    small = student.traced(tiny_model(BertClassifier, tiny_config(num_hidden_layers=2),
                                      seed=4, num_classes=3), projection_width=None)
    small.build()
    student.copy_layers(big, small, [1, 3])
    pairs = [(big.encoder.embeddings, small.encoder.embeddings),
             (big.encoder.transformer_layers[1], small.encoder.transformer_layers[0]),
             (big.encoder.transformer_layers[3], small.encoder.transformer_layers[1]),
             (big.encoder.pooler, small.encoder.pooler), (big.head, small.head)]
    for origin, copy in pairs:
        for a, b in zip(origin.get_weights(), copy.get_weights(), strict=True):
            np.testing.assert_array_equal(a, b)
    # The traced student returns its internals in training, its logits alone otherwise.
    features = {"input_ids": tf.constant([[2, 7, 8, 3, 0]]),
                "input_mask": tf.constant([[1, 1, 1, 1, 0]]),
                "segment_ids": tf.zeros([1, 5], tf.int32)}
    traced = student.traced(small, traced_attention=(0, 1), projection_width=48)
    traced.build()
    outputs = traced(features, training=True)
    assert len(outputs["hidden_states"]) == 3 and outputs["hidden_states"][0].shape[-1] == 48
    assert outputs["attention_scores"][1].shape == (1, 4, 5, 5)
    assert sorted(traced(features, training=False)) == ["logits"]
    # Its attention probabilities are the layer's own: rows sum to 1 over real keys.
    probs = tf.nn.softmax(outputs["attention_scores"][0], axis=-1).numpy()
    np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-5)
    assert probs[..., -1].max() < 1e-6


# ---------------------------------------------------------------------- tiny real runs
@pytest.fixture(scope="module")
def teacher_run(tmp_path_factory):
    """A tiny SST-2 classifier (2 layers), fine-tuned: the teacher."""
    root = tmp_path_factory.mktemp("teacher")
    test_run_classifier.write_sst2(root / "data")
    options = test_run_classifier.options(root, do_train=True)  # 120 steps: learnt
    driver.run(registry.get("classification").task_class(options))
    return root


def write_tiny_inputs(tmp_path):
    """A fine-tuned teacher in tmp_path/teacher (shared with test_refusals)."""
    root = tmp_path / "teacher"
    test_run_classifier.write_sst2(root / "data")
    driver.run(registry.get("classification").task_class(
        test_run_classifier.options(root, do_train=True, num_train_epochs=1.0)))


def tiny_options(tmp_path, teacher_folder=None, **changes):
    """A short distillation of the teacher of `write_tiny_inputs`."""
    values = dict(teacher=str(teacher_folder or tmp_path / "teacher" / "out"),
                  output_dir=str(tmp_path / "student"), student_layers="1",
                  train_batch_size=16, eval_batch_size=8, learning_rate=2e-3,
                  num_train_epochs=1.0, save_checkpoints_steps=16, steps_per_loop=8,
                  seed=2, dropout_rate=0.0, do_train=True)
    values.update(changes)
    return DistillationOptions(**values)


def test_distillation_run_lowers_the_loss_and_its_folder_exports_and_predicts(
        teacher_run, tmp_path):
    teacher_folder = teacher_run / "out"
    transfer = tmp_path / "transfer.txt"
    transfer.write_text("".join(f"{text}\n" for text, _ in
                                test_run_classifier.sentiment_rows(16, 5)))
    # A narrower student (hidden 16, the teacher's 32) from random weights: its hidden
    # states reach the teacher's width through the learned projection.
    narrow = tmp_path / "narrow.json"
    narrow.write_text(json.dumps(dict(
        json.loads((teacher_folder / "bert_config.json").read_text()),
        hidden_size=16, num_hidden_layers=1)))
    options = tiny_options(tmp_path, teacher_folder, num_train_epochs=24.0, do_eval=True,
                           student_layers=None, student_config_file=str(narrow),
                           allow_random_encoder=True, learning_rate=4e-3, hard_weight=0.5,
                           hidden_weight=0.1, soft_temperature=2.0,
                           transfer_file=str(transfer))
    outcome = driver.execute(DistillationTask(options))
    history = outcome.runner.train_result.history
    first, last = history[0]["soft_loss"], history[-1]["soft_loss"]
    assert last < first * 0.3, (first, last)
    assert history[-1]["total_loss"] < history[0]["total_loss"] * 0.5
    assert history[-1]["hidden_loss"] > 0 and history[-1]["hard_loss"] > 0
    # (64 train + 16 transfer rows) / 16 * 24 epochs = 120 steps.
    assert outcome.results["global_step"] == 120
    assert outcome.results["eval_accuracy"] >= 0.9, outcome.results
    out = tmp_path / "student"
    saved = run_config.read(str(out))
    assert (saved["command"], saved["task"], saved["model_type"], saved["labels"]) == (
        "distillation", "classification/sst-2", "classifier", ["0", "1"])
    assert json.loads((out / "bert_config.json").read_text())["hidden_size"] == 16
    assert saved["options"]["max_seq_length"] == 12
    # Exported with no task flag: the run's config.json says what it is.
    export_dir = export_checkpoint.export_from_checkpoint(export_checkpoint.ExportOptions(
        init_checkpoint=str(out), export_dir=str(tmp_path / "exported")))
    serving = tf.saved_model.load(export_dir).signatures["serving_default"]
    rows = test_run_classifier.sentiment_rows(16, 1)
    served = serving(text_a=tf.constant([text for text, _ in rows]))
    labels = [label.decode() for label in served["labels"].numpy()]
    assert np.mean([got == want for got, want in zip(labels, (y for _, y in rows))]) >= 0.9
    # An eval-only rerun of the student folder reads its checkpoint.
    again = registry.run("distillation", dataclasses.replace(options, do_train=False))
    assert again["eval_accuracy"] == outcome.results["eval_accuracy"]
    # The teacher task's own command evaluates the student folder with no task flag: its
    # config.json records the options of the task its model is (model_options).
    (out / "eval_results.txt").unlink()
    done = subprocess.run([sys.executable, "-m", "bert_tf.cli.run_classifier",
                           f"--output_dir={out}", "--do_eval"], capture_output=True,
                          text=True, timeout=600,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "come from the trained run's" in done.stderr
    assert f"eval_accuracy = {outcome.results['eval_accuracy']}" in (
        out / "eval_results.txt").read_text()


def test_on_the_fly_teacher_with_attention_loss_trains(teacher_run, tmp_path):
    options = tiny_options(tmp_path, teacher_run / "out", cache_teacher=False,
                           attention_weight=1.0, attention_loss="minilm",
                           hidden_loss="cosine", hidden_weight=1.0, num_train_epochs=2.0)
    outcome = driver.execute(DistillationTask(options))
    losses_seen = outcome.runner.train_result.history[-1]
    assert losses_seen["attention_loss"] > 0 and losses_seen["hidden_loss"] > 0
    spec = distill_data.record_spec(str(tmp_path / "student" / "distill_train.tf_record"))
    assert not [name for name in spec if name.startswith("teacher/")]  # run on the fly


def test_a_tagger_distils_per_token_and_its_command_evaluates_the_student(tmp_path):
    # A 2-layer NER teacher, learnt; its 1-layer student learns per-token soft targets,
    # cached with the windows of the training file and of an unlabelled transfer file.
    data = tmp_path / "data"
    data.mkdir()
    test_run_ner.write_conll(data / "eng.train", 64, 0)
    test_run_ner.write_conll(data / "eng.testa", 12, 1, length=14)  # windows
    teacher_results = ner_task.run(test_run_ner.options(
        tmp_path, do_train=True, do_eval=True, num_train_epochs=12.0))
    assert teacher_results["eval_f1"] == 100.0, teacher_results
    rng = np.random.default_rng(5)
    transfer = [test_run_ner.sentence(rng, length)[0] for length in (4, 14, 6, 15) * 4]
    (tmp_path / "transfer.txt").write_text("".join(" ".join(words) + "\n"
                                                   for words in transfer))
    options = tiny_options(tmp_path, tmp_path / "out", num_train_epochs=12.0,
                           learning_rate=3e-3, do_eval=True,
                           transfer_file=str(tmp_path / "transfer.txt"))
    task = DistillationTask(options)
    outcome = driver.execute(task)
    history = outcome.runner.train_result.history
    assert history[-1]["soft_loss"] < history[0]["soft_loss"] * 0.3, history
    assert outcome.results["eval_f1"] >= 90.0, outcome.results
    record = str(tmp_path / "student" / distill_data.RECORD_NAME)
    rows = [tf.train.Example.FromString(row) for row in
            tf.data.TFRecordDataset(record).as_numpy_iterator()]
    value = lambda row, name: list(  # noqa: E731
        row.features.feature[name].int64_list.value)
    unlabelled = [row for row in rows if value(row, distill_data.LABELLED) == [0]]
    # Every transfer word is scored once, at its first piece in one window.
    assert sum(sum(value(row, "label_weights")) for row in unlabelled) == sum(
        len(words) for words in transfer)
    assert len(unlabelled) > len(transfer)  # the long sentences span windows
    # The cached per-token logits, cut with the batch, are the teacher's on those rows
    # at every real token (the teacher pass cut its own batches: padding holds zeros).
    batch = next(iter(distill_data.distill_dataset_fn(
        record, 8, seed=0, trim_padding=True, token_features=ner_task.TOKEN_FEATURES,
        token_outputs=("logits",))(None)))
    logits = task.teacher()(batch, training=False)["logits"]
    assert batch["teacher/logits"].shape == logits.shape
    assert batch["label_weights"].shape == batch["input_ids"].shape
    real = batch["input_mask"].numpy().astype(bool)
    np.testing.assert_allclose(batch["teacher/logits"].numpy()[real], logits.numpy()[real],
                               atol=1e-4)
    # The pass ran the teacher on the real tokens only: a short row's logits past them
    # are the zeros it was padded with, not the teacher's outputs at padding.
    short = {name: tf.constant([value(unlabelled[0], name)]) for name in
             ("input_ids", "input_mask", "segment_ids")}
    length = int(tf.reduce_sum(short["input_mask"]))
    assert length < 12
    passed = task._teacher_on_longest(short)["logits"].numpy()
    full = task.teacher()(short, training=False)["logits"].numpy()
    assert passed.shape == full.shape and not passed[0, length:].any()
    np.testing.assert_allclose(passed[0, :length], full[0, :length], atol=1e-4)
    saved = run_config.read(str(tmp_path / "student"))
    assert (saved["command"], saved["model_type"]) == ("distillation", "token_classifier")
    assert saved["model_options"]["tag_column"] == -1  # the teacher task's options
    # bert-run-ner's own evaluation of the student folder, no task flag.
    done = subprocess.run([sys.executable, "-m", "bert_tf.cli.run_ner",
                           f"--output_dir={tmp_path / 'student'}", "--do_eval"],
                          capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"eval_f1 = {outcome.results['eval_f1']}" in (
        tmp_path / "student" / "eval_results.txt").read_text()


def test_a_squad_student_learns_soft_start_and_end_positions(tmp_path):
    train_file = test_run_squad.write_squad(tmp_path / "train.json", 40, seed=0)
    dev_file = test_run_squad.write_squad(tmp_path / "dev.json", 12, seed=1)
    teacher_scores = squad_task.run(test_run_squad.options(
        tmp_path, do_train=True, do_predict=True, train_file=train_file,
        predict_file=dev_file))
    assert teacher_scores["exact_match"] == 100.0, teacher_scores
    options = tiny_options(tmp_path, tmp_path / "out", num_train_epochs=6.0,
                           learning_rate=3e-3, train_batch_size=8, do_predict=True)
    outcome = driver.execute(DistillationTask(options))
    history = outcome.runner.train_result.history
    assert history[-1]["soft_loss"] < history[0]["soft_loss"] * 0.5, history
    assert outcome.results["exact_match"] >= 90.0, outcome.results
    assert run_config.read(str(tmp_path / "student"))["model_type"] == "span_labeler"
    # A span teacher takes no transfer set: its features are a question and a context.
    (tmp_path / "texts.txt").write_text("a question\n")
    _refused(dataclasses.replace(options, transfer_file=str(tmp_path / "texts.txt"),
                                 output_dir=str(tmp_path / "refused")),
             r"--transfer_file: only a classification or ner teacher .* squad run")


# ---------------------------------------------------------------------------- refusals
def _refused(options, match):
    with pytest.raises((ValueError, FileNotFoundError), match=match):
        registry.run("distillation", options)


def test_bad_inputs_are_refused_before_any_work_naming_the_flag(teacher_run, tmp_path):
    good = teacher_run / "out"
    not_a_run = tmp_path / "plain"
    not_a_run.mkdir()
    _refused(tiny_options(tmp_path, not_a_run), r"--teacher=.*plain is not a run folder")
    pretrained = tmp_path / "pretrained"
    pretrained.mkdir()
    (pretrained / "config.json").write_text(json.dumps(
        {"format": 1, "command": "pretraining", "model_type": "pretrainer",
         "options": {"max_seq_length": 12}}))
    _refused(tiny_options(tmp_path, pretrained),
             r"--teacher=.* is a pretraining run .*not a fine-tuned")
    encoder = tmp_path / "encoder"
    encoder.mkdir()
    (encoder / "config.json").write_text(json.dumps(
        {"format": 1, "command": "sentence_embeddings", "model_type": "sentence_encoder",
         "options": {}}))
    _refused(tiny_options(tmp_path, encoder), r"is a sentence_embeddings run")
    _refused(tiny_options(tmp_path, good, student_layers="0,2"),
             r"--student_layers=0,2: layer 2 is out of range; the teacher has layers 0 to 1")
    config = json.loads((good / "bert_config.json").read_text())
    for field, value in (("vocab_size", 120), ("max_position_embeddings", 32)):
        path = tmp_path / f"{field}.json"
        path.write_text(json.dumps(dict(config, **{field: value})))
        _refused(tiny_options(tmp_path, good, student_layers=None,
                              student_config_file=str(path), allow_random_encoder=True),
                 rf"--student_config_file=.*{field}={value}, the teacher's is")
    binary = tmp_path / "transfer.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    _refused(tiny_options(tmp_path, good, transfer_file=str(binary)), r"--transfer_file")
    for temperature in (0.0, -1.0):
        _refused(tiny_options(tmp_path, good, soft_temperature=temperature),
                 r"soft_temperature must be > 0")
    _refused(tiny_options(tmp_path, good, max_seq_length=10),
             r"--max_seq_length=10: distillation uses the teacher's \(12\)")
    assert not (tmp_path / "student").exists()  # nothing was written


def test_with_only_the_hard_loss_the_teacher_never_runs(teacher_run, tmp_path, monkeypatch):
    # The student of the teacher's layers, fine-tuned directly (the control of a
    # distillation): the teacher gives its weights but runs on no batch, cached or not.
    monkeypatch.setattr(DistillationTask, "teacher_outputs",
                        lambda self, features: pytest.fail("the teacher ran on a batch"))
    options = tiny_options(tmp_path, teacher_run / "out", soft_weight=0.0, hard_weight=1.0)
    outcome = driver.execute(DistillationTask(options))
    assert outcome.runner.train_result.history[-1]["hard_loss"] > 0
    spec = distill_data.record_spec(str(tmp_path / "student" / "distill_train.tf_record"))
    assert not [name for name in spec if name.startswith("teacher/")]


def test_the_teacher_pass_logs_its_progress(caplog):
    """The teacher pass over a transfer set takes minutes: it logs a start line and its
    total, and its outputs land on every row in order."""
    rows = []
    for index in range(5):
        row = tf.train.Example()
        row.features.feature["input_ids"].int64_list.value.extend([index, 7, 8])
        rows.append(row)
    teacher_fn = lambda features: {  # noqa: E731
        "logits": tf.cast(features["input_ids"][:, :1], tf.float32).numpy() * 2}
    caplog.set_level(logging.INFO, logger="absl")
    distill_data.add_teacher_outputs(rows, teacher_fn, batch_size=2)
    assert [list(r.features.feature["teacher/logits"].float_list.value) for r in rows] == \
        [[0.0], [2.0], [4.0], [6.0], [8.0]]
    lines = [r.getMessage() for r in caplog.records]
    assert "Teacher pass: 5 examples ..." in lines
    assert any(line.startswith("Teacher pass: 5 examples in ") for line in lines)
