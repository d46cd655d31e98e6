"""Load a trained model from any checkpoint layout and export it (bert-export-model).

    path = export_checkpoint.export_from_checkpoint(ExportOptions(
        model_type="classifier", init_checkpoint="/tmp/mrpc", export_dir="/models/mrpc",
        label_names=["0", "1"], text_pair=True))

`init_checkpoint`: a fine-tuning output_dir or `ckpt-<step>` prefix (object-based, as
`bert_tf.train.loop` writes them; needs `bert_config_file` unless one lies beside it), a
google-research checkpoint (folder or prefix) or a Hugging Face folder. The config and
the vocab are resolved once, as a run's (`bert_tf.runs.run_context`).

`export_format`: a registered format (`bert_tf.serving.formats`): "saved_model" (TF
Serving), "huggingface", "keras_hub", "tfhub", "litert", "onnx", "peft" (a LoRA run's
adapters), "sentence_transformers", or one of your own; each names its writer and what it
takes. Every format but "peft" merges a LoRA run's adapters into its weights.
"""

import dataclasses
import os

from absl import logging

from bert_tf.io import fileio
from bert_tf import options as options_lib
from bert_tf.models import EncoderHeadModel
from bert_tf.serving import export, formats, output_folder
from bert_tf.serving import registry as model_registry
from bert_tf.runs import export_settings, lora_run, run_config, run_context, run_groups
from bert_tf.runs import registry as task_registry
from bert_tf.runs import option_groups as groups
from bert_tf.runs.export_options import ExportOptions
from bert_tf.text import vocab as vocab_lib
from bert_tf.text.preprocessor import Preprocessor
from bert_tf.text.vocab import VocabFile
from bert_tf.train import lora, loop
from bert_tf.weights import checkpoints, training_checkpoints

# Every task's model type registered (each task's module registers its own as it loads).
MODEL_TYPES = task_registry.model_types()
ENCODER = "encoder"  # the model type every run holds
# The task a multi-label classification run of an earlier version named in its
# run_settings.json (its config.json says "multi_label" in its serving settings).
EARLIER_MULTI_LABEL_TASK = "classification/generic-multi-label"


def read_label_names(label_names, labels_file):
    """Label names from the flag list or a file (one per line); None when neither."""
    if labels_file:
        if not os.path.isfile(labels_file):
            raise FileNotFoundError(f"labels_file not found: {labels_file}")
        names = [line.strip() for _, line in fileio.iter_text_lines(labels_file)
                 if line.strip()]
        if not names:
            raise ValueError(f"labels_file {labels_file} lists no labels; expected one a line")
        return names
    return list(label_names) if label_names else None


def load_model(model_type, options, head_kwargs=None):
    """Builds the Keras model of `model_type` and loads its weights from
    `options.init_checkpoint` (a run's whole model; an encoder from any checkpoint; a
    model type with its own loader, `ModelType.load`, loads itself). A LoRA run's
    checkpoint (its config.json records --lora_rank) loads onto its base checkpoint,
    with its adapters, which are then merged into the kernels (`lora_run.load`): the
    model returned is an ordinary one (with `options.export_format` "peft", the
    adapters are kept).

    Raises:
        FileNotFoundError / ValueError: naming the checkpoint or config at fault.
    """
    head_kwargs = head_kwargs or {}
    init_checkpoint, bert_config_file = options.init_checkpoint, options.bert_config_file
    if not init_checkpoint:
        raise ValueError("--init_checkpoint is required")
    run_context.check_init_checkpoint(init_checkpoint)
    config_file = run_context.resolve_config_file(bert_config_file, init_checkpoint)
    entry = model_registry.get(model_type)
    prefix = training_checkpoints.training_checkpoint(init_checkpoint)
    saved = run_config.read(init_checkpoint) if prefix else {}
    adapters = lora.settings_from_options(saved.get("options") or {})
    if adapters:
        return _load_lora_run(entry, prefix, config_file, adapters, head_kwargs, saved,
                              merge=not formats.get(getattr(
                                  options, "export_format", "saved_model")).keeps_adapters)
    if entry.load is not None:
        if not config_file or not os.path.isfile(config_file):
            raise FileNotFoundError(f"no bert_config.json in or beside {init_checkpoint}; "
                                    "pass --bert_config_file")
        return entry.load(init_checkpoint, checkpoints.load_config(config_file))
    model_cls = entry.model_class
    if prefix is None or not issubclass(model_cls, EncoderHeadModel):  # any encoder's
        return checkpoints.from_pretrained(
            model_cls, init_checkpoint, config=config_file,
            allow_random_encoder=options.allow_random_encoder, **head_kwargs)
    if not config_file or not os.path.isfile(config_file):
        raise FileNotFoundError(f"{init_checkpoint} is a training checkpoint: pass "
                                "--bert_config_file (the bert_config.json it was trained "
                                f"from); got {config_file!r}")
    model = checkpoints.build_model(model_cls, checkpoints.load_config(config_file),
                                    **head_kwargs)
    loop.restore_model(model, prefix)
    logging.info("Loaded %s from training checkpoint %s", model_cls.__name__, prefix)
    return model


