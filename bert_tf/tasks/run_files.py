"""What a fine-tuning run keeps in its output_dir besides checkpoints: the settings its
checkpoints depend on (`run_settings.json`, checked when a run resumes or exports) and
the label list (`label_list.txt`)."""

import json
import os

from bert_tf import fileio
from bert_tf.weights import checkpoints

RUN_SETTINGS_FILE = "run_settings.json"
LABEL_LIST_FILE = "label_list.txt"


def write_label_list(output_dir: str, labels) -> None:
    """`output_dir/label_list.txt`: one label per line, in label-id order."""
    fileio.write_text_atomic(os.path.join(output_dir, LABEL_LIST_FILE),
                             "".join(label + "\n" for label in labels))


def read_label_list(output_dir: str) -> list:
    """The labels a training run wrote into `output_dir` (`write_label_list`)."""
    path = os.path.join(output_dir, LABEL_LIST_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"label list not found: {path} (written by a training run "
                                "into its output_dir)")
    with open(path, encoding="utf-8") as file:
        return [line.rstrip("\n") for line in file if line.strip()]


def run_settings(options, model_type: str, task: str, labels) -> dict:
    """What a fine-tuning run's checkpoints depend on: model, vocab, case, task, labels."""
    return {"model_type": model_type, "task": task, "labels": labels,
            "bert_config": checkpoints.load_config(options.bert_config_file).to_dict(),
            "vocab_sha256": fileio.file_digest(options.vocab_file),
            "do_lower_case": options.do_lower_case}


def settings_differences(saved: dict, settings: dict) -> list:
    """`name: X there, Y now` for each setting (config field) that differs."""
    differ = []
    for name in sorted(set(saved) | set(settings)):
        there, now = saved.get(name), settings.get(name)
        if name == "bert_config" and isinstance(there, dict) and isinstance(now, dict):
            differ += [f"bert_config {key}: {there.get(key)} there, {now.get(key)} now"
                       for key in sorted(set(there) | set(now)) if there.get(key) != now.get(key)]
        elif name == "vocab_sha256" and there != now:
            differ.append("vocab_file: another vocabulary (its SHA-256 differs)")
        elif there != now:
            differ.append(f"{name}: {there} there, {now} now")
    return differ


def check_run_settings(options, model_type: str, task: str, labels) -> None:
    """Refuses an output_dir that holds a run with other settings; records a new run's.

    Raises:
      ValueError: naming each setting that differs from the output_dir's
        `run_settings.json` (a resumed run would mix two models, or fail on shapes).
    """
    settings = json.loads(json.dumps(run_settings(options, model_type, task, labels)))
    path = os.path.join(options.output_dir, RUN_SETTINGS_FILE)
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as file:
            differ = settings_differences(json.load(file), settings)
        if differ:
            raise ValueError(f"output_dir {options.output_dir} holds a run with other "
                             f"settings ({'; '.join(differ)}): use a new output_dir, or "
                             "remove that one to start over")
    elif options.do_train:
        fileio.write_text_atomic(path, json.dumps(settings, indent=1, sort_keys=True))
