"""Pretrained weights: google-research TF1 checkpoints (read/write) and Hugging Face.

Variables are matched by the google-research names (`bert/embeddings/word_embeddings`,
`bert/encoder/layer_3/attention/self/query/kernel`, `cls/predictions/output_bias`, ...)
through a fixed table built from the model's structure (`google_variable_map`), not
from Keras variable paths: the encoder's names here, the head's from the model class
(`EncoderHeadModel.google_head_entries`). Hugging Face names are first translated to
those names (with the class's `hf_head_names`).

Public API:
    load_google_checkpoint(model, ckpt_prefix) -> LoadReport
    save_google_checkpoint(model, prefix, write_config=False)
    load_hf_weights(model, path) -> LoadReport   (BERT or ELECTRA folders)
    load_training_checkpoint(model, prefix) -> LoadReport   (a bert_tf run's encoder)
    load_pretrained_weights(model, path) -> LoadReport   (any of the formats)
    load_config(path) -> BertConfig   (bert_config.json or a Hugging Face config.json)
    from_pretrained(model_cls, path, config=None, ...) -> model
    build_model(model_cls, config, **head_kwargs) -> model   (weights fresh)

Which checkpoint a run folder names (its best/ one, kept by --best_metric, before its
latest) is `training_checkpoints`' (`training_checkpoint`, `best_checkpoint`).

`load_pretrained_weights` and `from_pretrained` refuse an encoder that would start
partly random (`load_report.check_encoder`) unless `allow_random_encoder`.
"""

import json
import os
import re

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf.io import fileio
from bert_tf import library_logs
from bert_tf.io import write_errors
from bert_tf.configs import BertConfig
from bert_tf.layers.dense import is_lora_variable
from bert_tf.models import BertEncoder, encoder_of
from bert_tf.models.checkpoint_names import encoder_entries
from bert_tf.weights.hugging_face import (hf_config_to_bert_dict, hf_parts,
                                          hf_to_google_name, read_safetensors)
from bert_tf.weights import training_checkpoints
from bert_tf.weights.load_report import LoadReport, check_encoder, name_list

# Checkpoint entries that are not model weights: optimizer slots and counters.
_SKIPPED_PATTERN = re.compile(
    r"(^|/)(global_step|_CHECKPOINTABLE_OBJECT_GRAPH|good_steps|loss_scale)$"
    r"|/(adam_m|adam_v|Adam|Adam_1|lamb_m|lamb_v|Momentum|ExponentialMovingAverage)$")
# google-research/electra names its discriminator (a BERT encoder) `electra/`, where this
# package's table and google-research/bert say `bert/`.
ELECTRA_SCOPE = "electra/"
# What a model whose variables have no checkpoint name lacks.
UNNAMED_HINT = ("a head model names its head's variables in `google_head_entries()` "
                "(bert_tf.models.EncoderHeadModel) and registers its model type once with "
                "bert_tf.serving.registry.register(ModelType(...))")


def google_variable_map(model):
    """google-research name -> (Keras variable, transposed) for every model variable.

    `transposed` means the checkpoint stores the kernel as [out, in]
    (`cls/seq_relationship/output_weights` and the fine-tuning heads of
    run_classifier / run_squad). The encoder's names are the same in every model; a
    head model's class names its head (`google_head_entries`).

    Raises:
        ValueError: naming the variables that have no name (and how to give them one).
    """
    if not model.built:
        model.build()
    encoder = encoder_of(model)
    entries = encoder_entries(encoder)
    if model is not encoder:
        entries.update(model.google_head_entries())
    covered = {id(variable) for variable, _ in entries.values()}
    # LoRA adapters have no google-research name: they are merged before a TF1 save.
    missing = [v.path for v in model.weights
               if id(v) not in covered and not is_lora_variable(v)]
    if missing:
        raise ValueError(f"{type(model).__name__}: variables without a checkpoint name: "
                         f"{name_list(missing)}; {UNNAMED_HINT}.")
    return entries


