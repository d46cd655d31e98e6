"""SavedModel export for TensorFlow Serving: raw text, token ids and tf.Example in.

API (the fine-tuning runners' `--export_dir` and `export_model.py` call these)::

    preprocessor = bert_tf.Preprocessor(vocab_file, do_lower_case, max_seq_length,
                                        text_pair=True)
    path = export.export_classifier(model, preprocessor, export_dir, label_names=None,
                                    is_regression=None, overwrite=False, versioned=False,
                                    doc_stride=None, window_pooling="mean")
    path = export.export_span_labeler(model, preprocessor, export_dir,
                                      max_query_length=None, max_answer_length=30, ...)
    path = export.export_token_classifier(model, preprocessor, export_dir, label_names)
    path = export.export_encoder(model, preprocessor, export_dir, ...)
    path = export.export_finetuned_model(model, preprocessor, export_dir, model_type,
                                         **kwargs)
        # model_type: a name of `bert_tf.serving.registry` ("classifier", "squad", ...):
        # its ModelType's exporter (multiple choice: bert_tf.tasks.multiple_choice.serving)
    path = export.export_signatures(model, preprocessor, export_dir, make_default=None)
        # any registered model: the ids signatures, `serving_default` from make_default

Every exporter of every format takes `(model, preprocessor, export_dir, ...)`: the
`bert_tf.text.Preprocessor` the model was trained with (vocab, case, the signatures'
sequence length, and for a classifier whether it takes sentence pairs). Each returns
the directory written. Signatures (batch dimension B):

- `serving_default`, raw UTF-8 text, WordPiece inside the graph (vocab in assets/):
  classifier `text_a` [B] (+ `text_b` [B] when `text_pair=True`) -> `probabilities`
  [B, C], `label_ids` [B], `labels` [B] (the label names), `logits`; regression ->
  `score` [B], `logits`; multi-label (`multi_label=True`) -> `probabilities` [B, C]
  (sigmoid, one per label), `predicted` [B, C] (1 at or above the threshold), `labels`
  [B, C] (the name of each predicted label, "" elsewhere), `label_names` [B, C],
  `logits`. With `doc_stride` (long documents) each text is cut into
  windows in the graph and the outputs come from its windows' pooled logits. Span
  labeler `question`, `context` -> `answer_text`,
  `answer_start`, `answer_end` (character offsets into `context`, end exclusive),
  `score`, `null_score`, `start_logits`, `end_logits`. Token classifier `text` ->
  per whitespace word (`str.split()`; W = max_seq_length - 2, padded with "" / -1): `words`, `tags`,
  `tag_ids`, `word_start`, `word_end` (characters), `num_words`, `logits`. Encoder
  `text` -> `pooled_output`, `sequence_output`, `input_mask`.
- `serve_ids`: int32 `input_ids`, `input_mask`, `segment_ids` [B, S] -> the model's
  logits (`logits`, or `start_logits`/`end_logits`; the encoder's outputs).
- `serve_examples`: `examples`, serialized tf.Example [B] with int64 features
  `input_ids`, `input_mask`, `segment_ids` of length S (the fine-tuning TFRecords'
  layout) -> as `serve_ids`.

`export_dir`: written directly when it does not exist (or is empty); with
`versioned=True`, or when it already holds numeric version folders (a TF Serving model
base path), the export goes into `export_dir/<highest version + 1>`. An existing
SavedModel is replaced only with `overwrite=True`; any other non-empty folder is an
error. Everything is checked before anything is written, and the SavedModel is written
to a temporary folder and renamed when complete.
"""

import collections
import os

import tensorflow as tf
from absl import logging

from bert_tf.serving import catalog, formats, output_folder, registry, signature_inputs
from bert_tf.serving import signatures as sig
from bert_tf.serving.text_signatures import (classifier_text_signature,
                                             encoder_text_signature, span_text_signature,
                                             tagger_text_signature)
