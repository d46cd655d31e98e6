"""A run's config: `output_dir/config.json`, written at the start of every run and read
by everything that later reads the run folder (evaluation, prediction, a next run's
`--init_checkpoint`, feature extraction, `bert-export-model`).

    config = run_config.describe(task, context)   # after task.setup(context)
    run_config.write(context.output_dir, config)
    saved = run_config.read("/tmp/mrpc/ckpt-343")  # {} for released / HF weights

The file is JSON, one key per line group, so that two runs diff:

    {"format": 1, "command": "classifier", "task": "classification/mrpc",
     "model_type": "classifier", "labels": ["0", "1"],
     "options": {every option of the command: "max_seq_length": 128, ...},
     "model": {bert_config.json's fields}, "export": {the task's serving settings},
     "vocab": {"sha256": "...", "do_lower_case": true}}

`--config=<output_dir>/config.json` reruns from it (`bert_tf.command_line`: its
"options", with flags given on the command line winning). Folders written before
config.json existed hold `run_settings.json` (model type, task, labels, bert_config,
vocab digest, case): `read` returns it in the same shape, without "options".
"""

import json
import os
from typing import Optional

from bert_tf import fileio
from bert_tf import options as options_lib
from bert_tf.tasks import run_context

CONFIG_FILE = "config.json"
# What the output_dir's settings check writes too, and all folders of earlier versions hold.
LEGACY_SETTINGS_FILE = run_context.RUN_SETTINGS_FILE
FORMAT_VERSION = 1


def describe(task, context) -> dict:
    """The whole resolved configuration of a run (`task` after its `setup`)."""
    vocab = context.vocab
    return {
        "format": FORMAT_VERSION,
        "command": task.command,
        "task": task.name,
        "model_type": task.model_type,
        "labels": task.labels,
        "options": options_lib.options_to_dict(context.options),
        "model": context.config.to_dict(),
        "export": task.export_options(),
        "vocab": {"sha256": vocab.sha256 if vocab else None,
                  "do_lower_case": getattr(context.options, "do_lower_case", None)},
    }


def write(output_dir: str, config: dict) -> str:
    """Writes `output_dir/config.json` (atomically); returns its path."""
    path = os.path.join(output_dir, CONFIG_FILE)
    fileio.write_text_atomic(path, json.dumps(config, indent=1, sort_keys=True,
                                              default=fileio.json_default) + "\n")
    return path


def run_folder(path: Optional[str]) -> Optional[str]:
    """The run folder that `path` (a run's output_dir, one of its checkpoint prefixes, or
    a prefix in its `best/`) belongs to, when it holds a config; else None."""
    folder = fileio.run_folder_of(path)
    if folder is None:
        return None
    for name in (CONFIG_FILE, LEGACY_SETTINGS_FILE):
        if os.path.isfile(os.path.join(folder, name)):
            return folder
    return None


def read(path: Optional[str]) -> dict:
    """The config of the run that `path` belongs to (see `run_folder`), with "path" set
    to the file read; {} when `path` is not a run of bert_tf (released or HF weights).

    A folder of an earlier version gives its run_settings.json in the same shape.
    A config.json written by Hugging Face (a transformers folder) is not a run's.

    Raises:
      ValueError: when the run's file is not valid JSON, naming it.
    """
    folder = run_folder(path)
    if folder is None:
        return {}
    for name in (CONFIG_FILE, LEGACY_SETTINGS_FILE):
        file_path = os.path.join(folder, name)
        if not os.path.isfile(file_path):
            continue
        try:
            with open(file_path, encoding="utf-8") as file:
                saved = json.load(file)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ValueError(f"{file_path} is not valid JSON ({error}): the run's config "
                             "is damaged; remove it to use the folder's weights alone"
                             ) from None
        if name == CONFIG_FILE and "format" not in saved:
            continue  # a transformers config.json, not a run's
        if name == LEGACY_SETTINGS_FILE:
            saved = {"task": saved.get("task"), "model_type": saved.get("model_type"),
                     "labels": saved.get("labels"), "model": saved.get("bert_config"),
                     "vocab": {"sha256": saved.get("vocab_sha256"),
                               "do_lower_case": saved.get("do_lower_case")}}
        return dict(saved, path=file_path)
    return {}


def trained_case(saved: dict):
    """The do_lower_case the run `saved` trained with (None: not recorded)."""
    case = (saved.get("options") or {}).get("do_lower_case")
    return case if case is not None else (saved.get("vocab") or {}).get("do_lower_case")


def same_model(saved: dict, model_type: str, task_name: str, labels) -> bool:
    """Whether the run `saved` trained this very model: its head fits and means the same
    (model type, task and labels equal), so its checkpoints restore whole."""
    return (bool(saved) and saved.get("model_type") == model_type
            and saved.get("task") == task_name and saved.get("labels") == labels)

