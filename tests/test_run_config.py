"""A run's config.json: written by every run, read by everything that reads the run
folder (export, prediction from a checkpoint, the next run), and the driver and loop
that name no task."""

import ast
import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys
import types

import numpy as np
import pytest
import tensorflow as tf
from absl import flags

import test_electra
import test_run_classifier
import test_run_multiple_choice
import test_run_ner
import test_run_pretraining
import test_run_squad
import test_sentence_embeddings
from bert_tf.commands import command_line
from bert_tf import options as options_lib
from bert_tf.serving import registry as model_registry
from bert_tf.runs import export_checkpoint, export_settings, feature_extraction, registry, run_config
from bert_tf.runs.export_checkpoint import ExportOptions
from harness import write_tsv

HAVE_KERAS_HUB = importlib.util.find_spec("keras_hub") is not None
PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "bert_tf"
TASK_MODULES = {"classification": test_run_classifier, "ner": test_run_ner,
                "squad": test_run_squad, "multiple_choice": test_run_multiple_choice,
                "pretraining": test_run_pretraining, "electra": test_electra,
                "sentence_embeddings": test_sentence_embeddings}


def write_pairs(folder):
    """MRPC-like pairs of a generic task (label 1 iff the first text says "good")."""
    rows = test_run_classifier.sentiment_rows(32, 0)
    pairs = [(a, b, x) for (a, x), (b, _) in zip(rows, rows[1:] + rows[:1])]
    for split in ("train", "dev"):
        write_tsv(folder / f"{split}.tsv", [("text", "text_b", "label")] + pairs)


def pair_run(tmp_path):
    """A trained classifier of pairs (run_classifier on the generic task)."""
    write_pairs(tmp_path / "data")
    options = test_run_classifier.options(
        tmp_path, task_name="generic", text_pair_column="text_b", do_train=True,
        num_train_epochs=1.0, max_seq_length=14)
    registry.run("classification", options)
    return options


def test_a_run_writes_its_whole_config(tmp_path):
    options = pair_run(tmp_path)
    saved = run_config.read(str(tmp_path / "out"))
    assert saved["command"] == "classification" and saved["task"] == "classification/generic"
    assert saved["model_type"] == "classifier" and saved["labels"] == ["0", "1"]
    assert saved["options"]["max_seq_length"] == 14 == options.max_seq_length
    assert saved["options"]["text_pair_column"] == "text_b"
    assert saved["export"]["text_pair"] is True
    assert saved["model"]["hidden_size"] == 32 and saved["vocab"]["do_lower_case"] is True
    # A checkpoint prefix, or one in best/, belongs to the same run.
    prefix = tf.train.latest_checkpoint(str(tmp_path / "out"))
    assert run_config.read(prefix)["path"] == saved["path"]


@pytest.mark.slow
def test_exporting_a_pair_run_serves_pairs_at_its_length(tmp_path):
    # bert-export-model with the run folder alone: model type, labels, pairs, length and
    # case all come from the run (before, this served text_a only, at 128 tokens).
    pair_run(tmp_path)
    path = export_checkpoint.export_from_checkpoint(ExportOptions(
        init_checkpoint=str(tmp_path / "out"), export_dir=str(tmp_path / "e")))
    serving = tf.saved_model.load(path).signatures["serving_default"]
    assert sorted(serving.structured_input_signature[1]) == ["text_a", "text_b"]
    ids = tf.saved_model.load(path).signatures["serve_ids"]
    assert ids.structured_input_signature[1]["input_ids"].shape[-1] == 14
    served = serving(text_a=tf.constant(["good film"]), text_b=tf.constant(["bad plot"]))
    assert served["labels"].numpy()[0].decode() in ("0", "1")
    options = test_run_classifier.options(tmp_path, max_seq_length=14)
    saved = run_config.read(str(tmp_path / "out"))
    for export_format in ("huggingface", "litert"):  # their readers' view of the run
        folder = export_checkpoint.export_from_checkpoint(ExportOptions(
            init_checkpoint=str(tmp_path / "out"), export_format=export_format,
            export_dir=str(tmp_path / export_format)))
        _check_export(export_format, folder, saved, options)