from bert_tf.text import windows
from bert_tf.text.vocab import check_vocab_matches
from bert_tf.text.preprocessor import Preprocessor
from bert_tf.configs import BertConfig
from bert_tf.models import (BertClassifier, BertEncoder, BertSpanLabeler,
                            BertTokenClassifier)
from bert_tf.weights.load_report import name_list

SIGNATURE_NAMES = ("serving_default", "serve_ids", "serve_examples")


# ----------------------------------------------------------------------------- checks
def check_model_and_vocab(model, model_cls, preprocessor, min_seq_length=3):
    """Rejects a model / preprocessor (vocab, length) that cannot serve; builds the model.

    `min_seq_length` None: the export does not use the preprocessor's length.

    Raises:
        TypeError: `model` is not a `model_cls`.
        ValueError / FileNotFoundError: naming the vocab file or config field at fault.
    """
    if not isinstance(model, model_cls):
        raise TypeError(f"expected a {model_cls.__name__}, got {type(model).__name__}")
    config = getattr(model, "config", None)
    if not isinstance(config, BertConfig):
        raise ValueError(f"{type(model).__name__} has no BertConfig (`model.config`); "
                         "build it from a bert_config.json")
    if not isinstance(preprocessor, Preprocessor):
        raise TypeError(f"preprocessor: expected a bert_tf.text.Preprocessor (the model's "
                        f"vocab, case and length), got {type(preprocessor).__name__}")
    check_vocab_matches(len(preprocessor.vocab.tokens), preprocessor.vocab_file,
                        config.vocab_size, "the model's config")
    max_seq_length = preprocessor.max_seq_length
    if min_seq_length is not None and not (
            min_seq_length <= max_seq_length <= config.max_position_embeddings):
        raise ValueError(f"max_seq_length must be an integer in [{min_seq_length}, "
                         f"max_position_embeddings={config.max_position_embeddings}], "
                         f"got {max_seq_length!r}")
    if not model.built:
        model.build()  # from its config
    return config


def check_label_names(label_names, num_classes, what="label_names"):
    """Returns label names as a list of str, one per class (default: "0", "1", ...)."""
    if label_names is None:
        return [str(index) for index in range(num_classes)]
    names = [str(name) for name in label_names]
    if len(names) != num_classes:
        raise ValueError(f"{what} has {len(names)} names ({name_list(names)}) but the model "
                         f"has {num_classes} classes")
    twice = sorted(name for name, count in collections.Counter(names).items() if count > 1)
    if twice:
        raise ValueError(f"{what} lists {name_list(twice)} more than once; each of the "
                         f"{num_classes} classes needs its own name")
    return names


# ------------------------------------------------------------------------ export_dir
def _is_saved_model(path):
    return os.path.isfile(os.path.join(path, "saved_model.pb"))


# How a Python caller replaces a SavedModel (commands name their own flags).
REPLACE_HINT = ("pass overwrite=True to replace it, or export into a model base path with "
                "versioned=True")


def resolve_export_dir(export_dir, overwrite=False, versioned=False, hint=REPLACE_HINT):
    """The folder to write (see the module docstring).

    Raises:
        FileExistsError: naming the folder and, for an existing SavedModel, `hint` (how
            the caller replaces it).
    """
    export_dir = os.path.abspath(os.fspath(export_dir))
    if os.path.exists(export_dir) and not os.path.isdir(export_dir):
        raise FileExistsError(f"export_dir {export_dir} is a file, expected a folder")
    entries = sorted(os.listdir(export_dir)) if os.path.isdir(export_dir) else []
    versions = [int(name) for name in entries
                if name.isdigit() and os.path.isdir(os.path.join(export_dir, name))]
    if versions and not _is_saved_model(export_dir):
        return os.path.join(export_dir, str(max(versions) + 1))
    if _is_saved_model(export_dir):
        if not overwrite:
            raise FileExistsError(f"export_dir {export_dir} already holds a SavedModel; "
                                  f"{hint}")
        return export_dir
    if entries:
        raise FileExistsError(f"export_dir {export_dir} is not empty and is neither a "
                              f"SavedModel nor a model base path of numeric versions "
                              f"(holds {name_list(entries)}); choose another folder")
    return os.path.join(export_dir, "1") if versioned else export_dir