def _assign_from_source(model, source, shapes, get_value):
    """Assigns every model variable found in `shapes`; returns the LoadReport.

    Args:
        source: Path for messages.
        shapes: dict google name -> shape (list) of what the checkpoint holds.
        get_value: google name -> numpy array, in the google-research layout.
    """
    entries = google_variable_map(model)
    report = LoadReport(source=str(source))
    mismatches = []
    for name, (variable, transposed) in entries.items():
        if name not in shapes:
            report.newly_initialized.append(name)
            continue
        expected = tuple(variable.shape[::-1] if transposed else variable.shape)
        if tuple(shapes[name]) != expected:
            mismatches.append(f"{name}: checkpoint shape {tuple(shapes[name])}, model "
                              f"variable {variable.path} needs {expected}")
            continue
        report.loaded.append(name)
    if mismatches:
        raise ValueError(f"{source}: shape mismatch for {len(mismatches)} variable(s) "
                         "(another hidden_size, vocab_size or head?): "
                         + name_list(mismatches, 3))
    for name in report.loaded:
        variable, transposed = entries[name]
        value = np.asarray(get_value(name))
        variable.assign(value.T if transposed else value)
    for name in sorted(shapes):
        if name in entries:
            continue
        (report.skipped if _SKIPPED_PATTERN.search(name) else report.unmatched).append(name)
    return report


def load_google_checkpoint(model, ckpt_prefix, log_report=True):
    """Loads a google-research (TF1, name-based) checkpoint into a built BERT model.

    Args:
        model: BertEncoder, BertPretrainer or a task model.
        ckpt_prefix: Checkpoint prefix, e.g. `.../bert_model.ckpt`.
        log_report: Log the report at INFO (a caller that completes the load logs its
            own).

    Returns:
        LoadReport. Raises ValueError naming each variable whose shapes disagree.
    """
    encoder_of(model)  # a BERT model, or TypeError naming what it got
    ckpt_prefix = fileio.path_argument(ckpt_prefix, "ckpt_prefix", "a checkpoint prefix")
    if not tf.io.gfile.exists(ckpt_prefix + ".index"):
        raise FileNotFoundError(f"TF checkpoint not found: {ckpt_prefix}.index does not "
                                "exist (expected a prefix like .../bert_model.ckpt).")
    reader = tf.train.load_checkpoint(ckpt_prefix)
    stored_shapes = reader.get_variable_to_shape_map()
    stored = {name: name for name in stored_shapes}
    if not any(name.startswith("bert/") for name in stored):
        # google-research/electra's discriminator is `electra/...`
        stored = {("bert/" + name[len(ELECTRA_SCOPE):] if name.startswith(ELECTRA_SCOPE)
                   else name): name for name in stored}
    shapes = {ours: stored_shapes[theirs] for ours, theirs in stored.items()}
    report = _assign_from_source(model, ckpt_prefix, shapes,
                                 lambda name: reader.get_tensor(stored[name]))
    if log_report:
        logging.info("%s", report.summary())
    return report


def save_google_checkpoint(model, prefix, write_config=False, encoder_scope="bert/"):
    """Writes the model's weights as a TF1 name-based checkpoint at `prefix`.

    Readable by `tf.train.load_checkpoint` and google-research/bert's init_checkpoint.
    Files are written under a temporary prefix and renamed when complete.

    Args:
        model: A built BERT model.
        prefix: Output prefix, e.g. `out/bert_model.ckpt`.
        write_config: Also write `bert_config.json` next to the checkpoint.
        encoder_scope: The encoder's names' first part: "bert/", or `ELECTRA_SCOPE`
            for google-research/electra's layout (`load_google_checkpoint` reads both).
    """
    encoder_of(model)  # a BERT model, or TypeError naming what it got
    prefix = fileio.path_argument(prefix, "prefix", "a checkpoint prefix")
    entries = {(encoder_scope + name[len("bert/"):] if name.startswith("bert/") else name):
               entry for name, entry in google_variable_map(model).items()}
    names = sorted(entries)
    tensors = []
    for name in names:
        variable, transposed = entries[name]
        value = tf.convert_to_tensor(variable.value)
        tensors.append(tf.transpose(value) if transposed else value)
    directory = os.path.dirname(prefix) or "."
    tf.io.gfile.makedirs(directory)
    tmp_prefix = fileio.temporary_path(prefix)
    data_suffix = ".data-00000-of-00001"
    try:
        tf.raw_ops.SaveV2(prefix=tmp_prefix, tensor_names=names,
                          shape_and_slices=[""] * len(names), tensors=tensors)
    except tf.errors.OpError as error:  # a file too large, a full disk, read-only
        for partial in (tmp_prefix + data_suffix, tmp_prefix + ".index"):
            if tf.io.gfile.exists(partial):
                tf.io.gfile.remove(partial)
        raise write_errors.classify(error, directory) or error
    tf.io.gfile.rename(tmp_prefix + data_suffix, prefix + data_suffix, overwrite=True)
    tf.io.gfile.rename(tmp_prefix + ".index", prefix + ".index", overwrite=True)
    if write_config:
        encoder_of(model).config.to_json_file(os.path.join(directory, "bert_config.json"))
    logging.info("Wrote %d variables to %s", len(names), prefix)


