"""The run context: what a run resolves once and hands down (config, vocab, tokenizer,
strategy, what lies at `init_checkpoint` and in `output_dir`, the run settings).

    context = RunContext.create(options)   # checks; reads bert_config.json and vocab.txt
    context.config, context.vocab, context.tokenizer, context.strategy

No other module of a run reads the config or the vocab again: the tasks, the feature
caches, the run settings and the export all take them from here.
"""

import dataclasses
import fnmatch
import functools
import json
import os
from typing import Optional

import tensorflow as tf
from absl import logging

from bert_tf.io import fileio
from bert_tf.configs import BertConfig
from bert_tf.text import tokenization
from bert_tf.text import vocab as vocab_lib
from bert_tf.text.preprocessor import Preprocessor
from bert_tf.text.vocab import VocabFile
from bert_tf.train import distribute
from bert_tf.weights import checkpoints

RUN_SETTINGS_FILE = "run_settings.json"
LABEL_LIST_FILE = "label_list.txt"


def check_init_checkpoint(init_checkpoint: Optional[str]) -> None:
    """Raises FileNotFoundError unless `init_checkpoint` is a folder, a checkpoint prefix
    (with .index) or a .safetensors file."""
    if init_checkpoint and not (
            os.path.isdir(init_checkpoint)
            or tf.io.gfile.exists(init_checkpoint + ".index")
            or init_checkpoint.endswith(".safetensors")):
        raise FileNotFoundError(f"init_checkpoint not found: {init_checkpoint} "
                                "(expected a folder or a checkpoint prefix with .index)")


def resolve_config_file(bert_config_file, init_checkpoint) -> Optional[str]:
    """`bert_config_file`, else the bert_config.json (or HF config.json) in or beside
    `init_checkpoint`."""
    return (bert_config_file or fileio.file_beside(init_checkpoint, "bert_config.json")
            or fileio.file_in_folder(init_checkpoint, "config.json"))


def resolve_vocab_file(vocab_file, init_checkpoint) -> Optional[str]:
    """`vocab_file`, else the vocab.txt in an `init_checkpoint` folder."""
    return vocab_file or fileio.file_in_folder(init_checkpoint, "vocab.txt")


def make_strategy(options):
    """The strategy the options name (a TPU that cannot be reached: a ValueError naming it)."""
    strategy = distribute.get_strategy(options.distribution_strategy, options.num_gpus,
                                       options.tpu_name, options.tpu_zone,
                                       options.gcp_project)
    cores = getattr(options, "num_tpu_cores", None)
    if options.distribution_strategy == "tpu" and cores and \
            cores != strategy.num_replicas_in_sync:
        logging.warning("num_tpu_cores=%d, but TPUStrategy found %d cores; using %d", cores,
                        strategy.num_replicas_in_sync, strategy.num_replicas_in_sync)
    logging.info("Strategy %s with %d replica(s)", type(strategy).__name__,
                 strategy.num_replicas_in_sync)
    return strategy


@dataclasses.dataclass
class RunContext:
    """Resolved once per run (see the module docstring); made by `RunContext.create`."""
    options: object
    config: BertConfig
    config_file: Optional[str]
    vocab: Optional[VocabFile]
    strategy: object

    @classmethod
    def create(cls, options, strategy=None, needs_vocab=True):
        """Checks the options, reads the config and the vocab once, makes the strategy.

        Args:
          options: A `TrainingOptions` (or subclass), checked here (`options.check()`);
            a `bert_config` attribute holding a
            `BertConfig` is used instead of reading `bert_config_file`.
          strategy: Use this strategy instead of the one the options name.
          needs_vocab: Fine-tuning runs tokenize: the vocab is required.

        Raises:
          ValueError / FileNotFoundError: naming the option at fault, before any work.
        """
        options.check()
        if not options.output_dir:
            raise ValueError("output_dir is required")
        check_init_checkpoint(options.init_checkpoint)
        # A trained output_dir is a model folder too (an eval-only run of it).
        config_file = (resolve_config_file(options.bert_config_file, options.init_checkpoint)
                       or fileio.file_in_folder(options.output_dir, "bert_config.json"))
        config = getattr(options, "bert_config", None)
        if config is None:
            if not config_file:
                raise ValueError("bert_config_file is required (or an init_checkpoint "
                                 "folder holding it)")
            if not os.path.isfile(config_file):
                raise FileNotFoundError(f"bert_config_file not found: {config_file}")
            config = checkpoints.load_config(config_file)
        vocab = _read_vocab(options, needs_vocab)
        if vocab is not None:
            vocab_lib.check_vocab_matches(len(vocab.tokens), vocab.path, config.vocab_size,
                                          config_file or "the config")
        if options.max_seq_length > config.max_position_embeddings:
            raise ValueError(f"max_seq_length {options.max_seq_length} exceeds "
                             f"max_position_embeddings {config.max_position_embeddings} of "
                             f"{config_file or 'the config'}")
        fileio.check_output_dir(options.output_dir)
        os.makedirs(options.output_dir, exist_ok=True)
        return cls(options, config, config_file, vocab, strategy or make_strategy(options))

    @functools.cached_property
    def tokenizer(self) -> tokenization.FullTokenizer:
        """The run's tokenizer, on the vocab read once."""
        return tokenization.FullTokenizer(self.vocab, do_lower_case=self.options.do_lower_case)

    def preprocessor(self, text_pair=None) -> Preprocessor:
        """The run's text settings (vocab read once, case, max_seq_length) as the
        `Preprocessor` that exports and the Python library take."""
        return Preprocessor(self.vocab, self.options.do_lower_case,
                            self.options.max_seq_length, text_pair=text_pair)

    @property
    def output_dir(self) -> str:
        return self.options.output_dir

    def latest_checkpoint(self) -> Optional[str]:
        """The newest training checkpoint in output_dir (None on a fresh run)."""
        return tf.train.latest_checkpoint(self.options.output_dir)

    def run_settings(self, model_type: str, task: str, labels) -> dict:
        """What the run's checkpoints depend on: model, vocab, case, task, labels."""
        return {"model_type": model_type, "task": task, "labels": labels,
                "bert_config": self.config.to_dict(),
                "vocab_sha256": self.vocab.sha256 if self.vocab else None,
                "do_lower_case": getattr(self.options, "do_lower_case", None)}

    def check_run_settings(self, model_type: str, task: str, labels) -> None:
        """Refuses an output_dir that holds a run with other settings; records a new run's.

        Raises:
          ValueError: naming each setting that differs from the output_dir's
            `run_settings.json` (a resumed run would mix two models, or fail on shapes).
        """
        settings = json.loads(json.dumps(self.run_settings(model_type, task, labels)))
        path = os.path.join(self.output_dir, RUN_SETTINGS_FILE)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as file:
                differ = settings_differences(json.load(file), settings)
            if differ:
                raise ValueError(f"output_dir {self.output_dir} holds a run with other "
                                 f"settings ({'; '.join(differ)}): use a new output_dir, or "
                                 "remove that one to start over")
        elif self.options.do_train:
            fileio.write_text_atomic(path, json.dumps(settings, indent=1, sort_keys=True))

    def write_model_files(self) -> None:
        """`bert_config.json` and `vocab.txt` beside the run's checkpoints, so that its
        output_dir is a model folder (an init_checkpoint of a next run, extraction,
        export) without further flags. Files already there are kept."""
        config_path = os.path.join(self.output_dir, "bert_config.json")
        if not os.path.exists(config_path):
            self.config.to_json_file(config_path)
        vocab_path = os.path.join(self.output_dir, "vocab.txt")
        if self.vocab is None and not os.path.exists(vocab_path):
            logging.warning("No vocab.txt in %s: pass --vocab_file (the vocab of the "
                            "training records) so that the run folder is a complete model "
                            "for fine-tuning and export", self.output_dir)
        elif self.vocab is not None and not os.path.exists(vocab_path):
            self.vocab.write(vocab_path)