# The clean-up of killed exports' folders, one place (tests/test_export.py calls it here).
_remove_stale_temporaries = output_folder.remove_stale_temporaries


def write_saved_model(module, signatures, target):
    """tf.saved_model.save into a temporary sibling folder, then rename into place."""
    output_folder.write_folder(target, lambda temporary: tf.saved_model.save(
        module, temporary, signatures=signatures))
    logging.info("Exported SavedModel with signatures %s to %s", sorted(signatures), target)
    return target


# ------------------------------------------------------------------------ signatures
def tf_variable(variable):
    """The tf.Variable behind a Keras 3 variable (itself when it is one)."""
    if isinstance(variable, tf.Variable):
        return variable
    value = variable.value
    if not isinstance(value, tf.Variable):
        raise TypeError(f"variable {variable.path} is not backed by a tf.Variable; export "
                        "needs the TensorFlow backend of Keras")
    return value


class ServingModule(tf.Module):
    """What the SavedModel tracks: the model's variables and the tokenizer.

    The Keras model itself is kept out of the object graph: tracking it would make
    tf.saved_model.save trace every layer again. Its variables are tracked as the
    tf.Variables inside the Keras variables: the TF1-style loader of TF Serving and
    `saved_model_cli run` finds only those ("Could not find variable ..." otherwise).
    """

    def __init__(self, model, preprocessor):
        super().__init__(name="bert_serving")
        object.__setattr__(self, "model", model)  # untracked
        entry = registry.for_model(model)
        self.output_names = entry.outputs
        self.sequence_outputs = entry.sequence_outputs
        self.model_variables = [tf_variable(variable) for variable in model.variables]
        # The preprocessor's settings only: the layer itself stays out of the SavedModel.
        self.tokenizer = sig.ServingTokenizer(preprocessor.vocab_file,
                                              preprocessor.do_lower_case)
        self.max_seq_length = preprocessor.max_seq_length
        config = model.config
        self.id_ranges = (config.vocab_size, config.type_vocab_size)

    def logits(self, features, trim=True, check_ids=True):
        """The model's raw outputs (float32), dropout off: those its model type serves
        (`ModelType.outputs`).

        Args:
            features: int `input_ids`, `input_mask`, `segment_ids` [..., S].
            trim: Compute only up to the batch's longest row (its last nonzero
                `input_mask` position): padding is masked out of attention, so the
                outputs are those of the padded rows; the type's `sequence_outputs`
                are padded back to S with 0.
            check_ids: Fail (when run) on `input_ids` or `segment_ids` outside the
                model's vocab (`signatures.check_ids`), naming the input.
        """
        if check_ids:
            features = signature_inputs.check_ids(features, *self.id_ranges)
        ids = features["input_ids"]
        length = ids.shape[-1] or tf.shape(ids)[-1]  # static when the signature fixes it
        position_axis = ids.shape.rank - 1
        if trim:
            features = signature_inputs.trim_inputs(
                features, signature_inputs.longest_row(features["input_mask"]))
        outputs = self.run_model(features)
        result = {name: tf.cast(outputs[name], tf.float32) for name in self.output_names}
        if trim:
            result.update((name, signature_inputs.pad_positions(result[name], length,
                                                                position_axis))
                          for name in self.sequence_outputs)
        return result

    def run_model(self, features):
        """The model's outputs on `features` as `logits` gives them (trimmed, checked)."""
        return self.model(features, training=False)


