"""Hugging Face transformers folders: what `AutoModel*.from_pretrained(folder)` reads.

    path = huggingface.export_huggingface(model, preprocessor, export_dir,
                                          label_names=None, problem_type=None,
                                          overwrite=False)
    state = huggingface.hf_state_dict(model)   # Hugging Face name -> numpy (torch layout)

The folder holds `config.json` (the BERT fields, `architectures`, `id2label` /
`label2id`, `problem_type`), `model.safetensors` (float32) and the tokenizer's
`vocab.txt`, `tokenizer_config.json` (`do_lower_case`) and `special_tokens_map.json`.

| bert_tf model | transformers class |
| --- | --- |
| BertEncoder | BertModel |
| BertPretrainer | BertForPreTraining (BertForMaskedLM without a next-sentence head) |
| BertClassifier | BertForSequenceClassification |
| BertTokenClassifier | BertForTokenClassification |
| BertSpanLabeler | BertForQuestionAnswering |

(each model type's `hf_architecture` in `bert_tf.serving.registry`). A model whose
config has `embedding_size` (narrower embeddings projected to hidden_size, as
ELECTRA-Small) becomes transformers' Electra class of the same head (`ElectraModel`,
`ElectraForMaskedLM`, `ElectraForTokenClassification`, `ElectraForQuestionAnswering`;
`model_type` "electra" in config.json), since BertModel has no projection; a sequence
classifier of such a config has none (ElectraForSequenceClassification's head is
another) and is refused. An ELECTRA pre-training model is `ElectraForPreTraining` (the
discriminator and its head) with its generator, an `ElectraForMaskedLM`, in the
subfolder `generator/` (`bert_tf.weights.hugging_face.hf_parts`). The weight names
come from `bert_tf.weights.hugging_face.google_to_hf_name` (with the model class's own
`hf_head_names`), the inverse of the names the loader reads, so `bert_tf.weights.checkpoints.from_pretrained`
reads the folder back (a folder without a pooler leaves this encoder's pooler random,
which those models' outputs do not use). The tied decoder of the masked-LM head is not
written: transformers ties it to the word embeddings when it loads.
"""

import json
import os

import numpy as np
from absl import logging
from safetensors.numpy import save_file

from bert_tf.models import encoder_of
from bert_tf.serving import catalog, export, formats, output_folder, registry
from bert_tf.text.vocab import SPECIAL_TOKENS
from bert_tf.weights import checkpoints
from bert_tf.weights.hugging_face import (BERT_MODEL_TYPES, ELECTRA_MODEL_TYPE,
                                          bert_dict_to_hf_config, google_to_hf_name,
                                          hf_parts)

# transformers' classes without a head: their weight names have no `bert.` prefix.
BASE_MODELS = ("BertModel", "ElectraModel")
# transformers' `problem_type` of a sequence classifier.
PROBLEM_TYPES = ("regression", "single_label_classification", "multi_label_classification")
# transformers' BERT classes built without the pooler (as every Electra class): its
# weights are not written there.
_WITHOUT_POOLER = ("BertForMaskedLM", "BertForTokenClassification",
                   "BertForQuestionAnswering")
# transformers' Electra class of a BERT class, for a config with `embedding_size`: the
# same head over an encoder that projects its embeddings.
_ELECTRA_CLASSES = {"BertModel": "ElectraModel", "BertForMaskedLM": "ElectraForMaskedLM",
                    "BertForTokenClassification": "ElectraForTokenClassification",
                    "BertForQuestionAnswering": "ElectraForQuestionAnswering"}
# Why the other BERT classes have none.
_NO_ELECTRA_CLASS = {
    "BertForSequenceClassification": "transformers' ElectraForSequenceClassification "
                                     "head is dense + gelu + out_proj on the first token, "
                                     "not this classifier's tanh pooler + dense",
    "BertForPreTraining": "transformers' ElectraForMaskedLM has no next-sentence head "
                          "(a BertPretrainer with next_sentence=False exports)"}
