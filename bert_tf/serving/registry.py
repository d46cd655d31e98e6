"""The model types: each registers once, and every export format looks it up.

    entry = registry.get("squad")             # a name or an alias -> ModelType
    entry = registry.for_model(model)         # by class, nearest registered base first
    registry.names()                          # the spellings of --model_type
    registry.register(ModelType(name="my_head", model_class=MyHeadModel, ...))

A `ModelType` says, for one Keras model class: its `--model_type` name and aliases,
its SavedModel exporter (the serving signatures), the export formats it supports and
why each other one is refused, and what those formats need of it (the outputs its ids
signatures serve, its transformers class, its LiteRT row layout, whether its head has
one output per label). The built-in types register in `bert_tf.serving.model_types`,
loaded when the registry is first asked (`types`, `names`, `get`); their names are
declared without TensorFlow in `bert_tf.serving.catalog`.

Why here, in serving, and not in `bert_tf.models`: a record holds its SavedModel
exporter, and the signature builders are serving code, which the models package must
not import (tests/test_layout.py). What the layers below serving need (weights,
train) the model class says itself: the google-research checkpoint names of its head
(`google_head_entries()`), its Hugging Face head names (`hf_head_names`) and the heads a
warm start restores (`pretrained_heads`); see `bert_tf.models.EncoderHeadModel`.
Registering the class in its `ModelType` brings those along, so a new head model is one
class and one `register` call.
"""

import collections.abc
import dataclasses
from typing import Callable, Mapping, Optional, Union

from bert_tf.serving import formats as export_formats

# How a class of one's own becomes a model type.
HOW_TO_REGISTER = ("describe it once with bert_tf.serving.registry.register(ModelType("
                   "name=..., model_class=...)); bert_tf/serving/model_types.py registers "
                   "the built-in ones")


@dataclasses.dataclass(frozen=True)
class ModelType:
    """One model type (see the module docstring).

    Attributes:
        name: Its `--model_type` spelling (and `run_settings.json`'s `model_type`).
        model_class: The Keras model class (subclasses are of this type too, unless
            registered themselves).
        aliases: Other spellings (`squad` for `span_labeler`).
        formats: The export formats it supports (names of `bert_tf.serving.formats`).
        refused: Export format -> why this type is refused there (what users read;
            formats left out get the format's general reason).
        saved_model: The SavedModel exporter, with its serving signatures:
            `saved_model(model, preprocessor, export_dir, overwrite=False,
            versioned=False, **signature_options)` -> the folder
            written. Required with "saved_model" in `formats`.
        signature_options: Keyword arguments of `saved_model` that bert-export-model
            fills from its options of the same name.
        outputs: The model outputs that its ids signatures (`serve_ids`,
            `serve_examples`, LiteRT, ONNX) return, as float32, in this order.
        sequence_outputs: Those of `outputs` with a position axis (after the batch
            axes): the signatures compute only up to the batch's longest row and pad
            these back to the input's length with 0.
        ids_rank: The rank of its ids signature's inputs: 2 for [batch, sequence], 3 for
            [batch, choices, sequence] (multiple choice).
        labelled: The head has one output per label (classes or tags): its
            `num_classes` is the number of label names, and exports name them.
        hf_architecture: The transformers class of a Hugging Face export, or a function
            of the model giving it. Required with "huggingface" in `formats`.
        hf_problem_type: transformers' config records a `problem_type` (regression,
            single- or multi-label classification): a sequence classifier.
        litert_layout: The one row of ids a LiteRT app lays out, in words. Required
            with "litert" in `formats`.
        load: Builds the model of this type from a checkpoint itself, as
            `load(init_checkpoint, bert_config)`, when the generic loader (the encoder
            and the head of a run) does not fit; None for the generic one.
        hub_outputs: What a TF Hub encoder export (`bert_tf.serving.tfhub`) serves, as
            `hub_outputs(model, features, training)` -> dict `pooled_output` [B, H],
            `sequence_output` [B, S, H], `encoder_outputs` (L x [B, S, H]); None: the
            model's own outputs of those names (a BertEncoder's).
        read_folder: Reads a folder another library wrote that holds this type (a
            sentence-transformers folder), as `read_folder(path)` -> what a run's config
            would say to bert-export-model (`model_type`, `max_seq_length`,
            `do_lower_case`) and "path" (the file that says so); {} for other folders.
    """

    name: str
    model_class: type
    aliases: tuple = ()
    formats: tuple = ("saved_model",)
    refused: Mapping[str, str] = dataclasses.field(default_factory=dict)
    saved_model: Optional[Callable] = None
    signature_options: tuple = ()
    outputs: tuple = ("logits",)
    sequence_outputs: tuple = ()
    ids_rank: int = 2
    labelled: bool = False
    hf_architecture: Union[str, Callable, None] = None
    hf_problem_type: bool = False
    litert_layout: Optional[str] = None
    load: Optional[Callable] = None
    hub_outputs: Optional[Callable] = None
    read_folder: Optional[Callable] = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"ModelType name must be a non-empty str, got {self.name!r}")
        if not isinstance(self.model_class, type):
            raise TypeError(f"model type {self.name!r}: model_class must be a Keras model "
                            f"class, got {type(self.model_class).__name__}")
        for field in ("formats", "aliases"):  # a lone string would be read letter by letter
            if isinstance(getattr(self, field), str):
                raise TypeError(f"model type {self.name!r}: {field} must be a tuple of "
                                f"names, got the str {getattr(self, field)!r}")
        if not isinstance(self.refused, collections.abc.Mapping):
            raise TypeError(f"model type {self.name!r}: refused must be a dict (format -> "
                            f"why), got {type(self.refused).__name__}")
        known = export_formats.names()
        unknown = sorted((set(self.formats) | set(self.refused)) - set(known))
        if unknown:
            raise ValueError(f"model type {self.name!r}: unknown export formats {unknown}; "
                             f"expected some of {', '.join(known)}")
        both = sorted(set(self.formats) & set(self.refused))
        if both:
            raise ValueError(f"model type {self.name!r}: {both} both supported and refused")
        for export_format, needs in (("saved_model", self.saved_model),
                                     ("huggingface", self.hf_architecture),
                                     ("litert", self.litert_layout)):
            if export_format in self.formats and needs is None:
                raise ValueError(f"model type {self.name!r} supports {export_format} "
                                 "without what the format needs (see ModelType)")

    def supports(self, export_format):
        """Whether this type exports to `export_format`: named in `formats`, or derived
        from one that is (`ExportFormat.derived_from`) and not refused."""
        source = (export_formats.get(export_format).derived_from
                  if export_format in export_formats.names() else None)
        return export_format in self.formats or (
            source in self.formats and export_format not in self.refused)

    @property
    def spellings(self):
        """Its name and aliases."""
        return (self.name,) + tuple(self.aliases)


