"""Load a trained model from any checkpoint layout and export it (export_model.py's logic).

    path = export_checkpoint.export_from_checkpoint(
        model_type, init_checkpoint, export_dir, bert_config_file=None, vocab_file=None,
        do_lower_case=True, max_seq_length=128, label_names=None, is_regression=False,
        text_pair=False, max_query_length=64, max_answer_length=30, overwrite=False,
        versioned=False)

`init_checkpoint`: a fine-tuning output_dir or `ckpt-<step>` prefix (object-based, as
`bert_tf.train.loop` writes them; needs `bert_config_file` unless one lies beside it), a
google-research checkpoint (folder or prefix) or a Hugging Face folder.
"""

import json
import os

import tensorflow as tf
from absl import logging

from bert_tf import fileio
from bert_tf.weights import checkpoints
from bert_tf.serving import export
from bert_tf.configs import BertConfig
from bert_tf.models import BertEncoder
from bert_tf.tasks.run_files import RUN_SETTINGS_FILE
from bert_tf.text import tokenization
from bert_tf.train import loop


def read_label_names(label_names, labels_file):
    """Label names from the flag list or a file (one per line); None when neither."""
    if labels_file:
        if not os.path.isfile(labels_file):
            raise FileNotFoundError(f"labels_file not found: {labels_file}")
        with open(labels_file, encoding="utf-8") as reader:
            names = [line.strip() for line in reader if line.strip()]
        if not names:
            raise ValueError(f"labels_file {labels_file} lists no labels; expected one a line")
        return names
    return list(label_names) if label_names else None


def _training_checkpoint(path):
    """The prefix of an object-based (TF2) training checkpoint at `path`, else None."""
    prefix = tf.train.latest_checkpoint(path) if os.path.isdir(path) else path
    if not prefix or not tf.io.gfile.exists(prefix + ".index"):
        return None
    names = [name for name, _ in tf.train.list_variables(prefix)]
    if any(name.startswith(("bert/", "cls/")) for name in names):
        return None  # google-research name-based layout
    return prefix if "_CHECKPOINTABLE_OBJECT_GRAPH" in names else None


def load_model(model_type, init_checkpoint, bert_config_file=None, head_kwargs=None):
    """Builds the Keras model of `model_type` and loads its weights.

    Raises:
        FileNotFoundError / ValueError: naming the checkpoint or config at fault.
    """
    model_cls = export.keras_model_class(model_type)
    head_kwargs = head_kwargs or {}
    if not init_checkpoint:
        raise ValueError("--init_checkpoint is required")
    prefix = _training_checkpoint(init_checkpoint)
    if prefix is None:  # released / google-research / Hugging Face weights
        return checkpoints.from_pretrained(model_cls, init_checkpoint,
                                           config=bert_config_file, **head_kwargs)
    config_file = bert_config_file or fileio.file_beside(init_checkpoint, "bert_config.json")
    if not config_file or not os.path.isfile(config_file):
        raise FileNotFoundError(f"{init_checkpoint} is a training checkpoint: pass "
                                "--bert_config_file (the bert_config.json it was trained "
                                f"from); got {config_file!r}")
    encoder = BertEncoder(BertConfig.from_json_file(config_file))
    model = model_cls.from_encoder(encoder, **head_kwargs)
    model.build()
    loop.restore_model(model, prefix)
    logging.info("Loaded %s from training checkpoint %s", model_cls.__name__, prefix)
    return model


def _check_run_settings(init_checkpoint, kind, label_names):
    """Refuses a fine-tuning run of another model type, or with another label count.

    A fine-tuning output_dir records its model type and labels in `run_settings.json`
    (`bert_tf.tasks.base`); heads of different types can have the same variables, so
    without this check a classifier's head would load as a SQuAD head.
    """
    path = fileio.file_beside(init_checkpoint, RUN_SETTINGS_FILE)
    if not path:
        return
    with open(path, encoding="utf-8") as file:
        saved = json.load(file)
    if saved.get("model_type") != kind:
        raise ValueError(f"{init_checkpoint} holds a {saved.get('model_type')} run (task "
                         f"{saved.get('task')}, {path}); --model_type asks for a {kind}: "
                         "pass the model type it was trained as")
    # Names may differ (display names for the ids); their number may not.
    if label_names and saved.get("labels") and len(label_names) != len(saved["labels"]):
        raise ValueError(f"--label_names/--labels_file name {len(label_names)} labels, but "
                         f"the run in {init_checkpoint} was trained with "
                         f"{len(saved['labels'])}: {saved['labels']} (in label-id order)")


def export_from_checkpoint(model_type, init_checkpoint, export_dir, bert_config_file=None,
                           vocab_file=None, do_lower_case=True, max_seq_length=128,
                           label_names=None, is_regression=False, text_pair=False,
                           max_query_length=64, max_answer_length=30, overwrite=False,
                           versioned=False, allow_case_mismatch=False):
    """Loads the model and exports it (see the module docstring). Returns the path."""
    kind = {"squad": "span_labeler", "ner": "token_classifier"}.get(model_type, model_type)
    vocab_file = vocab_file or fileio.file_beside(init_checkpoint, "vocab.txt")
    if not vocab_file:
        raise FileNotFoundError(f"no vocab.txt in {init_checkpoint}; pass --vocab_file")
    if not export_dir:
        raise ValueError("--export_dir is required")
    if not allow_case_mismatch:
        tokenization.check_case_matches(do_lower_case, tokenization.load_vocab(vocab_file),
                                        vocab_file, init_checkpoint)
    export.resolve_export_dir(export_dir, overwrite, versioned)  # fail before loading
    head, options = {}, {}
    if kind in ("classifier", "token_classifier"):
        if is_regression:
            head["num_classes"] = 1
        elif not label_names:
            raise ValueError(f"{kind}: pass --label_names or --labels_file (the class names "
                             "in label-id order)")
        else:
            head["num_classes"] = len(label_names)
        options["label_names"] = None if is_regression else label_names
    if kind == "classifier":
        options.update(is_regression=is_regression, text_pair=text_pair)
    if kind == "span_labeler":
        options.update(max_query_length=max_query_length,
                       max_answer_length=max_answer_length)
    _check_run_settings(init_checkpoint, kind, options.get("label_names"))
    model = load_model(kind, init_checkpoint, bert_config_file, head)
    return export.export_finetuned_model(model, export_dir, kind, vocab_file, do_lower_case,
                                         max_seq_length, overwrite=overwrite,
                                         versioned=versioned, **options)
