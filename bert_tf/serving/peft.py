"""PEFT adapter folders: what Hugging Face PEFT loads onto the transformers export of a
LoRA model's base (`bert-export-model --export_format=peft` of a LoRA run).

    path = peft.export_peft(model, export_dir, overwrite=False)   # adapters not merged

    # then, in a Python with torch, transformers and peft:
    base = AutoModelForSequenceClassification.from_pretrained(<base's transformers
        export>, num_labels=2)
    model = PeftModel.from_pretrained(base, export_dir)           # our logits

The folder holds `adapter_config.json` (peft_type LORA, `r`, `lora_alpha` (alpha / r is
the scale, as ours), `lora_dropout`, `target_modules` (a regular expression of the
adapted modules' names), `task_type` and `modules_to_save` (the task head, trained in
full)) and `adapter_model.safetensors`, under PEFT's names (its saved state, the
adapter name left out): `base_model.model.bert.encoder.layer.0.attention.self.query.
lora_A.weight` [r, in] (our lora_a [in, r] transposed), `...lora_B.weight` [out, r]
(lora_b transposed), and the head's weights (`base_model.model.classifier.weight`).
A bare encoder's names have no `bert.` (BertModel's modules). A run that trained
encoder LayerNorms or biases too (--lora_train) is refused: export it merged
(--export_format=huggingface).
"""

import json
import os

from absl import logging
from safetensors.numpy import save_file

from bert_tf.layers.dense import Projection
from bert_tf.models import encoder_of
from bert_tf.serving import catalog, formats, huggingface, output_folder, registry
from bert_tf.train import lora
from bert_tf.train.lora_names import TARGETS

FORMAT = "peft"
CONFIG_FILE = "adapter_config.json"
WEIGHTS_FILE = "adapter_model.safetensors"
PREFIX = "base_model.model."  # PeftModel wraps LoraModel wraps the transformers model
# PEFT's task_type of each transformers class (PeftModelForSequenceClassification, ...).
TASK_TYPES = {"BertModel": "FEATURE_EXTRACTION",
              "BertForSequenceClassification": "SEQ_CLS",
              "BertForTokenClassification": "TOKEN_CLS",
              "BertForQuestionAnswering": "QUESTION_ANS"}
# The transformers module of each --lora_targets name, inside `encoder.layer.<i>.`.
MODULES = {"query": r"attention\.self\.query", "key": r"attention\.self\.key",
           "value": r"attention\.self\.value",
           "attention_output": r"attention\.output\.dense",
           "intermediate": r"intermediate\.dense", "output": r"output\.dense"}


def check_model_class(model_cls):
    """Raises ValueError, with the formats that hold it, for a model class whose type
    has no PEFT export (one onto its transformers class)."""
    reason = registry.refusal(model_cls, FORMAT)
    if reason is not None:
        raise ValueError(f"a {model_cls.__name__} has no PEFT export{reason and ': '}"
                         f"{reason}; use --export_format="
                         f"{registry.other_formats(model_cls, FORMAT)}")


def check_source(init_checkpoint, saved) -> None:
    """Refuses, before loading, what is not a LoRA run (its config.json `saved` has no
    --lora_rank), or one that trained encoder LayerNorms or biases (--lora_train), which
    a PEFT LoRA folder does not hold."""
    settings = lora.settings_from_options((saved or {}).get("options") or {})
    if settings is None:
        raise ValueError(f"--export_format={FORMAT} writes the adapters of a LoRA run; "
                         f"{init_checkpoint} is not one (its config.json has no "
                         "--lora_rank): use --export_format=huggingface")
    if settings.train:
        raise ValueError(f"--export_format={FORMAT}: the LoRA run in {init_checkpoint} "
                         f"trained the encoder's {' and '.join(settings.train)} too "
                         f"(--lora_train), which a PEFT LoRA folder does not hold: export "
                         "it merged (--export_format=huggingface)")