def export_signatures(model, preprocessor, export_dir, make_default=None, overwrite=False,
                      versioned=False):
    """The SavedModel of any registered model, after `check_model_and_vocab`:
    `serve_ids`, `serve_examples` and `serving_default` = `make_default(module)` (a
    concrete function of the `ServingModule`; default `serve_ids`). Returns the folder."""
    target = resolve_export_dir(export_dir, overwrite=overwrite, versioned=versioned)
    module = ServingModule(model, preprocessor)
    signatures = sig.id_signatures(module, preprocessor.max_seq_length)
    signatures["serving_default"] = (make_default(module) if make_default
                                     else signatures["serve_ids"])
    return write_saved_model(module, signatures, target)


# ------------------------------------------------------------------------ public API
def export_classifier(model, preprocessor, export_dir, label_names=None,
                      is_regression=None, overwrite=False, versioned=False,
                      doc_stride=None, window_pooling="mean", multi_label=False,
                      multi_label_threshold=0.5):
    """Exports a `BertClassifier` (see the module docstring for the signatures).

    Args:
        model: trained `BertClassifier`.
        preprocessor: the `Preprocessor` the model was fine-tuned with: its vocab and
            case tokenize in the graph; its `max_seq_length` is every signature's
            sequence length (inputs padded / cut to it); `text_pair=True`:
            `serving_default` takes `text_a` and `text_b` (sentence pairs).
        export_dir: SavedModel folder or TF Serving model base path.
        label_names: name of each class, in label-id order (default "0", "1", ...).
        is_regression: one output `score` (default: when the model has 1 class).
        overwrite: replace an existing SavedModel at `export_dir`.
        versioned: write `export_dir/<n>` (n = 1 or the next version).
        doc_stride: long documents (`bert_tf.text.windows`): `serving_default` judges a
            text on all of it, in windows `doc_stride` tokens apart (below a window's
            capacity), as a `--long_document=windows` run; None: cut to one window.
        window_pooling: with `doc_stride`, "mean" or "max" of the windows' logits.
        multi_label: a multi-label model: `serving_default` answers one sigmoid
            probability per label (`signatures.multi_label_outputs`), not a softmax.
        multi_label_threshold: with `multi_label`, a label is predicted when its
            probability is at least this.

    Returns:
        The SavedModel directory written.
    """
    check_model_and_vocab(model, BertClassifier, preprocessor)
    text_pair, max_seq_length = bool(preprocessor.text_pair), preprocessor.max_seq_length
    if doc_stride is not None:
        windows.check_stride(doc_stride, max_seq_length, text_pair)
        if window_pooling not in windows.POOLINGS:
            raise ValueError(f"window_pooling must be one of {list(windows.POOLINGS)}, "
                             f"got {window_pooling!r}")
    if is_regression is None:
        is_regression = model.num_classes == 1
    if multi_label and (is_regression or not 0 < multi_label_threshold < 1):
        raise ValueError("multi_label needs class names (not is_regression) and a "
                         f"multi_label_threshold between 0 and 1, got {multi_label_threshold}")
    if is_regression and model.num_classes != 1:
        raise ValueError(f"is_regression needs a 1-class model, got {model.num_classes}")
    names = [] if is_regression else check_label_names(label_names, model.num_classes)
    threshold = multi_label_threshold if multi_label else None
    return export_signatures(
        model, preprocessor, export_dir, overwrite=overwrite,
        versioned=versioned, make_default=lambda module: classifier_text_signature(
            module, names, is_regression, text_pair, doc_stride, window_pooling, threshold))