def test_a_flag_that_contradicts_the_run_is_refused_naming_both(tmp_path):
    pair_run(tmp_path)
    with pytest.raises(ValueError, match=r"--text_pair=False contradicts the run in "
                                         r".*config.json, trained with text_pair=True"):
        export_checkpoint.export_from_checkpoint(ExportOptions(
            init_checkpoint=str(tmp_path / "out"), export_dir=str(tmp_path / "e"),
            text_pair=False))
    # A serving choice may differ from the run's.
    path = export_checkpoint.export_from_checkpoint(ExportOptions(
        init_checkpoint=str(tmp_path / "out"), export_dir=str(tmp_path / "e"),
        max_seq_length=16))
    ids = tf.saved_model.load(path).signatures["serve_ids"]
    assert ids.structured_input_signature[1]["input_ids"].shape[-1] == 16


@pytest.mark.slow
def test_predicting_from_a_checkpoint_into_a_new_folder(tmp_path):
    # The original's recipe: --do_predict --init_checkpoint=<run>/ckpt-N into a new
    # output_dir serves the trained head (it was refused as "the head would be random").
    options = pair_run(tmp_path)
    write_tsv(tmp_path / "data" / "test.tsv",
              [("text", "text_b")] + [("good film", "good plot"), ("bad film", "good")])
    registry.run("classification", test_run_classifier.options(
        tmp_path, task_name="generic", text_pair_column="text_b", do_predict=True,
        max_seq_length=14))
    expected = np.loadtxt(tmp_path / "out" / "test_results.tsv", delimiter="\t")
    prefix = tf.train.latest_checkpoint(str(tmp_path / "out"))
    registry.run("classification", test_run_classifier.options(
        tmp_path, task_name="generic", text_pair_column="text_b", do_predict=True,
        max_seq_length=14, init_checkpoint=prefix, output_dir=str(tmp_path / "new"),
        allow_random_encoder=False))
    np.testing.assert_allclose(np.loadtxt(tmp_path / "new" / "test_results.tsv",
                                          delimiter="\t"), expected, atol=1e-6)
    assert options.do_train


def _check_export(export_format, folder, saved, options):
    """What the export of a run folder holds, read back by its own format's reader."""
    labels = saved["labels"]
    if export_format == "saved_model":
        signatures = tf.saved_model.load(folder).signatures
        ids = signatures["serve_ids"].structured_input_signature[1]["input_ids"]
        assert ids.shape[-1] == options.max_seq_length
        text = sorted(signatures["serving_default"].structured_input_signature[1])
        if saved["export"].get("text_pair"):
            assert text == ["text_a", "text_b"]
    elif export_format == "huggingface":
        config = json.loads((pathlib.Path(folder) / "config.json").read_text())
        if labels:
            assert [config["id2label"][str(i)] for i in range(len(labels))] == labels
        tokenizer = json.loads((pathlib.Path(folder) / "tokenizer_config.json").read_text())
        assert tokenizer["do_lower_case"] is getattr(options, "do_lower_case", True)
    elif export_format == "litert":
        config = json.loads((pathlib.Path(folder) / "litert_config.json").read_text())
        assert config["max_seq_length"] == options.max_seq_length
        assert config.get("label_names", labels) == labels
        assert config.get("text_pair", False) is bool(saved["export"].get("text_pair"))


def _rerun_options(entry, config_path):
    """The options `--config=<config_path>` gives the task's command, nothing else set."""
    flag_values = flags.FlagValues()
    command_line.define_flags(entry.options_class, "test", flag_values)
    flag_values(["prog", f"--config={config_path}"])
    return command_line.options_from_flags(entry.options_class, flag_values)


@pytest.mark.slow
@pytest.mark.extras("keras_hub")
@pytest.mark.parametrize("name", sorted(TASK_MODULES))
def test_every_task_reruns_and_exports_its_run_folder(name, tmp_path):
    # The run's config.json reruns to the same options, field by field; its folder
    # exports in every format its model type supports with no task flag: model type,
    # labels, pairs, length and case come from the run (keras_hub when installed).
    module = TASK_MODULES[name]
    module.write_tiny_inputs(tmp_path)
    vocab = ({"vocab_file": str(tmp_path / "vocab.txt")} if name in ("pretraining", "electra")
             else {})
    if vocab:  # pre-training records carry ids only: the vocab makes the folder whole
        test_run_classifier.write_vocab(vocab["vocab_file"], test_run_classifier.SPECIAL_TOKENS
                                        + test_run_classifier.WORDS, size=99)
    options = module.tiny_options(tmp_path, **vocab)
    registry.run(name, options)
    saved = run_config.read(options.output_dir)
    assert saved["command"] == name
    rerun = _rerun_options(registry.get(name), saved["path"])
    resolved = registry.get(name).task_class(options).options  # e.g. the folder's pooling
    assert options_lib.options_to_dict(rerun) == options_lib.options_to_dict(resolved)
    assert (pathlib.Path(options.output_dir) / "vocab.txt").is_file()
    formats = [export_format for export_format in model_registry.get(saved["model_type"]).formats
               if export_format != "keras_hub" or HAVE_KERAS_HUB]
    for export_format in formats:
        folder = export_checkpoint.export_from_checkpoint(ExportOptions(
            init_checkpoint=options.output_dir, export_format=export_format,
            export_dir=str(tmp_path / export_format)))
        _check_export(export_format, folder, saved, options)


