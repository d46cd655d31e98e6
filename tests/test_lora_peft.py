"""--export_format=peft: a LoRA model's adapters and head as the folder Hugging Face PEFT
loads onto the transformers export of the base. Without torch: PEFT's key names, shapes
and transposes and the adapter_config.json fields; with torch, transformers and peft
(the `huggingface-test` extra, or the Python BERT_TF_REFERENCE_PYTHON names): PEFT's
logits equal ours."""

import json
import re
import subprocess

import numpy as np
import pytest
from safetensors.numpy import load_file

from bert_tf.models import BertClassifier, BertEncoder
from bert_tf.serving import huggingface, peft
from bert_tf.runs import driver, export_checkpoint
from bert_tf.tasks.classification import task as classification_task
from bert_tf.runs.export_checkpoint import ExportOptions
from bert_tf.train import lora
from contract import encoder_features
from harness import tiny_config, tiny_model
from test_export_formats import reference_python_or_skip
from test_lora import _lora_settings, _random_adapters, _released
from test_run_classifier import options, write_sst2

LAYERS, H, I = 2, 32, 37
PREFIX = "base_model.model."
# Our --lora_targets -> the transformers module inside encoder.layer.<i>.
MODULES = {"query": "attention.self.query", "value": "attention.self.value",
           "output": "output.dense", "intermediate": "intermediate.dense"}


def _lora_model(model_cls, targets, **head):
    model = tiny_model(model_cls, tiny_config(), 0, **head)
    lora.apply_lora(model, lora.LoraSettings(rank=3, alpha=6.0, dropout=0.1,
                                             targets=targets))
    _random_adapters(model, seed=5)
    return model


def _module_names(model):
    """Every module name of the model's transformers class (its weights' owners)."""
    return {name.rsplit(".", 1)[0] for name in huggingface.hf_state_dict(model)}


def test_the_folder_has_peft_names_layouts_and_config(tmp_path):
    targets = ("query", "value", "output")
    model = _lora_model(BertClassifier, targets, num_classes=2)
    peft.export_peft(model, tmp_path / "adapter")
    state = load_file(str(tmp_path / "adapter" / "adapter_model.safetensors"))
    config = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())
    expected = {f"{PREFIX}bert.encoder.layer.{i}.{MODULES[t]}.lora_{ab}.weight"
                for i in range(LAYERS) for t in targets for ab in "AB"}
    assert set(state) == expected | {f"{PREFIX}classifier.weight", f"{PREFIX}classifier.bias"}
    block = model.encoder.transformer_layers[1]
    for target, (width_in, width_out) in (("query", (H, H)), ("output", (I, H))):
        projection = lora.target_projection(block, target)
        key = f"{PREFIX}bert.encoder.layer.1.{MODULES[target]}"
        assert state[f"{key}.lora_A.weight"].shape == (3, width_in)  # PEFT: [r, in]
        assert state[f"{key}.lora_B.weight"].shape == (width_out, 3)  # [out, r]
        np.testing.assert_array_equal(state[f"{key}.lora_A.weight"],
                                      projection.lora_a.numpy().T)
        np.testing.assert_array_equal(state[f"{key}.lora_B.weight"],
                                      projection.lora_b.numpy().T)
    kernel, = [v for v in model.weights if v.path.endswith("classifier/dense/kernel")]
    np.testing.assert_array_equal(state[f"{PREFIX}classifier.weight"],
                                  kernel.numpy().T)  # [labels, H]
    assert (config["peft_type"], config["task_type"], config["r"], config["lora_alpha"],
            config["lora_dropout"], config["bias"], config["modules_to_save"]) == \
        ("LORA", "SEQ_CLS", 3, 6.0, pytest.approx(0.1), "none", ["classifier"])
    # The regular expression adapts exactly the modules the adapters were on (PEFT
    # matches it in full against the transformers model's module names).
    adapted = {name for name in _module_names(model)
               if re.fullmatch(config["target_modules"], name)}
    assert adapted == {key[len(PREFIX):].rsplit(".", 2)[0] for key in expected}
    assert any(name.endswith("attention.output.dense") for name in _module_names(model))
    assert lora.has_adapters(model)  # the model keeps its adapters


def test_a_bare_encoder_has_bertmodel_names_and_no_head(tmp_path):
    model = _lora_model(BertEncoder, ("query", "intermediate"))
    peft.export_peft(model, tmp_path / "adapter")
    state = load_file(str(tmp_path / "adapter" / "adapter_model.safetensors"))
    config = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())
    assert sorted(state)[0] == f"{PREFIX}encoder.layer.0.attention.self.query.lora_A.weight"
    assert len(state) == LAYERS * 2 * 2 and state[
        f"{PREFIX}encoder.layer.0.intermediate.dense.lora_B.weight"].shape == (I, 3)
    assert (config["task_type"], config["modules_to_save"]) == ("FEATURE_EXTRACTION", None)


