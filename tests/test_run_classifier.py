"""Tiny end-to-end fine-tuning runs: train, resume, eval, predict, submission files."""

import json
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.options import option_specs
from bert_tf.runs import driver, export_checkpoint, run_context
from bert_tf.runs.run_context import RunContext
from bert_tf.weights import checkpoints
from bert_tf.configs import BertConfig
from bert_tf.models import BertEncoder
from bert_tf.tasks.classification import task as classification_task
from bert_tf.tasks.classification.options import ClassifierOptions
from harness import (SPECIAL_TOKENS, tiny_model, write_released_checkpoint,
                     write_tiny_model_files, write_tsv, write_vocab)

WORDS = ["good", "bad", "movie", "film", "plot", "acting", "the", "a", "was", "is", "very",
         "quite", "story", "music", "really"]


def tiny_model_files(folder):
    return write_tiny_model_files(folder, WORDS)


def sentiment_rows(count, seed):
    """SST-2-style rows: label 1 iff the sentence says "good" (a learnable rule)."""
    rng = np.random.default_rng(seed)
    rows = []
    for index in range(count):
        label = index % 2
        filler = list(rng.choice(WORDS[2:], size=4))
        filler.insert(int(rng.integers(0, 5)), "good" if label else "bad")
        rows.append((" ".join(filler), str(label)))
    return rows


def write_sst2(folder, train=64, dev=16, test=6):
    for name, rows in (("train", sentiment_rows(train, 0)), ("dev", sentiment_rows(dev, 1))):
        write_tsv(folder / f"{name}.tsv", [("sentence", "label")] + rows)
    write_tsv(folder / "test.tsv", [("index", "sentence")] + [
        (str(i), s) for i, (s, _) in enumerate(sentiment_rows(test, 2))])


def options(tmp_path, **changes):
    vocab_file, config_file = tiny_model_files(tmp_path)
    values = dict(task_name="SST-2", data_dir=str(tmp_path / "data"),
                  output_dir=str(tmp_path / "out"), vocab_file=vocab_file,
                  bert_config_file=config_file, max_seq_length=12, train_batch_size=16,
                  eval_batch_size=5, predict_batch_size=4, learning_rate=2e-3,
                  num_train_epochs=30.0, warmup_proportion=0.1, save_checkpoints_steps=16,
                  steps_per_loop=8, seed=1, dropout_rate=0.0)
    values.update(allow_random_encoder=True)  # tiny models train from random weights
    values.update(changes)
    return ClassifierOptions(**values)


def test_train_eval_predict_sst2(tmp_path):
    write_sst2(tmp_path / "data")
    results = classification_task.run(options(tmp_path, do_train=True, do_eval=True,
                                              do_predict=True))
    out = tmp_path / "out"
    # 64 examples / 16 * 30 epochs = 120 steps; the "good"/"bad" rule is learnt.
    assert results["global_step"] == 120 and results["eval_examples"] == 16
    assert results["eval_accuracy"] == 1.0, results
    lines = (out / "eval_results.txt").read_text().splitlines()
    assert "eval_accuracy = 1.0" in lines and lines == sorted(lines)
    probabilities = np.loadtxt(out / "test_results.tsv", delimiter="\t")
    assert probabilities.shape == (6, 2)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)
    submission = (out / "SST-2.tsv").read_text().splitlines()
    expected = [f"{i}\t{int(p[1] > p[0])}" for i, p in enumerate(probabilities)]
    assert submission == ["index\tprediction"] + expected
    assert submission[1:] == [f"{i}\t{y}" for i, (_, y) in enumerate(sentiment_rows(6, 2))]
    assert (out / "label_list.txt").read_text() == "0\n1\n"
    # Exported without --label_names, the run's own labels (in label-id order) serve.
    run = options(tmp_path)
    export_dir = export_checkpoint.export_from_checkpoint(export_checkpoint.ExportOptions(
        model_type="classifier", init_checkpoint=str(out), export_dir=str(tmp_path / "e"),
        vocab_file=run.vocab_file, bert_config_file=run.bert_config_file,
        max_seq_length=12))
    serving = tf.saved_model.load(export_dir).signatures["serving_default"]
    texts = [text for text, _ in sentiment_rows(6, 2)]
    served = serving(text_a=tf.constant(texts))
    assert [label.decode() for label in served["labels"].numpy()] == [
        str(int(p[1] > p[0])) for p in probabilities]


@pytest.mark.slow
def test_resume_then_eval_only_restores_the_checkpoint(tmp_path):
    write_sst2(tmp_path / "data")
    first = classification_task.run(options(tmp_path, do_train=True, num_train_epochs=2.0))
    assert first == {}  # no eval asked
    # More epochs: resumes from step 8 to 12; eval-only then restores step 12's weights.
    resumed = classification_task.run(options(tmp_path, do_train=True, do_eval=True,
                                              num_train_epochs=3.0))
    assert resumed["global_step"] == 12
    again = classification_task.run(options(tmp_path, do_eval=True))
    assert again["global_step"] == 12
    assert again["eval_loss"] == pytest.approx(resumed["eval_loss"], rel=1e-5)