def adapter_files(model):
    """(adapter_config.json's dict, adapter_model.safetensors' state) of `model`, a
    model with LoRA adapters (see the module docstring).

    Raises:
      ValueError: `model` has no adapters, or trains encoder variables besides them.
    """
    if not lora.has_adapters(model):
        raise ValueError(f"{type(model).__name__} has no LoRA adapters: "
                         f"--export_format={FORMAT} writes a LoRA run's adapters "
                         "(bert-export-model --init_checkpoint=<a --lora_rank run>)")
    encoder = encoder_of(model)
    extra = [v.path for v in encoder.weights if v.trainable and not lora.is_lora_variable(v)]
    if extra:
        raise ValueError(f"the model trains encoder variables besides its adapters "
                         f"(--lora_train: {extra[0]}, ...), which a PEFT LoRA folder does "
                         f"not hold: export it merged (--export_format=huggingface)")
    name = huggingface.architecture(model)
    if name not in TASK_TYPES:
        raise ValueError(f"a {type(model).__name__} ({name}) has no PEFT task type; "
                         f"expected one of {', '.join(TASK_TYPES)}")
    entries = huggingface.hf_entries(model, name)
    hf_names = {id(variable): hf_name for variable, hf_name, _ in entries}
    state, targets, settings = {}, set(), set()
    for layer in model._flatten_layers(include_self=True):
        if isinstance(layer, Projection) and layer.lora_enabled:
            module = hf_names[id(layer.kernel)].rsplit(".", 1)[0]
            state[f"{PREFIX}{module}.lora_A.weight"] = layer.lora_a.numpy().T.copy()
            state[f"{PREFIX}{module}.lora_B.weight"] = layer.lora_b.numpy().T.copy()
            targets.add(lora.target_of(layer, encoder))
            settings.add((layer.lora_rank, layer.lora_alpha, layer.lora_dropout))
    if len(settings) != 1:
        raise ValueError(f"the adapters have several settings {sorted(settings)}; a PEFT "
                         "LoRA folder holds one rank, alpha and dropout")
    (rank, alpha, dropout), = settings
    inside = {id(variable) for variable in encoder.weights}
    head = {}
    for variable, hf_name, transpose in entries:
        if id(variable) not in inside:
            value = variable.numpy()
            head[f"{PREFIX}{hf_name}"] = (value.T if transpose else value).copy()
    state.update(head)
    modules = "|".join(MODULES[target] for target in TARGETS if target in targets)
    config = {
        "peft_type": "LORA", "task_type": TASK_TYPES[name], "r": rank,
        "lora_alpha": float(rank if alpha is None else alpha),
        "lora_dropout": float(dropout), "bias": "none", "fan_in_fan_out": False,
        "use_rslora": False, "use_dora": False, "inference_mode": True,
        "init_lora_weights": True, "base_model_name_or_path": None, "revision": None,
        "target_modules": rf".*encoder\.layer\.\d+\.({modules})",
        "modules_to_save": sorted({key[len(PREFIX):].rsplit(".", 1)[0] for key in head})
        or None}
    return config, {key: value.astype("float32") for key, value in state.items()}


def export_peft(model, export_dir, overwrite=False):
    """Writes `model`'s adapters (and task head) as a PEFT LoRA folder (see the module
    docstring); `model` keeps its adapters (not merged).

    Args:
      model: A built model with LoRA adapters (`lora.apply_lora`).
      export_dir: The folder to write: missing or empty, or replaced with `overwrite`.
      overwrite: Replace what `export_dir` holds.

    Returns:
      The folder written.
    Raises:
      ValueError / FileExistsError: naming the model or folder at fault, before
        anything is written.
    """
    check_model_class(type(model))
    config, state = adapter_files(model)
    target = output_folder.check_output_folder(export_dir, overwrite)

    def write(folder):
        os.makedirs(folder)
        save_file(state, os.path.join(folder, WEIGHTS_FILE), metadata={"format": "pt"})
        with open(os.path.join(folder, CONFIG_FILE), "w", encoding="utf-8") as file:
            file.write(json.dumps(config, indent=2, sort_keys=True) + "\n")

    output_folder.write_folder(target, write)
    logging.info("Exported the LoRA adapters of %s (rank %d on %s) as a PEFT %s folder "
                 "for transformers' %s to %s: %d tensors", type(model).__name__,
                 config["r"], config["target_modules"], config["task_type"],
                 huggingface.architecture(model), target, len(state))
    return target


formats.register(formats.ExportFormat(
    FORMAT, catalog.EXPORT_FORMATS[FORMAT],
    check=lambda model_cls, request: (check_model_class(model_cls),
                                      check_source(request.source, request.run)),
    write=lambda model, preprocessor, export_dir, request: export_peft(
        model, export_dir, overwrite=request.overwrite),
    keeps_adapters=True, derived_from="huggingface"))