def load_hf_weights(model, path, log_report=True):
    """Loads Hugging Face BERT or ELECTRA weights (`model.safetensors`, or a folder
    holding it; a head that is a model of its own, ELECTRA's generator, from the
    subfolder named after it when there is one: `hugging_face.hf_parts`).

    Returns:
        LoadReport with google-research names; HF names that translate to nothing are
        listed as unmatched under their HF name.
    """
    path = os.fspath(path)
    file_path = os.path.join(path, "model.safetensors") if os.path.isdir(path) else path
    if not os.path.isfile(file_path):
        raise FileNotFoundError(f"Hugging Face weights not found: {file_path} (expected "
                                "model.safetensors; convert pytorch_model.bin first).")
    # The parts first: what they share with the model (embeddings) is the model's.
    parts = {subfolder: (part, load_hf_weights(part, os.path.join(path, subfolder)))
             for subfolder, part in hf_parts(model).items()
             if os.path.isfile(os.path.join(path, subfolder, "model.safetensors"))}
    hf_tensors = read_safetensors(file_path)
    values, unmatched, skipped = {}, [], []
    for hf_name, value in hf_tensors.items():
        google_name, transpose, skip = hf_to_google_name(hf_name, model.hf_head_names)
        if skip:
            skipped.append(hf_name)
        elif google_name is None:
            unmatched.append(hf_name)
        else:
            values[google_name] = value.T if transpose else value
    shapes = {name: list(value.shape) for name, value in values.items()}
    report = _assign_from_source(model, file_path, shapes, values.__getitem__)
    report.unmatched.extend(sorted(unmatched))
    report.skipped.extend(sorted(skipped))
    for subfolder, (part, part_report) in parts.items():
        _add_part_report(report, model, part, part_report, subfolder)
    if log_report:  # after the HF names nothing translates
        logging.info("%s", report.summary())
    return report


def _add_part_report(report, model, part, part_report, subfolder):
    """Counts what `part_report` (of the head `part`, from `subfolder`) loaded as loaded
    in `report`, under `model`'s names; its unmatched names are prefixed `subfolder/`."""
    ours = {id(entry[0]): name for name, entry in google_variable_map(model).items()}
    theirs = google_variable_map(part)
    loaded = {ours[id(theirs[name][0])] for name in part_report.loaded}
    report.loaded.extend(name for name in report.newly_initialized if name in loaded)
    report.newly_initialized[:] = [name for name in report.newly_initialized
                                   if name not in loaded]
    report.unmatched.extend(f"{subfolder}/{name}" for name in part_report.unmatched)


def load_training_checkpoint(model, prefix, log_report=True):
    """Loads the encoder of a bert_tf training checkpoint (a fine-tuning or pre-training
    output_dir) into `model`; its head, another task's, is not read.

    Returns:
        LoadReport: the encoder's google-research names loaded, the rest newly
        initialised; encoder tensors of the checkpoint that the model lacks (more
        layers) as unmatched.
    Raises:
        ValueError: when an encoder variable's shape differs or it is missing.
    """
    encoder = encoder_of(model)
    training_checkpoints.read_training_encoder(encoder, prefix)
    report = LoadReport(source=str(prefix))
    encoder_ids = {id(variable) for variable in encoder.weights}
    for name, (variable, _) in google_variable_map(model).items():
        (report.loaded if id(variable) in encoder_ids
         else report.newly_initialized).append(name)
    stored = [name for name, _ in tf.train.list_variables(prefix)
              if name.startswith("model/encoder/") and name.endswith("VARIABLE_VALUE")]
    if len(stored) > len(encoder.weights):
        ours = {f"model/encoder/{variable.path.split('/', 1)[-1]}" for variable in
                encoder.weights}
        report.unmatched.extend(name for name in stored
                                if name.rsplit("/.ATTRIBUTES", 1)[0] not in ours)
    if log_report:  # off when the caller reads the heads next and logs the whole load
        logging.info("%s", report.summary())
    return report


