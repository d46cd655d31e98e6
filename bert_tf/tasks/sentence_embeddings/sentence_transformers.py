"""sentence-transformers folders: a `SentenceEncoder` written as one
(`bert-export-model --export_format=sentence_transformers`) and one read as ours
(`--init_checkpoint` of bert-encode, bert-export-model and the task).

    path = export_sentence_transformers(model, preprocessor, export_dir, overwrite=False)
    SentenceTransformer(path).encode(texts)      # equal to our vectors (1e-5)
    folder = read_folder("all-MiniLM-L6-v2")     # pooling, normalize, where the BERT is

The folder written, in the layout of sentence-transformers' released models (the one
every version of the library reads):

- `modules.json`: Transformer (the folder itself), Pooling (`1_Pooling`) and, when the
  model normalizes, Normalize (`2_Normalize`, an empty folder);
- `sentence_bert_config.json`: `max_seq_length` (texts are cut to it, [CLS] and [SEP]
  included, as here) and `do_lower_case: false` (the tokenizer itself lower-cases);
- `config_sentence_transformers.json`: `similarity_fn_name` cosine;
- `1_Pooling/config.json`: the word-embedding dimension and the pooling mode;
- the transformers `BertModel` folder at the root (config.json, model.safetensors,
  vocab.txt, tokenizer_config.json, special_tokens_map.json), written by
  `bert_tf.serving.huggingface.export_huggingface`, so transformers loads the root too.

A folder is read from `modules.json`: the Transformer module's path (the root, or
`0_Transformer/` of older folders) is a Hugging Face BERT folder, its
`sentence_bert_config.json` gives `max_seq_length`, the Pooling module's config (either
`pooling_mode` or the `pooling_mode_*_tokens` switches) the pooling, and a Normalize
module the normalization. Modules this model has no equal of (Dense, a pooling of
weighted or sqrt-length means, the last token) are refused, naming the file.
"""

import dataclasses
import json
import os
from typing import Optional

from absl import logging

from bert_tf.io import fileio
from bert_tf.serving import catalog, export, formats
from bert_tf.serving import huggingface, output_folder, registry
from bert_tf.tasks.sentence_embeddings.model import POOLING_MODES, SentenceEncoder

MODULES_FILE = "modules.json"
SENTENCE_BERT_CONFIG = "sentence_bert_config.json"
MODEL_CONFIG = "config_sentence_transformers.json"
POOLING_FOLDER, NORMALIZE_FOLDER = "1_Pooling", "2_Normalize"
FORMAT = "sentence_transformers"
# modules.json's types, as released models name them (every version resolves these).
MODULE_TYPES = {"transformer": "sentence_transformers.models.Transformer",
                "pooling": "sentence_transformers.models.Pooling",
                "normalize": "sentence_transformers.models.Normalize"}
# Our pooling -> the switch of 1_Pooling/config.json that says it (older layout) and
# the `pooling_mode` value (newer layout).
POOLING_SWITCHES = {"mean": "pooling_mode_mean_tokens", "cls": "pooling_mode_cls_token",
                    "max": "pooling_mode_max_tokens"}
POOLING_NAMES = {"mean": "mean", "cls": "cls", "max": "max"}
OTHER_SWITCHES = ("pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens",
                  "pooling_mode_lasttoken")
# Why another model has no sentence-transformers folder.
GENERAL_REASON = ("a sentence-transformers folder holds a sentence encoder (a BERT whose "
                  "token outputs are pooled into one vector): "
                  "--model_type=sentence_encoder")


@dataclasses.dataclass(frozen=True)
class SentenceTransformersFolder:
    """What a sentence-transformers folder says (see the module docstring).

    Attributes:
      path: The folder.
      transformer_path: Its Hugging Face BERT folder (the root or a module's folder).
      pooling: One of `POOLING_MODES`.
      normalize: Whether a Normalize module follows the pooling.
      max_seq_length: Of `sentence_bert_config.json` (None when it says none).
      do_lower_case: Of the BERT folder's tokenizer_config.json (None when it says none).
    """
    path: str
    transformer_path: str
    pooling: str
    normalize: bool
    max_seq_length: Optional[int]
    do_lower_case: Optional[bool]

    @property
    def source(self) -> str:
        """The file that gives the pooling, for messages."""
        return os.path.join(self.path, MODULES_FILE)


