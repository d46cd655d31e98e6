"""The export formats of `bert-export-model`: each a registered `ExportFormat`, as model
types are (`bert_tf.serving.registry`).

    fmt = formats.get("onnx")
    fmt.check(BertClassifier, request)                     # before the model is loaded
    path = fmt.write(model, preprocessor, export_dir, request)

A format is one module with its writer and one `register(ExportFormat(...))` call there:
the built-in ones register as their modules are imported (`bert_tf.serving.model_types`
imports them before the model types that name them; it loads when a registry is first
asked), the sentence-transformers folder from its task's folder. Their names and help
are declared without TensorFlow in `bert_tf.serving.catalog`, which `--export_format`'s
help lists; `get` refuses a name that is not registered (the flag has no fixed choices,
so a format of one's own, registered later, works too).
Which model types a format takes, and why it refuses the others, is each type's record
(`ModelType.formats`, `ModelType.refused`); a format's `check` asks it.

Every writer takes the same arguments in the same order: the model, the `Preprocessor`
its inputs are made with (vocab, case, length, pairs, resolved once from the run), the
folder to write, and an `ExportRequest` (the settings of the export).
"""

import dataclasses
import importlib
from typing import Callable, Optional


@dataclasses.dataclass(frozen=True)
class ExportRequest:
    """The settings of one export, the same for every format (each reads its own).

    Attributes:
      model_type: The model type's name (`bert_tf.serving.registry`).
      label_names: Class or tag names in label-id order (None: none, or regression).
      problem_type: transformers' problem_type of a classifier ("regression",
        "multi_label_classification") or None.
      quantize: "none" or "int8" (formats with `quantizes`).
      overwrite: Replace what is at the export folder.
      versioned: Write the next numbered version (formats with `versioned`).
      source: The checkpoint the model comes from (`--init_checkpoint`).
      run: Its run's config.json ({} for released or Hugging Face weights).
      signature: The model type's serving options (`ModelType.signature_options`:
        doc_stride, max_query_length, ...) and the multi-label threshold.
    """
    model_type: str
    label_names: Optional[list] = None
    problem_type: Optional[str] = None
    quantize: str = "none"
    overwrite: bool = False
    versioned: bool = False
    source: Optional[str] = None
    run: dict = dataclasses.field(default_factory=dict)
    signature: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class ExportFormat:
    """One export format.

    Attributes:
      name: Its `--export_format` value.
      help: What it writes, for `--help` (one or two sentences).
      check: `check(model_cls, request)`: refuses, before the model is loaded, a model
        class the format cannot hold (its type's reason, and the formats that hold it),
        a missing optional package (naming the extra), a setting it cannot take.
      write: `write(model, preprocessor, export_dir, request)` -> the folder written.
      quantizes: It takes `quantize="int8"`.
      versioned: It writes TF Serving's numbered versions (`versioned`), and checks the
        export folder itself; the others write a folder that must be new or empty
        (`output_folder.check_output_folder`, `overwrite` to replace it).
      thresholds: It serves predicted labels of a multi-label classifier (the
        multi-label threshold applies).
      keeps_adapters: It writes a LoRA run's adapters as they are (the others merge
        them into the weights first); never named as another format a model could take.
      derived_from: A format every model type that has it has this one too, unless the
        type refuses this one (onnx: converted from the SavedModel's ids signature).
    """
    name: str
    help: str
    check: Callable
    write: Callable
    quantizes: bool = False
    versioned: bool = False
    thresholds: bool = False
    keeps_adapters: bool = False
    derived_from: Optional[str] = None


_FORMATS = {}  # name -> ExportFormat, in registration order
# The module that registers the built-in model types, importing the built-in formats'
# writers first; it imports TensorFlow, so it loads when a registry is first asked.
BUILT_IN = "bert_tf.serving.model_types"


def load_built_ins() -> None:
    """Registers the built-in formats and model types (`BUILT_IN`), once; while it loads,
    its own registrations find it loading and go on."""
    importlib.import_module(BUILT_IN)


def register(export_format: ExportFormat) -> ExportFormat:
    """Adds `export_format`; returns it.

    Raises:
      TypeError: for something else than an ExportFormat.
      ValueError: when its name is taken.
    """
    if not isinstance(export_format, ExportFormat):
        raise TypeError(f"register: expected an ExportFormat, got "
                        f"{type(export_format).__name__}")
    if export_format.name in _FORMATS:
        raise ValueError(f"export format {export_format.name!r} is registered already; "
                         "choose another name")
    _FORMATS[export_format.name] = export_format
    return export_format


def unregister(name: str) -> None:
    """Removes the format `name` (a project's own, e.g. after a test)."""
    _FORMATS.pop(name)


def names() -> tuple:
    """The registered formats' names, in registration order."""
    load_built_ins()
    return tuple(_FORMATS)


def get(name: str) -> ExportFormat:
    """The format `name`.

    Raises:
      ValueError: for an unknown name, listing the registered ones.
    """
    if name not in names():
        raise ValueError(f"--export_format={name} is not an export format; expected one "
                         f"of {', '.join(names())}")
    return _FORMATS[name]