@pytest.mark.slow
def test_seeding_gives_the_same_encoder_whatever_the_task(tmp_path):
    # The task seeds right before it builds: its encoder starts the same (from scratch)
    # whatever the head, and a head does not shift the encoder's random draws.
    config = test_run_classifier.BertConfig.from_json_file(
        test_run_classifier.tiny_model_files(tmp_path)[1])
    encoders = []
    for name in ("squad", "multiple_choice", "squad"):
        module = TASK_MODULES[name]
        task = registry.get(name).task_class(module.tiny_options(tmp_path / name, seed=7))
        task.context = types.SimpleNamespace(config=config)
        model = task.create_model()
        model.build()
        encoders.append({v.path.split("/", 1)[1]: v.numpy() for v in model.encoder.weights})
        np.random.default_rng().random()  # draws between builds change nothing
        tf.random.uniform([3])
    assert encoders[0].keys() == encoders[1].keys()
    for one, other in zip(encoders[0].values(), encoders[1].values()):
        np.testing.assert_array_equal(one, other)
    other_seed = registry.get("squad").task_class(
        test_run_squad.tiny_options(tmp_path / "other", seed=8))
    other_seed.context = types.SimpleNamespace(config=config)
    model = other_seed.create_model()
    model.build()
    assert not np.array_equal(model.encoder.weights[0].numpy(),
                              next(iter(encoders[0].values())))


def test_registry_names_match_the_task_classes():
    for name in registry.names():
        assert registry.get(name).task_class.command == name
    with pytest.raises(ValueError, match="--task=nope is not a task; the tasks are: "):
        registry.get("nope")


# Modules that must work for any task: they may not name one, nor a head or model type
# (docstrings and comments may, as examples).
GENERIC = ["runs/driver.py", "runs/run_context.py", "runs/run_config.py",
           "runs/task.py"] + [str(path.relative_to(PACKAGE))
                               for path in sorted((PACKAGE / "train").glob("*.py"))]
TASK_WORDS = {"classifier", "classification", "squad", "ner", "labeler", "tagger", "multiple",
              "pretrainer", "glue", "mrpc", "conll"}
MODEL_CLASSES = {"BertClassifier", "BertSpanLabeler", "BertTokenClassifier",
                 "BertMultipleChoice", "BertPretrainer", "BertEncoder"}


