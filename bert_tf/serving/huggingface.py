"""Hugging Face transformers folders: what `AutoModel*.from_pretrained(folder)` reads.

    path = huggingface.export_huggingface(model, export_dir, vocab_file, do_lower_case,
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

(each model type's `hf_architecture` in `bert_tf.serving.registry`). The weight names
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

from bert_tf.serving import export, output_folder, registry
from bert_tf.text.vocab import SPECIAL_TOKENS, VocabFile
from bert_tf.weights import checkpoints
from bert_tf.weights.hugging_face import bert_dict_to_hf_config, google_to_hf_name

# transformers' class without a head: its weight names have no `bert.` prefix.
BASE_MODEL = "BertModel"
# transformers' `problem_type` of a sequence classifier.
PROBLEM_TYPES = ("regression", "single_label_classification", "multi_label_classification")
# transformers classes built without the pooler: its weights are not written there.
_WITHOUT_POOLER = ("BertForMaskedLM", "BertForTokenClassification",
                   "BertForQuestionAnswering")
# Keys of special_tokens_map.json / tokenizer_config.json, in SPECIAL_TOKENS' order.
_SPECIAL_TOKEN_KEYS = ("pad_token", "unk_token", "cls_token", "sep_token", "mask_token")


def check_model_class(model_cls):
    """Raises ValueError, with the formats that hold it, for a model class this export
    has no transformers class for."""
    reason = registry.refusal(model_cls, "huggingface")
    if reason is not None:
        takes = ", ".join(cls.__name__ for cls in registry.classes_for("huggingface"))
        formats = registry.other_formats(model_cls, "huggingface") or "saved_model"
        raise ValueError(f"a {model_cls.__name__} has no Hugging Face export"
                         f"{': ' + reason if reason else ''}; the format takes {takes} "
                         f"(export it with export_format={formats})")


def architecture(model):
    """The transformers class name of `model` (its type's `hf_architecture`).

    Raises:
        ValueError: for a model transformers' BERT classes cannot hold.
    """
    check_model_class(type(model))
    name = registry.for_model(model).hf_architecture
    return name(model) if callable(name) else name


def hf_state_dict(model):
    """The model's weights under the Hugging Face names of its transformers class.

    Returns:
        dict name -> float32 numpy array in torch's layout (Linear weights [out, in]);
        a bare encoder's names have no `bert.` prefix, as `BertModel` saves them. The
        classes that have no pooler (masked LM, token classification, question
        answering) get none, as transformers saves them.
    """
    base_prefix = "" if architecture(model) == BASE_MODEL else "bert."
    without_pooler = architecture(model) in _WITHOUT_POOLER
    state = {}
    for name, (variable, transposed) in checkpoints.google_variable_map(model).items():
        if without_pooler and name.startswith("bert/pooler/"):
            continue
        value = np.asarray(variable.numpy(), np.float32)  # the Keras layout
        value = value.T if transposed else value  # the google-research layout
        hf_name, transpose = google_to_hf_name(name, base_prefix, model.hf_head_names)
        state[hf_name] = np.ascontiguousarray(value.T if transpose else value)
    return state


def hf_config(model, label_names=None, problem_type=None):
    """The `config.json` of `model` (see `export_huggingface` for the arguments)."""
    config = bert_dict_to_hf_config(model.config.to_dict())
    config.update(architectures=[architecture(model)], torch_dtype="float32")
    config.update(label_config(model, label_names, problem_type))
    return config


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


def tokenizer_files(vocab_file, do_lower_case, model_max_length):
    """{file name: text} of the Hugging Face BertTokenizer of `vocab_file`."""
    tokens = VocabFile.read(vocab_file).tokens
    specials = {key: token for key, token in zip(_SPECIAL_TOKEN_KEYS, SPECIAL_TOKENS)
                if token in tokens}
    # strip_accents None: accents are stripped exactly when lower-casing, as here.
    config = {"tokenizer_class": "BertTokenizer", "do_lower_case": bool(do_lower_case),
              "strip_accents": None, "tokenize_chinese_chars": True,
              "model_max_length": model_max_length, **specials}
    return {"vocab.txt": "".join(token + "\n" for token in tokens),
            "tokenizer_config.json": json.dumps(config, indent=2) + "\n",
            "special_tokens_map.json": json.dumps(specials, indent=2) + "\n"}


def export_huggingface(model, export_dir, vocab_file, do_lower_case, label_names=None,
                       problem_type=None, overwrite=False):
    """Writes `model` as a Hugging Face transformers folder (see the module docstring).

    Args:
        model: A built BertEncoder, BertPretrainer, BertClassifier, BertTokenClassifier
            or BertSpanLabeler.
        export_dir: The folder to write: missing or empty, or replaced with `overwrite`.
        vocab_file, do_lower_case: The tokenizer the model was trained with.
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
    architecture(model)
    if not model.built:
        model.build()
    config = export.check_model_and_vocab(model, type(model), vocab_file,
                                          model.config.max_position_embeddings)
    target = output_folder.check_output_folder(export_dir, overwrite)
    files = {"config.json": json.dumps(hf_config(model, label_names, problem_type),
                                       indent=2, sort_keys=True) + "\n",
             **tokenizer_files(vocab_file, do_lower_case, config.max_position_embeddings)}
    state = hf_state_dict(model)

    def write(folder):
        os.makedirs(folder)
        save_file(state, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
        for name, text in files.items():
            with open(os.path.join(folder, name), "w", encoding="utf-8") as file:
                file.write(text)

    output_folder.write_folder(target, write)
    logging.info("Exported %s as a Hugging Face %s folder to %s", type(model).__name__,
                 architecture(model), target)
    return target