def _load_lora_run(entry, prefix, config_file, settings, head_kwargs, saved, merge=True):
    """The model of `entry` from LoRA run checkpoint `prefix` (its config `saved`): its
    base, adapters and head, the adapters merged unless not `merge` (`lora_run.load`)."""
    if entry.load is not None:  # a loader of its own would not add the adapters
        raise ValueError(f"{prefix} is a LoRA run (--lora_rank={settings.rank}): "
                         f"exporting it as {entry.name} is not supported; export its "
                         "model type or the encoder")
    if not config_file or not os.path.isfile(config_file):
        raise FileNotFoundError(f"{prefix} is a training checkpoint: pass "
                                "--bert_config_file (the bert_config.json it was trained "
                                f"from); got {config_file!r}")
    return lora_run.load(entry.model_class, prefix, config_file, settings, saved,
                         head_kwargs, merge=merge)


def _check_run_settings(init_checkpoint, saved, model_type, label_names):
    """Refuses a fine-tuning run of another model type, or labels that mean other classes.

    A run records its model type and labels in its config.json (`run_config`; older
    folders: run_settings.json); heads of different types can have the same variables,
    so without this check a classifier's head would load as a SQuAD head. The encoder
    of any run may be exported alone.
    """
    if not saved or model_type == model_registry.get(ENCODER).name:
        return
    if saved.get("model_type") != model_type:
        raise ValueError(f"{init_checkpoint} holds a {saved.get('model_type')} run (task "
                         f"{saved.get('task')}, {saved['path']}); --model_type asks for a "
                         f"{model_type}: pass the model type it was trained as")
    trained = saved.get("labels")
    if not (label_names and trained):
        return
    if len(label_names) != len(trained):
        raise ValueError(f"--label_names/--labels_file name {len(label_names)} labels, but "
                         f"the run in {init_checkpoint} was trained with "
                         f"{len(trained)}: {trained} (in label-id order)")
    # Display names for the ids are fine; a trained label at another id is a swap.
    moved = [f"{name!r} is class {trained.index(name)} there, {index} here"
             for index, name in enumerate(label_names) if name in trained
             and trained.index(name) != index]
    if moved:
        raise ValueError(f"--label_names/--labels_file {label_names} do not follow the "
                         f"label ids of the run in {init_checkpoint} ({'; '.join(moved)}): "
                         f"list them as trained, {trained}, or leave them out to use those")
    if label_names != trained:
        logging.info("Serving the run's labels %s under the names %s", trained, label_names)


def _head_and_signature_options(model_type, options, label_names):
    """(head kwargs of the model class, kwargs of the exporter) for `model_type`: the
    number of labels of a labelled head, and its type's `signature_options`."""
    entry = model_registry.get(model_type)
    head, signature = {}, {}
    if entry.labelled:
        if options.is_regression:
            head["num_classes"] = 1
        elif not label_names:
            raise ValueError(f"{model_type}: pass --label_names or --labels_file (the class names "
                             "in label-id order)")
        else:
            head["num_classes"] = len(label_names)
        signature["label_names"] = None if options.is_regression else label_names
    signature.update((name, getattr(options, name)) for name in entry.signature_options)
    return head, signature


def _check_format_and_export_dir(fmt, options, model_type, request):
    """Refuses what format `fmt` cannot hold (`ExportFormat.check`: the model type, a
    missing optional package), a setting it does not take and an export_dir it would not
    write, before the model is loaded."""
    replace = "pass --overwrite to replace it"
    if options.quantize != "none" and not fmt.quantizes:
        takers = [name for name in formats.names() if formats.get(name).quantizes]
        raise ValueError(f"--quantize={options.quantize} quantizes a LiteRT or ONNX model "
                         f"(--export_format={' or '.join(takers)}); --export_format="
                         f"{fmt.name} writes float32 weights: leave --quantize out")
    if options.versioned and not fmt.versioned:
        raise ValueError(f"--versioned writes the next version of a TF Serving model base "
                         f"path (--export_format=saved_model); --export_format={fmt.name} "
                         "writes --export_dir itself")
    fmt.check(model_registry.get(model_type).model_class, request)
    if fmt.versioned:
        export.resolve_export_dir(options.export_dir, options.overwrite, options.versioned,
                                  hint=f"{replace}, or --versioned to write the next "
                                       "version beside it")
    else:
        output_folder.check_output_folder(options.export_dir, options.overwrite,
                                          hint=replace)