def test_generic_jsonl_regression_and_bad_flags(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    rows = [{"q": " ".join(["good"] * (i % 4 + 1)), "score": float(i % 4)} for i in range(8)]
    for split in ("train", "dev"):
        (data / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    results = classification_task.run(options(
        tmp_path, task_name="generic", text_column="q", label_column="score",
        is_regression=True, do_train=True, do_eval=True, num_train_epochs=2.0,
        train_batch_size=4))
    assert {"eval_pearson", "eval_spearman", "eval_pearson_and_spearman",
            "eval_loss"} <= set(results)
    assert results["global_step"] == 4


def test_bad_input_is_reported_before_any_work(tmp_path):
    write_sst2(tmp_path / "data")
    with pytest.raises(ValueError, match="unknown task_name 'sst3'; known tasks: cola"):
        classification_task.run(options(tmp_path, task_name="sst3", do_train=True))
    with pytest.raises(ValueError, match="max_seq_length 32 exceeds max_position_embeddings"):
        classification_task.run(options(tmp_path, max_seq_length=32, do_eval=True))
    with pytest.raises(FileNotFoundError, match=r"dev file was expected at .*empty/dev.tsv"):
        classification_task.run(options(tmp_path, task_name="rte", do_eval=True,
                                        data_dir=str(tmp_path / "empty")))
    # Checked before training starts, not after it.
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(ValueError, match=r"output_dir .*a_file' is a file: expected a folder"):
        classification_task.run(options(tmp_path, do_train=True,
                                        output_dir=str(tmp_path / "a_file")))
    (tmp_path / "data" / "test.tsv").unlink()
    with pytest.raises(FileNotFoundError, match=r"test file was expected at .*test.tsv"):
        classification_task.run(options(tmp_path, do_train=True, do_predict=True))
    assert not (tmp_path / "out" / "train.tf_record").exists()


def test_command_line_rejects_unknown_task(tmp_path):
    vocab_file, config_file = tiny_model_files(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "run_classifier", "--task_name=foo", f"--data_dir={tmp_path}",
         f"--output_dir={tmp_path / 'out'}", f"--vocab_file={vocab_file}",
         f"--bert_config_file={config_file}", "--do_train", "--max_seq_length=12"],
        capture_output=True, text=True)
    assert result.returncode != 0
    assert "bert-run-classifier: error: unknown task_name 'foo'; known tasks: cola, generic, " \
        "mnli" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_export_dir_serves_the_same_probabilities(tmp_path):
    write_sst2(tmp_path / "data")
    export_dir = tmp_path / "export"
    classification_task.run(options(tmp_path, do_train=True, do_predict=True,
                                    num_train_epochs=2.0, export_dir=str(export_dir)))
    probabilities = np.loadtxt(tmp_path / "out" / "test_results.tsv", delimiter="\t")
    serving = tf.saved_model.load(str(export_dir)).signatures["serving_default"]
    texts = [s for s, _ in sentiment_rows(6, 2)]
    outputs = serving(text_a=tf.constant(texts))
    np.testing.assert_allclose(outputs["probabilities"].numpy(), probabilities, atol=1e-5)
    assert [label.decode() for label in outputs["labels"].numpy()] == [
        str(int(p[1] > p[0])) for p in probabilities]


def test_an_export_dir_holding_a_savedmodel_is_refused_before_training(tmp_path):
    # A rerun with the same --export_dir: refused before any work, with a fix that
    # exists for a runner (before: after training, naming flags it does not have).
    write_sst2(tmp_path / "data")
    export_dir = tmp_path / "export"
    export_dir.mkdir()
    (export_dir / "saved_model.pb").write_bytes(b"")
    with pytest.raises(FileExistsError, match=r"already holds a SavedModel; use a new "
                                              r"--export_dir.*bert-export-model"):
        classification_task.run(options(tmp_path, do_train=True, export_dir=str(export_dir)))
    assert not (tmp_path / "out" / "train.tf_record").exists()


def test_defaults_are_the_reference_recipe_and_bad_choices_are_refused(tmp_path):
    # The defaults that reach Hugging Face transformers' accuracy on the same weights
    # (bench/*_check.py): N(0, r) heads, decay from the peak after warm-up, torch's Adam.
    defaults = ClassifierOptions(task_name="SST-2", output_dir=str(tmp_path / "out"))
    assert (defaults.head_initializer, defaults.lr_schedule, defaults.adam_bias_correction) \
        == ("normal", "linear", True)
    flag_defaults = {spec.name: spec.default for spec in option_specs(ClassifierOptions)}
    assert flag_defaults["head_initializer"] == "normal"
    assert flag_defaults["lr_schedule"] == "linear"
    assert flag_defaults["adam_bias_correction"] is True
    write_sst2(tmp_path / "data")
    for change, name in ((dict(head_initializer="uniform"), "head_initializer"),
                         (dict(lr_schedule="cosine"), "lr_schedule")):
        with pytest.raises(ValueError, match=name):
            classification_task.run(options(tmp_path, do_train=True, **change))
    assert not (tmp_path / "out" / "train.tf_record").exists()


@pytest.mark.parametrize("change, message", [
    (dict(train_batch_size=0), "train_batch_size must be a positive integer"),
    (dict(num_train_epochs=0.0), "num_train_epochs must be > 0"),
    (dict(learning_rate=0.0), "learning_rate must be > 0"),
    (dict(warmup_proportion=1.5), "warmup_proportion"),
    (dict(gradient_accumulation_steps=3), "train_batch_size=16 is not divisible by "
                                          "gradient_accumulation_steps=3"),
])
def test_bad_numbers_are_refused_before_any_work(tmp_path, change, message):
    write_sst2(tmp_path / "data")
    with pytest.raises(ValueError, match=message):
        classification_task.run(options(tmp_path, do_train=True, **change))
    assert not (tmp_path / "out" / "train.tf_record").exists()


def test_missing_init_checkpoint_is_named_before_config_and_vocab(tmp_path):
    write_sst2(tmp_path / "data")
    nope = str(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match="init_checkpoint not found: .*nope"):
        classification_task.run(options(tmp_path, do_train=True, init_checkpoint=nope,
                                        bert_config_file=None, vocab_file=None))


def test_predict_without_training_refuses_a_random_head(tmp_path):
    # A released encoder checkpoint has no classifier weights: predicting from a fresh
    # output_dir would serve a random head, so it is refused with the reason.
    released = tmp_path / "released"
    _, config_file = tiny_model_files(released)  # its vocab.txt and bert_config.json
    write_released_checkpoint(
        released, tiny_model(BertEncoder, BertConfig.from_json_file(config_file), seed=0))
    write_sst2(tmp_path / "data")
    with pytest.raises(ValueError, match="task head would be random"):
        classification_task.run(options(tmp_path, do_predict=True,
                                        init_checkpoint=str(released)))
    assert not list((tmp_path / "out").glob("*.tsv"))


def test_vocab_of_another_model_is_refused(tmp_path):
    # A 20-token vocab with a 99-row model: ids would mean other words, or run past
    # the table; refused naming both files, before any work.
    write_sst2(tmp_path / "data")
    small_vocab = write_vocab(tmp_path / "small_vocab.txt", SPECIAL_TOKENS + WORDS)
    with pytest.raises(ValueError, match="has 20 tokens but .*bert_config.json has "
                                         "vocab_size 99"):
        classification_task.run(options(tmp_path, do_train=True,
                                        vocab_file=small_vocab))
    assert not (tmp_path / "out" / "train.tf_record").exists()


def test_output_dir_of_another_run_is_refused_naming_what_differs(tmp_path):
    write_sst2(tmp_path / "data")
    first = options(tmp_path, do_train=True)
    context = RunContext.create(first)
    context.check_run_settings("classifier", "classification/sst-2", ["0", "1"])
    saved = json.loads((tmp_path / "out" / run_context.RUN_SETTINGS_FILE).read_text())
    assert saved["model_type"] == "classifier" and saved["labels"] == ["0", "1"]
    context.check_run_settings("classifier", "classification/sst-2", ["0", "1"])  # same
    relu = tmp_path / "relu_config.json"
    BertConfig.from_dict({**json.loads(open(first.bert_config_file).read()),
                          "hidden_act": "relu"}).to_json_file(str(relu))
    with pytest.raises(ValueError, match=r"bert_config hidden_act: gelu there, relu now"):
        classification_task.run(options(tmp_path, do_train=True, bert_config_file=str(relu)))
    with pytest.raises(ValueError, match=r"labels: \['0', '1'\] there, \['a', 'b'\] now; "
                                         r"task: classification/sst-2 there, x now"):
        context.check_run_settings("classifier", "x", ["a", "b"])


def test_export_refuses_a_run_of_another_model_type(tmp_path):
    run_dir = tmp_path / "mrpc"
    run_dir.mkdir()
    vocab_file, _ = tiny_model_files(tmp_path)
    (run_dir / run_context.RUN_SETTINGS_FILE).write_text(json.dumps(
        {"model_type": "classifier", "task": "classification/mrpc", "labels": ["0", "1"]}))
    with pytest.raises(ValueError, match=r"holds a classifier run \(task classification/mrpc"
                                         r".*asks for a span_labeler"):
        export_checkpoint.export_from_checkpoint(export_checkpoint.ExportOptions(
            model_type="squad", init_checkpoint=str(run_dir),
            export_dir=str(tmp_path / "e"), vocab_file=vocab_file))
    with pytest.raises(ValueError, match=r"name 3 labels, but the run in .* was trained "
                                         r"with 2: \['0', '1'\]"):
        export_checkpoint.export_from_checkpoint(export_checkpoint.ExportOptions(
            model_type="classifier", init_checkpoint=str(run_dir),
            export_dir=str(tmp_path / "e"), vocab_file=vocab_file,
            label_names=["neg", "neutral", "pos"]))
    # Trained labels listed in another order would serve class 0 as "1": refused.
    with pytest.raises(ValueError, match=r"'1' is class 1 there, 0 here; '0' is class 0 "
                                         r"there, 1 here.*list them as trained, \['0', '1'\]"):
        export_checkpoint.export_from_checkpoint(export_checkpoint.ExportOptions(
            model_type="classifier", init_checkpoint=str(run_dir),
            export_dir=str(tmp_path / "e"), vocab_file=vocab_file, label_names=["1", "0"]))


def test_lower_casing_that_does_not_fit_the_vocab_is_refused_unless_allowed(tmp_path):
    write_sst2(tmp_path / "data")
    vocab_file = tmp_path / "uncased_vocab.txt"
    write_vocab(vocab_file, SPECIAL_TOKENS + WORDS, size=99)
    big = tmp_path / "big_vocab.txt"  # 1,000 lowercase pieces: an uncased vocabulary
    big.write_text("".join(t + "\n" for t in SPECIAL_TOKENS + WORDS +
                           [f"w{i}" for i in range(1000)]))
    config = json.loads(open(options(tmp_path).bert_config_file).read())
    config_file = tmp_path / "big_config.json"
    BertConfig.from_dict({**config, "vocab_size": 1020}).to_json_file(str(config_file))
    cased_run = options(tmp_path, do_train=True, do_lower_case=False, vocab_file=str(big),
                        bert_config_file=str(config_file))
    with pytest.raises(ValueError, match="do_lower_case=false does not fit vocab_file .*"
                                         "big_vocab.txt: it is uncased"):
        RunContext.create(cased_run)
    cased_run.allow_case_mismatch = True
    RunContext.create(cased_run)


def write_tiny_inputs(tmp_path):
    """The data of `tiny_options` (shared with test_commands)."""
    write_sst2(tmp_path / "data")


def tiny_options(tmp_path, **changes):
    """A short training run of this task (shared with test_commands)."""
    return options(tmp_path, **{"do_train": True, "num_train_epochs": 1.0, **changes})


def test_fine_tuning_without_init_checkpoint_is_refused_before_any_work(tmp_path):
    write_sst2(tmp_path / "data")
    with pytest.raises(ValueError, match=r"no --init_checkpoint: .* would fine-tune a "
                                         r"random encoder.*--allow_random_encoder"):
        classification_task.run(options(tmp_path, do_train=True,
                                        allow_random_encoder=False))
    assert not (tmp_path / "out" / "train.tf_record").exists()
    assert tf.train.latest_checkpoint(str(tmp_path / "out")) is None


def test_a_fine_tuning_output_dir_is_a_model_folder_for_the_next_run(tmp_path, monkeypatch):
    # Its encoder loads whole into the next task (its head is another task's: the
    # generic task on the same files), with bert_config.json and vocab.txt found in it;
    # no flag allows a random encoder. (A run of the same task restores whole, head
    # too: test_run_config.)
    write_sst2(tmp_path / "data")
    first = driver.execute(classification_task.ClassificationTask(
        options(tmp_path, do_train=True, num_train_epochs=1.0)))
    run_dir = tmp_path / "out"
    assert (run_dir / "bert_config.json").is_file() and (run_dir / "vocab.txt").is_file()
    reports = []
    load = checkpoints.load_pretrained_weights
    monkeypatch.setattr(checkpoints, "load_pretrained_weights",
                        lambda *args, **kwargs: reports.append(load(*args, **kwargs))
                        or reports[-1])
    second = options(tmp_path, do_train=True, num_train_epochs=1.0, learning_rate=1e-9,
                     task_name="generic", text_column="sentence",
                     output_dir=str(tmp_path / "next"), init_checkpoint=str(run_dir),
                     bert_config_file=None, vocab_file=None, allow_random_encoder=False)
    classification_task.run(second)
    assert len(reports) == 1 and not reports[0].fresh_encoder()
    assert len(reports[0].loaded) == len(first.runner.model.encoder.weights)