def resolve_location(path):
    """Returns (kind, weights_path, config_path or None) for a pretrained location."""
    path = os.fspath(path)
    if os.path.isdir(path):
        if os.path.isfile(os.path.join(path, "model.safetensors")):
            return "hf", path, os.path.join(path, "config.json")
        prefix = os.path.join(path, "bert_model.ckpt")
        if not tf.io.gfile.exists(prefix + ".index"):
            prefix = training_checkpoints.latest_or_best(path)
        if prefix is None:
            raise FileNotFoundError(
                f"{path}: no bert_model.ckpt.index, TF `checkpoint` file or "
                "model.safetensors found; expected a google-research or Hugging Face "
                "BERT folder, or a bert_tf output_dir.")
        kind = "training" if training_checkpoints.is_training_checkpoint(prefix) else "google"
        return kind, prefix, os.path.join(path, "bert_config.json")
    if tf.io.gfile.exists(path + ".index"):
        kind = "training" if training_checkpoints.is_training_checkpoint(path) else "google"
        return kind, path, os.path.join(os.path.dirname(path), "bert_config.json")
    if path.endswith(".safetensors") and os.path.isfile(path):
        return "hf", path, os.path.join(os.path.dirname(path), "config.json")
    raise FileNotFoundError(f"pretrained weights not found at {path}: expected a folder, "
                            "a checkpoint prefix (with .index) or a .safetensors file.")


_LOADERS = {"hf": load_hf_weights, "google": load_google_checkpoint,
            "training": load_training_checkpoint}


def load_pretrained_weights(model, path, allow_random_encoder=False, log_report=True):
    """Loads any supported checkpoint location (see `from_pretrained`) into `model`;
    logs its `LoadReport` at INFO unless `log_report` is False (`warm_start.start_from`
    reads the heads too, then logs what the whole load did).

    Raises:
        ValueError: when encoder variables would start random or encoder tensors of the
            checkpoint would be dropped, unless `allow_random_encoder`.
    """
    kind, weights_path, _ = resolve_location(path)
    report = _LOADERS[kind](model, weights_path, log_report=log_report)
    check_encoder(report, allow_random_encoder)
    return report


def _load_config(config, default_path):
    if config is not None and not isinstance(config, (str, os.PathLike)):
        return config
    config_path = os.fspath(config) if config is not None else default_path
    if not os.path.isfile(config_path):
        raise FileNotFoundError(f"BERT config not found: {config_path}; pass `config=`.")
    return load_config(config_path)


def load_config(path):
    """The BertConfig of a google-research bert_config.json or a Hugging Face config.json."""
    if os.path.basename(path) == "config.json":
        with open(path, encoding="utf-8") as file:
            return BertConfig.from_dict(hf_config_to_bert_dict(json.load(file), path),
                                        source=path)
    return BertConfig.from_json_file(path)


def build_model(model_cls, config, **head_kwargs):
    """A built `model_cls` (any BERT model class) around a new encoder of `config`
    (BertConfig), its weights freshly initialised."""
    model = model_cls.from_encoder(BertEncoder(config), **head_kwargs)
    model.build()
    return model


def from_pretrained(model_cls, path, config=None, return_report=False,
                    allow_random_encoder=False, **head_kwargs):
    """Builds `model_cls` from its config and loads the weights found at `path`.

    Args:
        model_cls: BertEncoder, BertPretrainer or a task model class (BertClassifier, ...).
        path: A google-research folder (bert_config.json + bert_model.ckpt.*), a
            TF1 checkpoint prefix (config beside it or passed as `config`), or a
            Hugging Face folder (config.json + model.safetensors).
        config: BertConfig, dict or path of a bert_config.json; overrides the one
            found beside the checkpoint.
        return_report: Also return the `LoadReport`.
        allow_random_encoder: Accept a checkpoint that leaves encoder variables random
            or whose encoder tensors do not fit (`load_report.check_encoder`).
        **head_kwargs: Passed to the model class (e.g. `num_classes`).

    Returns:
        The model, or (model, report) when `return_report`.
    """
    if not (isinstance(model_cls, type) and issubclass(model_cls, keras.Model)):
        raise TypeError(f"model_cls must be a model class (BertEncoder, BertClassifier, "
                        f"...), got {type(model_cls).__name__}: {str(model_cls)[:60]!r}")
    library_logs.show_info_logs()  # called from Python: the load report shows
    kind, weights_path, config_path = resolve_location(
        fileio.path_argument(path, "path", "a checkpoint folder or prefix"))
    model = build_model(model_cls, _load_config(config, config_path), **head_kwargs)
    report = _LOADERS[kind](model, weights_path)
    check_encoder(report, allow_random_encoder)
    return (model, report) if return_report else model