def _problem_type(model_type, options, saved):
    """transformers' problem_type of a classifier: regression, multi-label (as the run in
    init_checkpoint was) or None (one label of several)."""
    if not model_registry.get(model_type).hf_problem_type:
        return None
    if options.is_regression:
        return "regression"
    # A run's config says it in its serving settings; run_settings.json of a folder of
    # an earlier version, by the multi-label task's name.
    if (saved.get("export") or {}).get("multi_label") or \
            saved.get("task") == EARLIER_MULTI_LABEL_TASK:
        return "multi_label_classification"
    return None


def _check_threshold(fmt, options, problem_type):
    """Refuses a --multi_label_threshold that the export would not use."""
    threshold = options.multi_label_threshold
    if threshold is None:
        return
    groups.check_threshold(threshold)
    if problem_type != "multi_label_classification":
        raise ValueError(
            f"--multi_label_threshold={threshold} applies to the "
            f"classifier of a --multi_label run; {options.init_checkpoint} is not one (its "
            "config.json names another task, or there is none): leave the flag out")
    if not fmt.thresholds:
        raise ValueError(
            f"--multi_label_threshold sets the SavedModel's predicted labels; "
            f"--export_format={options.export_format} gives logits or probabilities only "
            "(the threshold is the caller's): leave the flag out")


def export_from_checkpoint(options: ExportOptions) -> str:
    """Loads the model and exports it (see the module docstring). Returns the path."""
    options_lib.check_choices(options)
    if not options.init_checkpoint:
        raise ValueError("--init_checkpoint is required")
    fmt = formats.get(options.export_format)
    options = dataclasses.replace(  # a folder of several seeds or trials: its best run
        options, init_checkpoint=run_groups.best_run(options.init_checkpoint))
    options = export_settings.from_run(options)  # what the run trained, unless given
    options.check()
    if not options.model_type:
        raise ValueError(f"--model_type is required: {options.init_checkpoint} holds no "
                         "bert_tf run (no config.json or run_settings.json) to take it from")
    vocab_file = options.vocab_file or fileio.file_beside(options.init_checkpoint, "vocab.txt")
    if not vocab_file:
        raise FileNotFoundError(f"no vocab.txt in {options.init_checkpoint}; pass "
                                "--vocab_file")
    if not options.export_dir:
        raise ValueError("--export_dir is required")
    vocab = VocabFile.read(vocab_file)
    if not options.allow_case_mismatch:
        vocab_lib.check_case_matches(options.do_lower_case, vocab.tokens, vocab_file,
                                     options.init_checkpoint)
    model_type = model_registry.get(options.model_type).name
    # --overwrite never removes what the export reads (a run folder, its vocab).
    fileio.check_outputs_apart(
        {"--export_dir": options.export_dir},
        {"--init_checkpoint": options.init_checkpoint, "--vocab_file": vocab_file,
         "--bert_config_file": options.bert_config_file,
         "--labels_file": options.labels_file})
    saved = run_config.read(options.init_checkpoint)
    problem_type = _problem_type(model_type, options, saved)
    _check_threshold(fmt, options, problem_type)
    # Without names, a fine-tuning run's own label list (in label-id order) serves.
    label_names = read_label_names(options.label_names, options.labels_file) or \
        saved.get("labels")
    head, signature = _head_and_signature_options(model_type, options, label_names)
    request = formats.ExportRequest(
        model_type=model_type, label_names=signature.pop("label_names", None),
        problem_type=problem_type, quantize=options.quantize, overwrite=options.overwrite,
        versioned=options.versioned, source=options.init_checkpoint, run=saved,
        signature=dict(signature, **({"multi_label_threshold": options.multi_label_threshold}
                                     if options.multi_label_threshold is not None else {})))
    _check_format_and_export_dir(fmt, options, model_type, request)  # before loading
    _check_run_settings(options.init_checkpoint, saved, model_type, request.label_names)
    model = load_model(model_type, options, head)
    # A classifier's pairing is the run's; other models read what their type reads.
    preprocessor = Preprocessor(
        vocab, options.do_lower_case, options.max_seq_length,
        text_pair=options.text_pair if model_registry.get(model_type).hf_problem_type
        else None)
    return fmt.write(model, preprocessor, options.export_dir, request)
