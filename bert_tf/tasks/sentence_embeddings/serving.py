"""The sentence-encoder model type (`SentenceEncoder`): where its settings come from, how
it loads from any folder, its SavedModel signatures and its registration
(`bert-export-model --model_type=sentence_encoder`; a sentence-embeddings run exports
with nothing else). Batch B, S = max_seq_length, H = hidden size:

- `serving_default`: raw UTF-8 `text` string [B], WordPiece inside the graph,
  `[CLS] text [SEP]` cut to S -> `embedding` float32 [B, H] (L2-normalized when the
  model normalizes). Each batch is padded to its longest text, not to S.
- `serve_ids`: int32 `input_ids`, `input_mask`, `segment_ids` [B, S] -> `embedding`.
- `serve_examples`: serialized tf.Example [B] (int64 features of S values) -> `embedding`.

Formats: saved_model, sentence_transformers (`sentence_transformers.py`), litert
(int32 ids [1, S] in, `embedding` out) and tfhub (TF Hub's BERT preprocessor and
encoder; the encoder's `pooled_output` and `default` are the sentence vector, as TF Hub's
BERT-based sentence encoders, LaBSE and CMLM, serve theirs: `hub_outputs`). The settings of a model (`model_settings`):
a sentence-embeddings run's config.json (its `pooling`, `normalize`, `max_seq_length`,
case), a sentence-transformers folder's modules, else the defaults (mean pooling, not
normalized) for a BERT or Hugging Face folder.
"""

import dataclasses
from typing import Optional

import tensorflow as tf
from absl import logging

from bert_tf.serving import export, registry
from bert_tf.serving import signatures as sig
from bert_tf.runs import run_config
from bert_tf.tasks.sentence_embeddings import sentence_transformers as st_folder
from bert_tf.tasks.sentence_embeddings.model import SentenceEncoder, pool_tokens
from bert_tf.text import input_layout_graph
from bert_tf.weights import checkpoints

DEFAULT_POOLING = "mean"


@dataclasses.dataclass(frozen=True)
class ModelSettings:
    """What a folder says of the sentence encoder in it (None: it says nothing).

    Attributes:
      weights: Where the encoder's weights are (a sentence-transformers folder's BERT
        folder; else the path given).
      pooling, normalize, max_seq_length, do_lower_case: As trained.
      source: The file they come from ("" when none).
    """
    weights: str
    pooling: Optional[str] = None
    normalize: Optional[bool] = None
    max_seq_length: Optional[int] = None
    do_lower_case: Optional[bool] = None
    source: str = ""


def model_settings(path) -> ModelSettings:
    """The settings of the sentence encoder at `path`: a sentence-embeddings run (its
    config.json's options), a sentence-transformers folder, or any other checkpoint
    (nothing said).

    Raises:
      ValueError / FileNotFoundError: naming a damaged config or modules file.
    """
    if st_folder.is_folder(path):
        folder = st_folder.read_folder(path)
        return ModelSettings(weights=folder.transformer_path, pooling=folder.pooling,
                             normalize=folder.normalize,
                             max_seq_length=folder.max_seq_length,
                             do_lower_case=folder.do_lower_case, source=folder.source)
    saved = run_config.read(path)
    if not saved or saved.get("model_type") != registry_name():
        return ModelSettings(weights=path, do_lower_case=run_config.trained_case(saved),
                             source=saved.get("path", ""))
    options = dict(saved.get("options") or {}, **(saved.get("export") or {}))
    return ModelSettings(weights=path, pooling=options.get("pooling"),
                         normalize=options.get("normalize"),
                         max_seq_length=options.get("max_seq_length"),
                         do_lower_case=run_config.trained_case(saved), source=saved["path"])