_TYPES = {}  # name -> ModelType, in registration order
_ALIASES = {}  # alias -> name


def register(model_type, replace=False):
    """Adds `model_type`; returns it.

    Raises:
        ValueError: when a name or alias is taken, or its class has a type already
            (unless `replace`, which swaps the type of the same name).
    """
    if not isinstance(model_type, ModelType):
        raise TypeError(f"register: model_type must be a ModelType, got "
                        f"{type(model_type).__name__}")
    if replace and model_type.name in _TYPES:
        unregister(model_type.name)
    taken = [spelling for spelling in model_type.spellings
             if spelling in _TYPES or spelling in _ALIASES]
    if taken:
        raise ValueError(f"model type {model_type.name!r}: {taken} already registered; "
                         "choose another name, or pass replace=True")
    other = _exact(model_type.model_class)
    if other is not None:
        raise ValueError(f"{model_type.model_class.__name__} is model type {other.name!r} "
                         f"already; one class has one model type")
    _TYPES[model_type.name] = model_type
    _ALIASES.update((alias, model_type.name) for alias in model_type.aliases)
    return model_type


def unregister(name):
    """Removes the model type `name` (a name, not an alias) and its aliases."""
    model_type = _TYPES.pop(name)
    for alias in model_type.aliases:
        _ALIASES.pop(alias, None)


def types():
    """Every ModelType, in registration order."""
    export_formats.load_built_ins()
    return tuple(_TYPES.values())


def names():
    """Every spelling of --model_type: the names in registration order, then aliases."""
    export_formats.load_built_ins()
    return tuple(_TYPES) + tuple(_ALIASES)


def get(name):
    """The ModelType of a name or alias.

    Raises:
        ValueError: for an unknown one, listing the known ones and how to register.
    """
    export_formats.load_built_ins()
    model_type = _TYPES.get(_ALIASES.get(name, name))
    if model_type is None:
        raise ValueError(f"unknown model_type {name!r}; expected one of "
                         f"{', '.join(names())} (a model of your own: {HOW_TO_REGISTER})")
    return model_type


def folder_values(path):
    """What the first model type that knows the folder at `path` reads from it
    (`ModelType.read_folder`); {} when none does."""
    for entry in types():
        values = entry.read_folder(path) if entry.read_folder else {}
        if values:
            return values
    return {}


def _exact(model_cls):
    return next((entry for entry in types() if entry.model_class is model_cls), None)


def find(model_or_class):
    """The ModelType of a model or model class (the first of its classes, in method
    resolution order, that has one), or None."""
    model_cls = model_or_class if isinstance(model_or_class, type) else type(model_or_class)
    for cls in model_cls.__mro__:
        entry = _exact(cls)
        if entry is not None:
            return entry
    return None


def for_model(model_or_class):
    """As `find`, for a model that must have a type.

    Raises:
        ValueError: for an unregistered class, saying how to register it.
    """
    entry = find(model_or_class)
    if entry is None:
        name = (model_or_class if isinstance(model_or_class, type)
                else type(model_or_class)).__name__
        raise ValueError(f"{name} is not a registered model type: {HOW_TO_REGISTER}")
    return entry


def refusal(model_cls, export_format):
    """None when `model_cls`'s type exports to `export_format`; else why not: the
    type's own reason, or "" when it gives none or the class has no type (the format's
    general reason applies)."""
    entry = find(model_cls)
    if entry is None:
        return ""
    if entry.supports(export_format):
        return None
    return entry.refused.get(export_format, "")


def classes_for(export_format):
    """The model classes whose types export to `export_format`, in registration order."""
    return [entry.model_class for entry in types() if entry.supports(export_format)]


def other_formats(model_cls, export_format):
    """The formats besides `export_format` that `model_cls`'s type exports to, in words
    ("saved_model or huggingface"); "saved_model" for a class without a type."""
    entry = find(model_cls)
    held = [name for name in export_formats.names() if entry.supports(name)
            and not export_formats.get(name).keeps_adapters] if entry else ["saved_model"]
    others = [name for name in held if name != export_format]
    return " or ".join(filter(None, [", ".join(others[:-1]), others[-1]])) if others else ""