def _code_names(path):
    """Every identifier, attribute, import and string constant of the module's code
    (docstrings excluded)."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef))
                  and node.body and isinstance(node.body[0], ast.Expr)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            yield node.id
        elif isinstance(node, ast.Attribute):
            yield node.attr
        elif isinstance(node, ast.alias):
            yield node.name
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in docstrings:
            yield node.value


def _words(name):
    """The lower-case words of an identifier or text: snake_case, CamelCase, a/b."""
    return {word.lower() for word in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", name)}


@pytest.mark.parametrize("module", GENERIC)
def test_the_driver_and_loop_name_no_task(module):
    names = set(_code_names(PACKAGE / module))
    found = sorted(name for name in names
                   if _words(name) & TASK_WORDS or name in MODEL_CLASSES)
    assert not found, f"{module} names tasks, heads or model types: {found}"


def test_the_layout_check_finds_a_task_name():
    assert _words("self.task_name == 'classification/mrpc'") & TASK_WORDS
    assert not _words("runner.train(hook)") & TASK_WORDS


def test_extraction_takes_the_case_of_the_run(tmp_path):
    run_dir = tmp_path / "cased_run"
    run_dir.mkdir()
    run_config.write(str(run_dir), {"format": run_config.FORMAT_VERSION,
                                    "vocab": {"do_lower_case": False}})
    options = types.SimpleNamespace(do_lower_case=None, init_checkpoint=str(run_dir))
    assert feature_extraction.lower_case(options) is False
    assert feature_extraction.lower_case(types.SimpleNamespace(
        do_lower_case=True, init_checkpoint=str(run_dir))) is True
    assert feature_extraction.lower_case(types.SimpleNamespace(
        do_lower_case=None, init_checkpoint=str(tmp_path))) is True  # not a run: uncased


def test_an_eval_run_of_a_trained_folder_reads_its_options(tmp_path):
    # --do_eval on a trained output_dir: what was not given comes from its config.json
    # (here max_seq_length 14 and the pair column), what to do and where from the flags.
    pair_run(tmp_path)
    flag_values = flags.FlagValues()
    options_class = registry.get("classification").options_class
    command_line.define_flags(options_class, "test", flag_values)
    flag_values(["prog", f"--output_dir={tmp_path / 'out'}", "--do_eval",
                 "--eval_batch_size=3"])
    options = command_line.options_from_flags(options_class, flag_values)
    assert (options.max_seq_length, options.text_pair_column) == (14, "text_b")
    assert (options.do_train, options.do_eval, options.eval_batch_size) == (False, True, 3)
    assert command_line.RUN_CONFIG_FILE == run_config.CONFIG_FILE
    # The original's predict recipe: a checkpoint of the run, into a new folder.
    prefix = tf.train.latest_checkpoint(str(tmp_path / "out"))
    flag_values(["prog", f"--output_dir={tmp_path / 'new'}", "--do_predict",
                 f"--init_checkpoint={prefix}"])
    options = command_line.options_from_flags(options_class, flag_values)
    assert (options.max_seq_length, options.init_checkpoint) == (14, prefix)
    flag_values(["prog", f"--output_dir={tmp_path / 'out'}", "--do_train"])
    assert command_line.options_from_flags(options_class, flag_values).max_seq_length == 128


def test_the_settings_only_a_savedmodel_applies_stay_out_of_other_formats(tmp_path):
    # A multi-label run with long-document windows: the SavedModel takes its threshold,
    # windows and pooling; a Hugging Face or LiteRT export holds the model alone (they
    # were refused as "leave the flag out" though no flag was given).
    run_config.write(str(tmp_path), {
        "format": run_config.FORMAT_VERSION, "model_type": "classifier",
        "labels": ["a", "b"], "options": {"max_seq_length": 32, "do_lower_case": True},
        "export": {"multi_label": True, "multi_label_threshold": 0.3, "doc_stride": 8,
                   "window_pooling": "max", "text_pair": False}})
    served = export_settings.from_run(ExportOptions(init_checkpoint=str(tmp_path)))
    assert (served.multi_label_threshold, served.doc_stride, served.window_pooling,
            served.max_seq_length) == (0.3, 8, "max", 32)
    for export_format in ("huggingface", "litert"):
        other = export_settings.from_run(ExportOptions(init_checkpoint=str(tmp_path),
                                                       export_format=export_format))
        assert (other.multi_label_threshold, other.doc_stride) == (None, None)
        assert (other.label_names, other.max_seq_length) == (["a", "b"], 32)


@pytest.mark.slow
def test_an_eval_run_needs_only_the_trained_folder(tmp_path):
    # bert-run-classifier --output_dir=<trained run> --do_eval: the task, its files, the
    # config and the vocab all come from the run folder (its config.json,
    # bert_config.json and vocab.txt), though the run read its model from init_checkpoint.
    released = tmp_path / "released"
    _, config_file = test_run_classifier.tiny_model_files(released)
    test_run_classifier.write_released_checkpoint(released, test_run_classifier.tiny_model(
        test_run_classifier.BertEncoder,
        test_run_classifier.BertConfig.from_json_file(config_file), seed=0))
    write_pairs(tmp_path / "data")
    registry.run("classification", test_run_classifier.options(
        tmp_path, task_name="generic", text_pair_column="text_b", do_train=True,
        num_train_epochs=1.0, max_seq_length=14, init_checkpoint=str(released),
        bert_config_file=None, vocab_file=None, allow_random_encoder=False))
    result = subprocess.run(
        [sys.executable, "-m", "bert_tf.cli.run_classifier",
         f"--output_dir={tmp_path / 'out'}", "--do_eval"], capture_output=True, text=True,
        timeout=600, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stderr.count("come from the trained run's") == 1
    assert "eval_accuracy" in (tmp_path / "out" / "eval_results.txt").read_text()


@pytest.mark.slow
def test_bert_train_reruns_a_config_without_task_or_required_flags(tmp_path):
    # The file names the task and holds task_name / data_dir: none is repeated.
    pair_run(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "bert_tf.cli.train",
         f"--config={tmp_path / 'out' / 'config.json'}", "--nodo_train", "--do_eval",
         "--eval_batch_size=7"], capture_output=True, text=True, timeout=600,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "eval_accuracy" in (tmp_path / "out" / "eval_results.txt").read_text()