def export_span_labeler(model, preprocessor, export_dir, max_query_length=None,
                        max_answer_length=30, overwrite=False, versioned=False):
    """Exports a `BertSpanLabeler` (SQuAD): `question` + `context` in, best answer out.

    The context is cut to one window (`max_seq_length - 3 - question tokens`); the
    question to `max_query_length` tokens (default: 64, at most half the sequence).
    Other args as `export_classifier`.
    """
    check_model_and_vocab(model, BertSpanLabeler, preprocessor, 5)
    max_seq_length = preprocessor.max_seq_length
    if max_query_length is None:
        max_query_length = min(64, (max_seq_length - 3) // 2)
    if not 1 <= max_query_length <= max_seq_length - 4:
        raise ValueError(f"max_query_length must be in [1, max_seq_length - 4 = "
                         f"{max_seq_length - 4}], got {max_query_length}")
    if max_answer_length < 1:
        raise ValueError(f"max_answer_length must be positive, got {max_answer_length}")
    return export_signatures(
        model, preprocessor, export_dir, overwrite=overwrite,
        versioned=versioned, make_default=lambda module: span_text_signature(
            module, max_query_length, max_answer_length))


def export_token_classifier(model, preprocessor, export_dir, label_names=None,
                            overwrite=False, versioned=False):
    """Exports a `BertTokenClassifier` (NER): one tag per whitespace word of `text`.

    Each word is tagged from its first piece, as the NER task trains; the words after
    the first `max_seq_length - 2` pieces are not tagged. Other args as
    `export_classifier`; `label_names` are the tags in label-id order.
    """
    check_model_and_vocab(model, BertTokenClassifier, preprocessor)
    names = check_label_names(label_names, model.num_classes)
    return export_signatures(
        model, preprocessor, export_dir, overwrite=overwrite,
        versioned=versioned, make_default=lambda module: tagger_text_signature(module, names))


def export_encoder(model, preprocessor, export_dir, overwrite=False, versioned=False):
    """Exports a bare `BertEncoder`: `text` in, pooled and sequence output out."""
    check_model_and_vocab(model, BertEncoder, preprocessor)
    return export_signatures(model, preprocessor, export_dir,
                             make_default=encoder_text_signature, overwrite=overwrite,
                             versioned=versioned)


def check_model_class(model_cls):
    """Raises ValueError, with the reason, for a model type without SavedModel
    signatures (`ModelType.saved_model`)."""
    reason = registry.refusal(model_cls, "saved_model")
    if reason is not None:
        raise ValueError(f"a {model_cls.__name__} cannot be exported as a SavedModel: "
                         f"{reason or 'its model type has no serving signatures'}")


def canonical_model_type(model_type):
    """The name of the model type `model_type` spells ("squad" -> "span_labeler").

    Raises:
        ValueError: for an unknown model type, naming the known ones.
    """
    return registry.get(model_type).name


def export_finetuned_model(model, preprocessor, export_dir, model_type, **kwargs):
    """Exports with the SavedModel exporter of `model_type` (a name or alias of
    `bert_tf.serving.registry`); kwargs are its signature options."""
    entry = registry.get(model_type)
    check_model_class(entry.model_class)
    return entry.saved_model(model, preprocessor, export_dir, **kwargs)


def write_serving_model(model, preprocessor, export_dir, request):
    """The "saved_model" format's writer (`bert_tf.serving.formats`): the model type's
    SavedModel exporter with its signature options, its labels, a multi-label
    classifier's sigmoid per label."""
    signature = dict(request.signature)
    if registry.get(request.model_type).labelled:
        signature["label_names"] = request.label_names
    if request.problem_type == "multi_label_classification":
        signature["multi_label"] = True
    return export_finetuned_model(model, preprocessor, export_dir, request.model_type,
                                  overwrite=request.overwrite, versioned=request.versioned,
                                  **signature)


def keras_model_class(model_type):
    """The model class of a model type (for loaders such as export_model.py)."""
    return registry.get(model_type).model_class


__all__ = ["canonical_model_type", "check_model_class", "export_classifier",
           "export_encoder", "export_finetuned_model",
           "export_signatures", "export_span_labeler", "export_token_classifier",
           "keras_model_class", "resolve_export_dir", "SIGNATURE_NAMES"]


formats.register(formats.ExportFormat(
    "saved_model", catalog.EXPORT_FORMATS["saved_model"],
    check=lambda model_cls, request: check_model_class(model_cls),
    write=write_serving_model, versioned=True, thresholds=True))