# The formats that hold a model with an embedding projection and any head.
_PROJECTION_FORMATS = "saved_model or litert"
# ElectraForMaskedLM's head applies the exact GELU whatever config.hidden_act says.
_ELECTRA_MASKED_LM_ACT = "gelu"
# Keys of special_tokens_map.json / tokenizer_config.json, in SPECIAL_TOKENS' order.
_SPECIAL_TOKEN_KEYS = ("pad_token", "unk_token", "cls_token", "sep_token", "mask_token")


def check_model_class(model_cls):
    """Raises ValueError, with the formats that hold it, for a model class this export
    has no transformers class for."""
    reason = registry.refusal(model_cls, "huggingface")
    if reason is not None:
        takes = ", ".join(cls.__name__ for cls in registry.classes_for("huggingface"))
        others = registry.other_formats(model_cls, "huggingface") or "saved_model"
        raise ValueError(f"a {model_cls.__name__} has no Hugging Face export"
                         f"{': ' + reason if reason else ''}; the format takes {takes} "
                         f"(export it with export_format={others})")


def architecture(model):
    """The transformers class name of `model` (its type's `hf_architecture`; the
    Electra class of the same head when its config has `embedding_size`).

    Raises:
        ValueError: for a model transformers' BERT and Electra classes cannot hold.
    """
    check_model_class(type(model))
    name = _registered_architecture(model)
    if name.startswith("Bert") and encoder_of(model).embeddings_project is not None:
        name = electra_class(model, name)
    return name


def _registered_architecture(model):
    """The `hf_architecture` of `model`'s type."""
    name = registry.for_model(model).hf_architecture
    return name(model) if callable(name) else name


def electra_class(model, bert_class, within=None):
    """transformers' Electra class of `model`, whose BERT class is `bert_class`.

    Args:
        model: A BERT model.
        bert_class: Its transformers BERT class.
        within: What `model` is a part of, in words, for a part of an ELECTRA model.

    Raises:
        ValueError: when no Electra class computes what `model` does, saying why (and,
            for a model of its own, which formats hold it).
    """
    config = model.config
    why = _NO_ELECTRA_CLASS.get(bert_class)
    if bert_class not in _ELECTRA_CLASSES and why is None:
        why = f"transformers has no Electra class of {bert_class}'s head"
    if bert_class == "BertForMaskedLM" and config.hidden_act != _ELECTRA_MASKED_LM_ACT:
        why = (f"transformers' ElectraForMaskedLM head applies gelu whatever hidden_act "
               f"says; this one applies hidden_act={config.hidden_act!r}")
    if not why:
        return _ELECTRA_CLASSES[bert_class]
    if within:
        raise ValueError(f"{within}, a {type(model).__name__}, has no transformers Electra "
                         f"class: {why}")
    raise ValueError(f"a {type(model).__name__} whose config has embedding_size="
                     f"{config.embedding_width} (hidden_size {config.hidden_size}) has no "
                     f"Hugging Face export: transformers' BERT classes have no embedding "
                     f"projection, and {why}; export it with "
                     f"export_format={_PROJECTION_FORMATS}")


def hf_state_dict(model, name=None):
    """The model's weights under the Hugging Face names of its transformers class.

    Args:
        model: A BERT model.
        name: Its transformers class (default: `architecture(model)`; a part's
            Electra class, see `folder_contents`).

    Returns:
        dict name -> float32 numpy array in torch's layout (Linear weights [out, in]);
        a bare encoder's names have no `bert.` (`electra.`) prefix, as `BertModel`
        saves them. The classes that have no pooler (masked LM, token classification,
        question answering, every Electra class) get none, as transformers saves them.
        The heads that are folders of their own (`hf_parts`) are not in it.
    """
    return {hf_name: np.ascontiguousarray(
                np.asarray(variable.numpy(), np.float32).T if transpose
                else np.asarray(variable.numpy(), np.float32))
            for variable, hf_name, transpose in hf_entries(model, name)}


