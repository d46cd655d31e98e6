"""What `bert-export-model` takes from the run it exports: the run's config.json
(`bert_tf.runs.run_config`) gives the model type, labels, pairs, long-document
windows and pooling, the multi-label threshold, max_seq_length and case, so exporting a
run needs no task flag.

    options = export_settings.from_run(options)   # ExportOptions, unset fields filled

An option left unset (None) takes the run's value, else its plain default
(`PLAIN_DEFAULTS`, for released or Hugging Face weights). A flag that contradicts what
the run trained (`TRAINED`: model type, pairs, regression, case) is refused naming both
values; a serving choice (`SERVING_CHOICES`: sequence length, windows, pooling,
threshold, question and answer lengths) may differ from the run's and is logged.
"""

import dataclasses

from absl import logging

from bert_tf.runs import registry as task_registry
from bert_tf.runs import run_config
from bert_tf.serving import registry as model_registry

# Used when neither the flag nor the run sets them (released or HF weights, old runs).
PLAIN_DEFAULTS = {"max_seq_length": 128, "do_lower_case": True, "is_regression": False,
                  "text_pair": False, "window_pooling": "mean", "max_query_length": 64,
                  "max_answer_length": 30}
# What the served model must have been trained with: a different flag is refused (a
# different --model_type or --label_names: by the exporter's own run check).
TRAINED = ("is_regression", "text_pair", "do_lower_case")
# What a server may choose otherwise than the run did (listed in --help of each flag).
SERVING_CHOICES = ("max_seq_length", "doc_stride", "window_pooling",
                   "multi_label_threshold", "max_query_length", "max_answer_length")
# Of the run's settings, those only the SavedModel's raw-text signatures apply (the other
# formats hold the model alone; long-document windows and the threshold are the app's).
SAVED_MODEL_ONLY = ("doc_stride", "window_pooling", "multi_label_threshold")


def run_values(saved: dict) -> dict:
    """The export options a run's config implies ({} for a folder without one)."""
    if not saved:
        return {}
    export = dict(saved.get("export") or {})
    options = saved.get("options") or {}
    values = {"model_type": saved.get("model_type")}
    if saved.get("labels"):
        values["label_names"] = list(saved["labels"])
    for name in ("is_regression", "text_pair", "doc_stride", "window_pooling",
                 "multi_label_threshold", "max_query_length", "max_answer_length"):
        if export.get(name) is not None:
            values[name] = export[name]
    case = run_config.trained_case(saved)
    if case is not None:
        values["do_lower_case"] = case
    if options.get("max_seq_length") is not None:
        values["max_seq_length"] = options["max_seq_length"]
    return {name: value for name, value in values.items() if value is not None}


def from_run(options):
    """`options` (an `ExportOptions`) with what the run at `init_checkpoint` trained.

    Raises:
      ValueError: when a flag contradicts the run (`TRAINED`), naming both values and
        the run's config file.
    """
    saved = run_config.read(options.init_checkpoint)
    trained = run_values(saved)
    if not saved:  # a sentence-transformers folder says as much as a run
        task_registry.model_types()  # the task folders' types, which read such folders
        trained = dict(model_registry.folder_values(options.init_checkpoint))
        saved = {"path": trained.pop("path")} if trained else saved
    if options.export_format != "saved_model":
        trained = {name: value for name, value in trained.items()
                   if name not in SAVED_MODEL_ONLY}
    updates = {}
    for name, value in trained.items():
        given = getattr(options, name, None)
        if name == "label_names" and (given or options.labels_file):
            continue  # checked against the run's labels by the exporter
        if given is None:
            updates[name] = value
        elif name in TRAINED and given != value:
            raise ValueError(
                f"--{name}={given} contradicts the run in {saved['path']}, trained with "
                f"{name}={value}: leave --{name} out to export the model as it was "
                "trained")
        elif name in SERVING_CHOICES and given != value:
            logging.info("Serving with %s=%s (the run used %s)", name, given, value)
    options = dataclasses.replace(options, **updates)
    plain = {name: value for name, value in PLAIN_DEFAULTS.items()
             if getattr(options, name, None) is None}
    if updates:
        logging.info("From the run's %s: %s", saved["path"],
                     ", ".join(f"{name}={value}" for name, value in sorted(updates.items())))
    return dataclasses.replace(options, **plain)