def test_what_a_peft_folder_cannot_hold_is_refused(tmp_path):
    plain = tiny_model(BertClassifier, tiny_config(), 0, num_classes=2)
    with pytest.raises(ValueError, match="has no LoRA adapters: --export_format=peft"):
        peft.export_peft(plain, tmp_path / "a")
    lora.apply_lora(plain, lora.LoraSettings(rank=2, train=("bias",)))
    with pytest.raises(ValueError, match=r"trains encoder variables besides its adapters "
                                         r"\(--lora_train: .*bias"):
        peft.export_peft(plain, tmp_path / "a")
    assert not (tmp_path / "a").exists()


@pytest.fixture
def lora_run(tmp_path):
    """A LoRA run of SST-2 on a released tiny base: (its output_dir, its trained model)."""
    write_sst2(tmp_path / "data", train=16, dev=5)
    _released(tmp_path)
    outcome = driver.execute(classification_task.ClassificationTask(options(
        tmp_path, do_train=True, **_lora_settings(tmp_path))))
    return tmp_path / "out", outcome.runner.model


def test_bert_export_model_writes_a_lora_runs_adapters(lora_run, tmp_path):
    out, model = lora_run
    path = export_checkpoint.export_from_checkpoint(ExportOptions(
        init_checkpoint=str(out), export_dir=str(tmp_path / "adapter"),
        export_format="peft"))
    state = load_file(str(tmp_path / "adapter" / "adapter_model.safetensors"))
    trained = lora.target_projection(model.encoder.transformer_layers[0], "output")
    np.testing.assert_array_equal(
        state[f"{PREFIX}bert.encoder.layer.0.output.dense.lora_B.weight"],
        trained.lora_b.numpy().T)
    assert path == str(tmp_path / "adapter") and len(state) == LAYERS * 3 * 2 + 2
    # A run without adapters: refused before anything is loaded or written.
    with pytest.raises(ValueError, match=r"--export_format=peft writes the adapters of a "
                                         r"LoRA run; .*released is not one"):
        export_checkpoint.export_from_checkpoint(ExportOptions(
            init_checkpoint=str(tmp_path / "released"), model_type="encoder",
            vocab_file=str(tmp_path / "vocab.txt"), export_dir=str(tmp_path / "b"),
            export_format="peft"))
    assert not (tmp_path / "b").exists()


PEFT_SCRIPT = r"""
import json, sys
import numpy as np, torch, transformers, peft
request = json.load(open(sys.argv[1]))
base = transformers.AutoModelForSequenceClassification.from_pretrained(
    request["base"], num_labels=2)
model = peft.PeftModel.from_pretrained(base, request["adapter"]).eval()
inputs = {key: torch.tensor(value) for key, value in request["inputs"].items()}
with torch.no_grad():
    np.save(sys.argv[2], model(**inputs).logits.numpy())
"""


def test_peft_loads_the_adapters_onto_the_base_export_with_our_logits(lora_run, tmp_path):
    python = reference_python_or_skip(("torch", "transformers", "peft"))
    out, model = lora_run
    export_checkpoint.export_from_checkpoint(ExportOptions(
        init_checkpoint=str(out), export_dir=str(tmp_path / "adapter"),
        export_format="peft"))
    export_checkpoint.export_from_checkpoint(ExportOptions(  # the base, as transformers'
        init_checkpoint=str(tmp_path / "released"), model_type="encoder",
        vocab_file=str(tmp_path / "vocab.txt"), export_dir=str(tmp_path / "base"),
        export_format="huggingface"))
    features = encoder_features(8, 6)
    ours = model(features, training=False)["logits"].numpy()
    request = {"base": str(tmp_path / "base"), "adapter": str(tmp_path / "adapter"),
               "inputs": {"input_ids": np.asarray(features["input_ids"]).tolist(),
                          "attention_mask": np.asarray(features["input_mask"]).tolist(),
                          "token_type_ids": np.asarray(features["segment_ids"]).tolist()}}
    (tmp_path / "request.json").write_text(json.dumps(request))
    result = subprocess.run([python, "-c", PEFT_SCRIPT, str(tmp_path / "request.json"),
                             str(tmp_path / "logits.npy")], capture_output=True, text=True,
                            timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    np.testing.assert_allclose(np.load(tmp_path / "logits.npy"), ours, atol=1e-5, rtol=0)