def hf_entries(model, name=None):
    """(Keras variable, its Hugging Face name, whether torch's layout is its transpose)
    of each weight `hf_state_dict` writes (same arguments), in its order."""
    name = name or architecture(model)
    electra = name.startswith("Electra")
    base_prefix = "" if name in BASE_MODELS else BERT_MODEL_TYPES[
        ELECTRA_MODEL_TYPE if electra else "bert"]
    without_pooler = electra or name in _WITHOUT_POOLER
    shared = {id(variable) for variable in encoder_of(model).weights}
    elsewhere = {id(variable) for part in hf_parts(model).values()
                 for variable in part.weights} - shared
    entries = []
    for google, (variable, transposed) in checkpoints.google_variable_map(model).items():
        if id(variable) in elsewhere or (without_pooler
                                         and google.startswith("bert/pooler/")):
            continue
        # Keras layout -> google-research's (transposed) -> torch's (transpose).
        hf_name, transpose = google_to_hf_name(google, base_prefix, model.hf_head_names,
                                               electra=electra)
        entries.append((variable, hf_name, bool(transposed) != bool(transpose)))
    return entries


def hf_config(model, label_names=None, problem_type=None, name=None):
    """The `config.json` of `model` (see `export_huggingface` for the arguments; `name`
    as in `hf_state_dict`)."""
    name = name or architecture(model)
    config = bert_dict_to_hf_config(model.config.to_dict(),
                                    electra=name.startswith("Electra"))
    config.update(architectures=[name], torch_dtype="float32")
    config.update(label_config(model, label_names, problem_type))
    return config


def folder_contents(model, label_names=None, problem_type=None):
    """{subfolder ("" for the folder itself): (config.json dict, state dict)} of
    `model`: its own, and one per head that is a folder of its own (`hf_parts`: an
    ELECTRA model's generator, an ElectraForMaskedLM, whatever its widths).

    Raises:
        ValueError: for a model or part that transformers cannot hold.
    """
    contents = {"": (hf_config(model, label_names, problem_type), hf_state_dict(model))}
    electra = architecture(model).startswith("Electra")
    for subfolder, part in hf_parts(model).items():
        check_model_class(type(part))
        name = _registered_architecture(part)
        if name.startswith("Bert") and (electra or encoder_of(part).embeddings_project
                                         is not None):
            name = electra_class(part, name, f"{type(model).__name__}'s {subfolder} "
                                             f"(written to {subfolder}/)")
        contents[subfolder] = (hf_config(part, name=name), hf_state_dict(part, name))
    return contents


def label_config(model, label_names=None, problem_type=None):
    """The `problem_type` (a sequence classifier's), `id2label` and `label2id` (a head
    of one output per label) of `model`'s transformers config, checked.

    Raises:
        ValueError: for labels or a problem type that do not fit the model.
    """
    entry, config = registry.for_model(model), {}
    if entry.hf_problem_type:
        problem_type = problem_type or ("regression" if model.num_classes == 1
                                        else "single_label_classification")
        if problem_type not in PROBLEM_TYPES:
            raise ValueError(f"problem_type must be one of {', '.join(PROBLEM_TYPES)}, "
                             f"got {problem_type!r}")
        if (problem_type == "regression") != (model.num_classes == 1):
            raise ValueError(f"problem_type {problem_type!r} does not fit a classifier of "
                             f"{model.num_classes} outputs (regression has exactly one)")
        config["problem_type"] = problem_type
        if problem_type == "regression":
            label_names = label_names or ["LABEL_0"]
    elif problem_type is not None:
        classifiers = " or ".join(other.model_class.__name__ for other in registry.types()
                                  if other.hf_problem_type)
        raise ValueError(f"problem_type is for a {classifiers}, not a "
                         f"{type(model).__name__}")
    if entry.labelled:
        names = export.check_label_names(label_names, model.num_classes)
        config["id2label"] = dict(enumerate(names))
        config["label2id"] = {name: index for index, name in enumerate(names)}
    return config