def is_folder(path) -> bool:
    """Whether `path` is a sentence-transformers folder (holds modules.json)."""
    return bool(path) and os.path.isfile(os.path.join(os.fspath(path), MODULES_FILE))


def _module_kind(entry, modules_path):
    """"transformer", "pooling" or "normalize" of a modules.json entry; refuses others."""
    if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
        raise ValueError(f"{modules_path}: expected a list of objects with `type` and "
                         f"`path`, got {entry!r}")
    name = entry["type"].rsplit(".", 1)[-1].lower()
    if name in MODULE_TYPES:
        return name
    raise ValueError(f"{modules_path}: module {entry['type']!r} has no equal here; a "
                     "sentence encoder is a Transformer, a Pooling and optionally a "
                     "Normalize module")


def _pooling(config, path):
    """Our pooling of a 1_Pooling/config.json (either layout)."""
    mode = config.get("pooling_mode")
    if isinstance(mode, str):
        chosen = [ours for ours, theirs in POOLING_NAMES.items() if theirs == mode]
        if not chosen:
            raise ValueError(f"{path}: pooling_mode {mode!r} has no equal here; expected "
                             f"one of {', '.join(POOLING_NAMES.values())}")
        return chosen[0]
    others = [name for name in OTHER_SWITCHES if config.get(name)]
    chosen = [ours for ours, switch in POOLING_SWITCHES.items() if config.get(switch)]
    if others or len(chosen) != 1:
        raise ValueError(f"{path}: expected exactly one of {', '.join(POOLING_SWITCHES.values())}"
                         f" set (the poolings this model has), got "
                         f"{', '.join(chosen + others) or 'none'}")
    return chosen[0]


def read_folder(path) -> SentenceTransformersFolder:
    """Reads a sentence-transformers folder (see the module docstring).

    Raises:
      FileNotFoundError / ValueError: naming the file at fault (a module or pooling
        without an equal here, a missing BERT folder).
    """
    path = os.fspath(path)
    modules_path = os.path.join(path, MODULES_FILE)
    modules = fileio.read_json(modules_path, "a sentence-transformers folder lists its "
                               "modules there")
    if not isinstance(modules, list) or not modules:
        raise ValueError(f"{modules_path}: expected a list of modules")
    kinds = [(_module_kind(entry, modules_path), entry.get("path") or "")
             for entry in modules]
    order = [kind for kind, _ in kinds]
    if order not in (["transformer", "pooling"], ["transformer", "pooling", "normalize"]):
        raise ValueError(f"{modules_path}: modules {order}; a sentence encoder here is "
                         "transformer, pooling (, normalize)")
    transformer_path = os.path.join(path, kinds[0][1])
    if not os.path.isfile(os.path.join(transformer_path, "model.safetensors")):
        raise FileNotFoundError(f"{modules_path}: its Transformer module's folder "
                                f"{transformer_path} holds no model.safetensors (a "
                                "pytorch_model.bin: save the model again with "
                                "safe_serialization)")
    pooling_path = os.path.join(path, kinds[1][1], "config.json")
    pooling = _pooling(fileio.read_json(pooling_path, "the Pooling module's settings"),
                       pooling_path)
    settings_path = os.path.join(transformer_path, SENTENCE_BERT_CONFIG)
    settings = fileio.read_json_if_present(settings_path, "the Transformer module's settings")
    tokenizer_path = os.path.join(transformer_path, "tokenizer_config.json")
    tokenizer = fileio.read_json_if_present(tokenizer_path, "the tokenizer's settings")
    lower = tokenizer.get("do_lower_case")
    return SentenceTransformersFolder(
        path=path, transformer_path=os.path.normpath(transformer_path), pooling=pooling,
        normalize=len(kinds) == 3, max_seq_length=settings.get("max_seq_length"),
        do_lower_case=None if lower is None else bool(lower))