def _read_vocab(options, needs_vocab) -> Optional[VocabFile]:
    """The vocab (read once) and the case check; None when not needed and not given."""
    vocab_file = (resolve_vocab_file(getattr(options, "vocab_file", None),
                                     options.init_checkpoint)
                  or fileio.file_in_folder(options.output_dir, "vocab.txt"))
    if not vocab_file:
        if needs_vocab:
            raise ValueError("vocab_file is required (or an init_checkpoint folder holding it)")
        return None
    if not os.path.isfile(vocab_file):
        raise FileNotFoundError(f"vocab_file not found: {vocab_file}")
    vocab = VocabFile.read(vocab_file)
    if hasattr(options, "do_lower_case") and not getattr(options, "allow_case_mismatch", False):
        vocab_lib.check_case_matches(options.do_lower_case, vocab.tokens, vocab_file,
                                     options.init_checkpoint)
    return vocab


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


def check_inputs_apart(output_dir: str, names, inputs: dict) -> None:
    """Refuses an input file that is one of the files a run writes into `output_dir`
    (`names`: its predictions, results, feature caches), before any work.

    Raises:
      ValueError: naming the input's flag and the file (`fileio.check_outputs_apart`).
    """
    fileio.check_outputs_apart(
        {"output_dir": [os.path.join(output_dir, name) for name in names]}, inputs)


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


# What every run may write into its output_dir (fnmatch patterns; each task adds its
# own in `Task.output_patterns`: feature caches, predictions, exported checkpoints): an
# input file there by such a name would be replaced. The vocab and bert_config.json a
# run writes are the files it resolved, so reading them from output_dir is fine.
RUN_OUTPUT_PATTERNS = ("config.json", "run_settings.json", LABEL_LIST_FILE, "checkpoint",
                       "ckpt-*", "*_results.txt", "*_results.json", "*_results.tsv")
# The options that name files a run reads (comma lists and patterns in input_file).
INPUT_FILE_OPTIONS = ("train_file", "eval_file", "predict_file", "input_file",
                      "vocab_file", "bert_config_file", "generator_config_file")


def check_run_inputs(options, output_patterns=RUN_OUTPUT_PATTERNS) -> None:
    """Refuses, before any work, an input file that the run would replace: one in
    output_dir whose name the run writes there (`output_patterns`), and an export_dir
    that is, holds or lies inside an input.

    Raises:
      ValueError: naming the flag, the file and what to do.
    """
    output_dir = getattr(options, "output_dir", None)
    inputs = {name: getattr(options, name, None) for name in INPUT_FILE_OPTIONS}
    for name, value in inputs.items():
        for path in (str(value).split(",") if value and output_dir else ()):
            inside = os.path.dirname(os.path.abspath(path)) == os.path.abspath(output_dir)
            written = [pattern for pattern in output_patterns
                       if fnmatch.fnmatch(os.path.basename(path), pattern)]
            if inside and written:
                raise ValueError(
                    f"--{name}={path} is in --output_dir={output_dir} under a name this "
                    f"run writes there ({written[0]}): it would be replaced; move the file "
                    "or use another output_dir")
    export_dir = getattr(options, "export_dir", None)
    if export_dir:
        fileio.check_outputs_apart(
            {"export_dir": export_dir},
            dict(inputs, init_checkpoint=getattr(options, "init_checkpoint", None),
                 data_dir=getattr(options, "data_dir", None)))

