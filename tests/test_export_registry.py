"""Export formats as a registry (`bert_tf.serving.formats`): every format is a registered
object that `bert-export-model` looks up; a format of one's own is one registration; no
code outside the formats dispatches on a format's name."""

import pathlib
import re

import numpy as np
import pytest

import test_run_classifier
from bert_tf.serving import catalog, formats
from bert_tf.serving import registry as model_registry
from bert_tf.runs import export_checkpoint
from bert_tf.tasks.classification import task as classification_task

REPO = pathlib.Path(__file__).resolve().parent.parent


def test_what_registers_is_what_the_catalog_declares():
    # bert-export-model's --help reads the catalog (no TensorFlow); the writers and the
    # model types register against its names, every task's loaded (export_checkpoint).
    assert formats.names() == tuple(catalog.EXPORT_FORMATS)
    assert {name: formats.get(name).help for name in formats.names()} == \
        catalog.EXPORT_FORMATS
    assert model_registry.names() == catalog.MODEL_TYPES


def test_every_format_is_registered_with_a_check_a_writer_and_help():
    names = formats.names()
    assert {"saved_model", "huggingface", "keras_hub", "tfhub", "litert", "onnx", "peft",
            "sentence_transformers"} <= set(names)
    help_text = next(spec.help for spec in export_checkpoint.options_lib.option_specs(
        export_checkpoint.ExportOptions) if spec.name == "export_format")
    for name in names:
        fmt = formats.get(name)
        assert callable(fmt.check) and callable(fmt.write) and fmt.help
        assert f"{name}: " in help_text
    assert [name for name in names if formats.get(name).versioned] == ["saved_model"]
    assert {name for name in names if formats.get(name).quantizes} == {"litert", "onnx"}


def test_no_module_dispatches_on_a_format_name():
    # The exporter and the runner ask the format's record, never its name.
    for path in ("bert_tf/runs/export_checkpoint.py", "bert_tf/runs/driver.py"):
        source = (REPO / path).read_text()
        found = re.findall(r"export_format\s*(?:==|!=|in\s*\()", source)
        assert not found, f"{path} dispatches on --export_format: {found}"


def _trained_run(tmp_path):
    test_run_classifier.write_sst2(tmp_path / "data")
    options = test_run_classifier.options(tmp_path, do_train=True, num_train_epochs=1.0)
    classification_task.run(options)
    return options


def test_a_format_of_ones_own_is_one_registration(tmp_path):
    run = _trained_run(tmp_path)
    written = {}

    def write(model, preprocessor, export_dir, request):
        pathlib.Path(export_dir).mkdir(parents=True)
        np.savez(pathlib.Path(export_dir) / "weights.npz",
                 **{v.path.replace("/", "."): v.numpy() for v in model.weights})
        written.update(request=request, vocab=preprocessor.vocab_file)
        return export_dir
    formats.register(formats.ExportFormat(
        "weights_npz", "every weight in one .npz", check=lambda model_cls, request: None,
        write=write))
    try:
        path = export_checkpoint.export_from_checkpoint(export_checkpoint.ExportOptions(
            init_checkpoint=str(tmp_path / "out"), export_dir=str(tmp_path / "npz"),
            export_format="weights_npz", vocab_file=run.vocab_file))
    finally:
        formats.unregister("weights_npz")
    saved = np.load(pathlib.Path(path) / "weights.npz")
    assert any(name.startswith("classifier") or "output" in name for name in saved.files)
    request = written["request"]
    assert request.model_type == "classifier" and request.label_names == ["0", "1"]
    assert written["vocab"] == run.vocab_file


def test_an_unknown_format_is_refused_naming_the_registered_ones(tmp_path):
    with pytest.raises(ValueError, match="--export_format=npz is not an export format; "
                                         "expected one of saved_model, "):
        export_checkpoint.export_from_checkpoint(export_checkpoint.ExportOptions(
            init_checkpoint=str(tmp_path), model_type="classifier",
            export_dir=str(tmp_path / "e"), export_format="npz"))
    assert not (tmp_path / "e").exists()
    with pytest.raises(ValueError, match="registered already"):
        formats.register(formats.get("onnx"))