def check_model_class(model_cls):
    """Raises ValueError, with the reason, for a model a sentence-transformers folder
    cannot hold."""
    reason = registry.refusal(model_cls, FORMAT)
    if reason is not None:
        others = registry.other_formats(model_cls, FORMAT)
        raise ValueError(f"a {model_cls.__name__} cannot be exported as a "
                         f"sentence-transformers folder: {reason or GENERAL_REASON}. "
                         f"Export it with export_format={others}")


def folder_files(model, max_seq_length) -> dict:
    """{relative path: JSON text} of the sentence-transformers files of `model` (a
    SentenceEncoder), beside the transformers folder at the root."""
    modules = [{"idx": 0, "name": "0", "path": "", "type": MODULE_TYPES["transformer"]},
               {"idx": 1, "name": "1", "path": POOLING_FOLDER,
                "type": MODULE_TYPES["pooling"]}]
    if model.normalize:
        modules.append({"idx": 2, "name": "2", "path": NORMALIZE_FOLDER,
                        "type": MODULE_TYPES["normalize"]})
    pooling = {"word_embedding_dimension": model.config.hidden_size,
               **{switch: ours == model.pooling for ours, switch in POOLING_SWITCHES.items()},
               **{switch: False for switch in OTHER_SWITCHES},
               "include_prompt": True}
    dump = lambda value: json.dumps(value, indent=2) + "\n"  # noqa: E731
    return {MODULES_FILE: dump(modules),
            SENTENCE_BERT_CONFIG: dump({"max_seq_length": max_seq_length,
                                        "do_lower_case": False}),
            MODEL_CONFIG: dump({"prompts": {}, "default_prompt_name": None,
                                "similarity_fn_name": "cosine"}),
            os.path.join(POOLING_FOLDER, "config.json"): dump(pooling)}


def export_sentence_transformers(model, preprocessor, export_dir, overwrite=False):
    """Writes `model` as a sentence-transformers folder (see the module docstring).

    Args:
      model: A built `SentenceEncoder`.
      preprocessor: The `Preprocessor` the model was trained with: its vocab and case,
        and its `max_seq_length` (texts are cut to this many tokens, [CLS] and [SEP]
        included).
      export_dir: The folder to write: missing or empty, or replaced with `overwrite`.
      overwrite: Replace what `export_dir` holds.

    Returns:
      The folder written.
    Raises:
      ValueError / FileNotFoundError / FileExistsError: naming what is at fault, before
        anything is written.
    """
    check_model_class(type(model))
    export.check_model_and_vocab(model, SentenceEncoder, preprocessor)
    write_transformer = huggingface.folder_writer(model.encoder, preprocessor)
    target = output_folder.check_output_folder(export_dir, overwrite)
    files = folder_files(model, preprocessor.max_seq_length)

    def write(folder):  # a temporary folder, renamed to `target` once complete
        write_transformer(folder)
        for subfolder in (POOLING_FOLDER, NORMALIZE_FOLDER if model.normalize else None):
            if subfolder:
                os.makedirs(os.path.join(folder, subfolder))
        for name, text in files.items():
            with open(os.path.join(folder, name), "w", encoding="utf-8") as file:
                file.write(text)

    output_folder.write_folder(target, write)
    logging.info("Exported a SentenceEncoder (%s pooling%s) as a sentence-transformers "
                 "folder to %s", model.pooling, ", normalized" if model.normalize else "",
                 target)
    return target


__all__ = ["POOLING_MODES", "SentenceTransformersFolder", "check_model_class",
           "export_sentence_transformers", "folder_files", "is_folder", "read_folder"]


formats.register(formats.ExportFormat(
    FORMAT, catalog.EXPORT_FORMATS[FORMAT],
    check=lambda model_cls, request: check_model_class(model_cls),
    write=lambda model, preprocessor, export_dir, request: export_sentence_transformers(
        model, preprocessor, export_dir, overwrite=request.overwrite)))