def load_sentence_encoder(path, config=None, pooling=None, normalize=None,
                          allow_random_encoder=False, settings=None):
    """A `SentenceEncoder` with the weights at `path` (a sentence-embeddings run or any
    run's encoder, a google-research, Hugging Face or sentence-transformers folder).

    Args:
      path: The checkpoint.
      config: A BertConfig or the path of its file (default: the one in or beside it).
      pooling, normalize: Override what the folder says (`model_settings`); neither
        said: mean pooling, not normalized.
      allow_random_encoder: See `bert_tf.weights.checkpoints.from_pretrained`.
      settings: `model_settings(path)` when already read.
    """
    settings = settings or model_settings(path)
    pooling = pooling or settings.pooling or DEFAULT_POOLING
    normalize = bool(settings.normalize if normalize is None else normalize)
    model = checkpoints.from_pretrained(SentenceEncoder, settings.weights, config=config,
                                        allow_random_encoder=allow_random_encoder,
                                        pooling=pooling, normalize=normalize)
    logging.info("Loaded a SentenceEncoder (%s pooling%s) from %s", pooling,
                 ", normalized" if normalize else "", settings.weights)
    return model


def _load(init_checkpoint, config):
    """`ModelType.load`: the encoder at `init_checkpoint` with its folder's settings."""
    return load_sentence_encoder(init_checkpoint, config)


def hub_outputs(model, features, training):
    """`ModelType.hub_outputs`: the encoder's outputs with `pooled_output` the sentence
    vector (pooled, normalized when the model normalizes) instead of BERT's pooler."""
    result = model.encoder(features, training=training)
    embedding = pool_tokens(result["sequence_output"], features["input_mask"],
                            model.pooling)  # [B, H]
    if model.normalize:
        embedding = tf.math.l2_normalize(embedding, axis=-1)
    return dict(result, pooled_output=embedding)


def text_signature(module):
    """`serving_default`: `text` [B] -> `embedding` [B, H]."""
    @tf.function(autograph=False,
                 input_signature=[tf.TensorSpec([None], tf.string, "text")])
    def serve_text(text):
        features = sig.encode_texts(module.tokenizer, module.max_seq_length, text)
        return module.logits(input_layout_graph.trim_to_longest(features))
    return serve_text.get_concrete_function()


def export_sentence_encoder(model, preprocessor, export_dir, overwrite=False,
                            versioned=False):
    """Exports a `SentenceEncoder` as a SavedModel (see the module docstring). Args as
    `bert_tf.serving.export.export_classifier`."""
    export.check_model_and_vocab(model, SentenceEncoder, preprocessor)
    return export.export_signatures(model, preprocessor, export_dir,
                                    make_default=text_signature,
                                    overwrite=overwrite, versioned=versioned)


def folder_values(path) -> dict:
    """What a sentence-transformers folder at `path` says as a run's config would ({}
    for any other folder): a sentence encoder, its max_seq_length and case, and "path"
    (the file that says so). The model type's `read_folder`: bert-export-model reads
    such a folder as a run."""
    if not st_folder.is_folder(path):
        return {}
    settings = model_settings(path)
    values = {"model_type": registry_name(), "max_seq_length": settings.max_seq_length,
              "do_lower_case": settings.do_lower_case}
    return dict({name: value for name, value in values.items() if value is not None},
                path=settings.source)


MODEL_TYPE = registry.register(registry.ModelType(
    name="sentence_encoder", model_class=SentenceEncoder,
    formats=("saved_model", "litert", "tfhub", st_folder.FORMAT),
    refused={
        "huggingface": "a transformers folder would hold the encoder without its pooling; "
                       "export_format=sentence_transformers writes that folder (a BertModel "
                       "at its root) with the pooling and normalization beside it",
        "keras_hub": "keras-hub has no BERT sentence-embedding task; export the encoder "
                     "(model_type=encoder) and pool its sequence output"},
    saved_model=export_sentence_encoder, outputs=("embedding",),
    litert_layout="[CLS] text [SEP]; `embedding` is the pooled (and normalized) vector",
    load=_load, hub_outputs=hub_outputs, read_folder=folder_values))


def registry_name():
    """The --model_type of a sentence encoder (what its runs record)."""
    return MODEL_TYPE.name