def tokenizer_files(preprocessor, model_max_length):
    """{file name: text} of the Hugging Face BertTokenizer of `preprocessor` (its vocab,
    read once, and case)."""
    tokens, do_lower_case = preprocessor.vocab.tokens, preprocessor.do_lower_case
    specials = {key: token for key, token in zip(_SPECIAL_TOKEN_KEYS, SPECIAL_TOKENS)
                if token in tokens}
    # strip_accents None: accents are stripped exactly when lower-casing, as here.
    config = {"tokenizer_class": "BertTokenizer", "do_lower_case": bool(do_lower_case),
              "strip_accents": None, "tokenize_chinese_chars": True,
              "model_max_length": model_max_length, **specials}
    return {"vocab.txt": "".join(token + "\n" for token in tokens),
            "tokenizer_config.json": json.dumps(config, indent=2) + "\n",
            "special_tokens_map.json": json.dumps(specials, indent=2) + "\n"}


def folder_writer(model, preprocessor, label_names=None, problem_type=None):
    """Checks `model` and `preprocessor` (see `export_huggingface`) and returns
    `write(folder)`, which writes the Hugging Face files into the new folder `folder`
    and logs nothing (a format that holds such a folder, sentence-transformers', says
    where its own export went).

    Raises:
        ValueError / FileNotFoundError: naming the model type, vocab or labels at fault.
    """
    architecture(model)
    if not model.built:
        model.build()
    config = export.check_model_and_vocab(model, type(model), preprocessor,
                                          min_seq_length=None)
    tokenizer = tokenizer_files(preprocessor, config.max_position_embeddings)
    contents = folder_contents(model, label_names, problem_type)

    def write(folder):
        for subfolder, (hf_config_dict, state) in contents.items():
            path = os.path.join(folder, subfolder)
            os.makedirs(path)
            save_file(state, os.path.join(path, "model.safetensors"),
                      metadata={"format": "pt"})
            files = {"config.json": json.dumps(hf_config_dict, indent=2, sort_keys=True)
                     + "\n", **tokenizer}
            for name, text in files.items():
                with open(os.path.join(path, name), "w", encoding="utf-8") as file:
                    file.write(text)
    return write


def export_huggingface(model, preprocessor, export_dir, label_names=None, problem_type=None,
                       overwrite=False):
    """Writes `model` as a Hugging Face transformers folder (see the module docstring).

    Args:
        model: A built BertEncoder, BertPretrainer, BertClassifier, BertTokenClassifier,
            BertSpanLabeler or ELECTRA pre-training model (its generator in
            `export_dir/generator`).
        preprocessor: The `Preprocessor` the model was trained with (its vocab and case
            make the tokenizer files; `model_max_length` is the model's
            max_position_embeddings).
        export_dir: The folder to write: missing or empty, or replaced with `overwrite`.
        label_names: Class / tag names in label-id order (`id2label`; default "0", ...).
        problem_type: A classifier's transformers `problem_type` (default: "regression"
            for one output, else "single_label_classification").
        overwrite: Replace what `export_dir` holds.

    Returns:
        The folder written.
    Raises:
        ValueError / FileNotFoundError / FileExistsError: naming the model type, vocab,
            labels or folder at fault, before anything is written.
    """
    write = folder_writer(model, preprocessor, label_names, problem_type)
    target = output_folder.check_output_folder(export_dir, overwrite)
    output_folder.write_folder(target, write)
    logging.info("Exported %s as a Hugging Face %s folder to %s", type(model).__name__,
                 architecture(model), target)
    return target


formats.register(formats.ExportFormat(
    "huggingface", catalog.EXPORT_FORMATS["huggingface"],
    check=lambda model_cls, request: check_model_class(model_cls),
    write=lambda model, preprocessor, export_dir, request: export_huggingface(
        model, preprocessor, export_dir, label_names=request.label_names,
        problem_type=request.problem_type, overwrite=request.overwrite)))
