"""BertEncoder: the BERT backbone (embeddings, L Transformer blocks, pooler)."""

import keras
import tensorflow as tf

from bert_tf.configs import BertConfig
from bert_tf.layers.attention import packed_attention_mask
from bert_tf.layers.dense import Projection
from bert_tf.layers.embeddings import BertEmbeddings
from bert_tf.layers.heads import Pooler
from bert_tf.layers.transformer import TransformerBlock


# Optional inputs of rows that pack several sequences (bert_tf.train.sequence_packing).
PACKED_INPUTS = ("position_ids", "sequence_ids")
# The inputs of every BERT model, int [batch, seq_length] each.
INPUT_NAMES = ("input_ids", "input_mask", "segment_ids")


def as_bert_config(config):
    """Accepts a BertConfig or a dict of its fields; returns a BertConfig."""
    if isinstance(config, BertConfig):
        return config
    if isinstance(config, dict):
        return BertConfig.from_dict(dict(config))
    raise TypeError(f"`config` must be a BertConfig or a dict, got {type(config).__name__}.")


def standardize_inputs(inputs):
    """The encoder's inputs as int32 tensors, defaults filled in.

    `input_mask` defaults to all ones and `segment_ids` to all zeros when absent;
    `position_ids` [B, S] and `sequence_ids` [B, S] (packed rows: the 1-based index of
    the sequence each token belongs to, 0 for padding) are kept when given.

    Returns:
        dict with `input_ids`, `input_mask` ([B, S] or [B, S, S]), `segment_ids`, and
        `position_ids` / `sequence_ids` when present.

    Raises:
        ValueError: naming the missing key when `input_ids` is absent.
    """
    if not isinstance(inputs, dict) or "input_ids" not in inputs:
        raise ValueError("BERT models take a dict with int tensors `input_ids`, "
                         "`input_mask`, `segment_ids` of shape [batch, seq_length]; "
                         f"got {type(inputs).__name__} without `input_ids`.")
    input_ids = tf.cast(inputs["input_ids"], tf.int32)
    input_mask = inputs.get("input_mask")
    input_mask = tf.ones_like(input_ids) if input_mask is None else tf.cast(
        input_mask, tf.int32)
    segment_ids = inputs.get("segment_ids")
    segment_ids = tf.zeros_like(input_ids) if segment_ids is None else tf.cast(
        segment_ids, tf.int32)
    features = {"input_ids": input_ids, "input_mask": input_mask,
                "segment_ids": segment_ids}
    for key in PACKED_INPUTS:
        if inputs.get(key) is not None:
            features[key] = tf.cast(inputs[key], tf.int32)
    return features


def assert_inputs_agree(tensors, num_dims, what):
    """`tensors` after a check that their first `num_dims` dimensions agree.

    Inside a `tf.function` (a serving signature) the check runs before anything reads
    the tensors, so inputs of different batch sizes or lengths fail with a message that
    names both inputs and their shapes instead of broadcasting (a batch of 1 against a
    batch of 3) or failing deep inside the model.

    Args:
        tensors: dict name -> tensor; each is compared with the first.
        num_dims: how many leading dimensions must be equal (2: [batch, seq_length],
            1: the batch size); a tensor of lower rank disagrees.
        what: those dimensions in words, for the message ("batch sizes").

    Returns:
        dict of the same tensors (`tf.identity`, run after the checks).

    Raises:
        tf.errors.InvalidArgumentError: (when run) naming both inputs and their shapes.
    """
    names = list(tensors)
    shapes = {name: tf.shape(tensors[name]) for name in names}

    def leading(shape):  # rank < num_dims is padded with -1, which no dimension equals
        head = shape[:num_dims]
        return tf.pad(head, [[0, num_dims - tf.size(head)]], constant_values=-1)

    checks = [tf.debugging.Assert(
        tf.reduce_all(tf.equal(leading(shapes[name]), leading(shapes[names[0]]))),
        [f"inputs disagree: {name} has shape", shapes[name], f"but {names[0]} has shape",
         shapes[names[0]], f"; their {what} must be equal"], name=f"check_{name}")
              for name in names[1:]]
    with tf.control_dependencies(checks):
        return {name: tf.identity(tensors[name]) for name in names}


def check_input_shapes(inputs):
    """The model inputs (a dict) after `assert_inputs_agree`: `input_mask` and
    `segment_ids` [batch, seq_length] as `input_ids`, every other input of its batch size.
    Anything but a dict with `input_ids` is returned as it is (the model refuses it)."""
    if not isinstance(inputs, dict) or "input_ids" not in inputs:
        return inputs
    features = assert_inputs_agree({name: inputs[name] for name in INPUT_NAMES
                                    if inputs.get(name) is not None},
                                   2, "batch sizes and lengths")
    others = {name: value for name, value in inputs.items()
              if name not in features and value is not None}
    if others:
        batch = assert_inputs_agree({"input_ids": features["input_ids"], **others}, 1,
                                    "batch sizes")
        features.update({name: batch[name] for name in others})
    return features


def export_input_signature(names=INPUT_NAMES):
    """`model.export`'s default signature: int32 [batch, seq_length] TensorSpecs named
    `names`, both dimensions free (any length up to `max_position_embeddings`)."""
    return [{name: tf.TensorSpec([None, None], tf.int32, name=name) for name in names}]


class SavedModelExport:
    """`model.export(path)` for the BERT models (mixed into each of them).

    Keras infers a subclassed model's export signature from its first call: float32
    inputs with that call's sequence length; and a signature cannot return the
    encoder's list `encoder_outputs`. Here the default signature is
    `export_input_signature(export_input_names)` (int32, any batch and length), the
    inputs are checked to agree (`check_input_shapes`), and `serving_outputs` gives a
    dict of tensors.
    """

    export_input_names = INPUT_NAMES

    def export(self, filepath, format="tf_saved_model", verbose=None,  # noqa: A002
               input_signature=None, **kwargs):
        """Exports the model for inference, as `keras.Model.export`.

        Args:
            filepath: Folder of the artifact.
            format: "tf_saved_model" (default): a SavedModel whose `serve` endpoint
                (also `serving_default`) takes a dict of int32 tensors and returns
                `serving_outputs`; another Keras format gets the same default
                signature and Keras's own export.
            verbose: Print what was written (Keras's default when None).
            input_signature: The `serve` arguments; default one dict of int32
                [batch, seq_length] TensorSpecs, `export_input_names`.
            **kwargs: Passed to Keras.
        """
        if input_signature is None:
            input_signature = export_input_signature(self.export_input_names)
        if not self.built:
            self.build()
        if format != "tf_saved_model":
            super().export(filepath, format=format, verbose=verbose,
                           input_signature=input_signature, **kwargs)
            return
        archive = keras.export.ExportArchive()
        archive.track(self)
        archive.add_endpoint("serve", self.serving_outputs, input_signature, **kwargs)
        archive.write_out(filepath, verbose=True if verbose is None else verbose)

    def serving_outputs(self, inputs):
        """What `export`'s `serve` returns: the model's outputs at inference (dropout
        off), after `check_input_shapes`."""
        return self(check_input_shapes(inputs), training=False)


@keras.saving.register_keras_serializable(package="bert_tf")
class BertEncoder(SavedModelExport, keras.Model):
    """BERT encoder (Devlin et al., 2019), post-LayerNorm Transformer.

    Call with a dict of int tensors `input_ids`, `input_mask`, `segment_ids`, each
    [B, S] (any S up to `max_position_embeddings`). Optional: `input_mask` may be a 3-D
    attention mask [B, S, S] (1 where token i may attend to token j); `position_ids`
    [B, S] replace 0 ... S-1; `sequence_ids` [B, S] (rows packing several sequences:
    1, 2, ... per sequence, 0 for padding) give the block-diagonal attention mask,
    each sequence attending only to itself. Returns a dict:
    `sequence_output` [B, S, H], `pooled_output` [B, H] and `encoder_outputs`, the
    list of the L blocks' outputs [B, S, H].

    Sub-layers: `embeddings`, `embeddings_project` (only with a config's
    `embedding_size`: E -> H, google-research/electra's and transformers' name),
    `layer_0` ... `layer_{L-1}`, `pooler`.

    Args:
        config: A `BertConfig` or a dict of its fields.
        name: The model's name; an explicit default, so that the variable paths
            (`bert_encoder/embeddings/...`, `bert_classifier/bert_encoder/...` in a
            head model) do not depend on how many models the process built before
            (Keras's auto names count up: `bert_encoder_1`, ...).
    """

    # What a head model declares about its heads (see `EncoderHeadModel`): none here.
    hf_head_names = {}
    pretrained_heads = ()

    def __init__(self, config, name="bert_encoder", **kwargs):
        super().__init__(name=name, **kwargs)
        self.config = as_bert_config(config)
        cfg = self.config
        policy = self.dtype_policy
        self.embeddings = BertEmbeddings(
            cfg.vocab_size, cfg.embedding_width, cfg.max_position_embeddings,
            cfg.type_vocab_size, cfg.hidden_dropout_prob, cfg.initializer_range,
            name="embeddings", dtype=policy)
        self.embeddings_project = None
        if cfg.embedding_size is not None:
            self.embeddings_project = Projection(
                cfg.hidden_size, initializer_range=cfg.initializer_range,
                name="embeddings_project", dtype=policy)
        self.transformer_layers = [
            TransformerBlock(cfg.hidden_size, cfg.num_attention_heads,
                             cfg.intermediate_size, cfg.hidden_act,
                             cfg.hidden_dropout_prob, cfg.attention_probs_dropout_prob,
                             cfg.initializer_range, name=f"layer_{index}", dtype=policy)
            for index in range(cfg.num_hidden_layers)]
        # Keras' TrackedList is invisible to tf.train.Checkpoint's object graph: without
        # these attributes a checkpoint of the model alone lacks every transformer block.
        for block in self.transformer_layers:
            setattr(self, block.name, block)
        self.pooler = Pooler(cfg.hidden_size, cfg.initializer_range, name="pooler",
                             dtype=policy)

    def build(self, input_shape=None):
        """Creates every variable; shapes come from the config, not the inputs."""
        if not self.embeddings.built:  # another encoder's, shared (ELECTRA), is built
            self.embeddings.build()
        if self.embeddings_project is not None:
            self.embeddings_project.build((None, self.config.embedding_size))
        for block in self.transformer_layers:
            block.build()
        self.pooler.build()
        self.built = True

    def call(self, inputs, training=None):
        features = standardize_inputs(inputs)
        return self.encode(self.embed(features, training=training), features,
                           training=training)

    def embed(self, features, training=None):
        """The input of the first Transformer block, [B, S, H]: the embeddings of
        `features` (what `standardize_inputs` returns), projected to H with a config's
        `embedding_size`. `call` is `encode(embed(features), features)`; the two halves
        give the embedding output of the same pass (`bert_tf.compat.modeling`)."""
        hidden_states = self.embeddings(
            features["input_ids"], features["segment_ids"],
            position_ids=features.get("position_ids"), training=training)  # [B, S, E]
        if self.embeddings_project is not None:
            hidden_states = self.embeddings_project(hidden_states)  # [B, S, H]
        return hidden_states

    def encode(self, hidden_states, features, training=None):
        """The Transformer blocks and the pooler over `embed`'s output: `call`'s dict."""
        attention_mask = features["input_mask"]  # [B, S] or [B, S, S]
        if "sequence_ids" in features:
            attention_mask = packed_attention_mask(features["sequence_ids"])  # [B, S, S]
        encoder_outputs = []
        for block in self.transformer_layers:
            hidden_states = block(hidden_states, attention_mask, training=training)
            encoder_outputs.append(hidden_states)
        return {
            "sequence_output": hidden_states,  # [B, S, H]
            "pooled_output": self.pooler(hidden_states),  # [B, H]
            "encoder_outputs": encoder_outputs,
        }

    def serving_outputs(self, inputs):
        """As the model's outputs, with `encoder_outputs` one tensor [B, L, S, H] (the
        L blocks' outputs stacked after the batch): a signature returns tensors only."""
        outputs = super().serving_outputs(inputs)
        return dict(outputs, encoder_outputs=tf.stack(outputs["encoder_outputs"], axis=1))

    @classmethod
    def from_encoder(cls, encoder, **head_kwargs):
        """The encoder itself (`from_pretrained` builds every model class this way)."""
        if head_kwargs:
            raise ValueError(f"BertEncoder takes no head arguments, got {sorted(head_kwargs)}.")
        return encoder

    def get_config(self):
        config = super().get_config()
        config["config"] = self.config.to_dict()
        return config


class EncoderHeadModel(SavedModelExport, keras.Model):
    """A `BertEncoder` plus heads (`heads()`); serializes the encoder nested in its config.

    Subclasses create their head layers in `__init__` and list them in `heads()`, and
    name the model by default (`default_name`, e.g. "bert_classifier"): an explicit
    name keeps the variable paths the same however many models the process built
    (Keras's auto names count up: `bert_classifier_1`, ...).

    What the weights formats need to know of a head, the class says itself (the layer
    below `bert_tf.serving.registry`, where a model type registers once):

    - `google_head_entries()`: the google-research checkpoint name of every head
      variable (`bert_tf.models.checkpoint_names`); a variable without one makes every
      checkpoint format refuse the model, naming it;
    - `hf_head_names`: google-research name -> Hugging Face name of the head weights
      that transformers' BERT classes do not name already (`classifier.*`,
      `qa_outputs.*`, `cls.predictions.*`, `cls.seq_relationship.*` are known);
    - `pretrained_heads`: (attribute, google-research prefix, title) of the heads a
      training checkpoint of a previous run may hold and a warm start restores
      (`bert_tf.train.warm_start`); other heads start fresh.
    """

    default_name = None
    hf_head_names = {}
    pretrained_heads = ()

    def __init__(self, encoder, **kwargs):
        if not isinstance(encoder, BertEncoder):
            raise TypeError(f"{type(self).__name__}: encoder must be a BertEncoder (e.g. "
                            f"BertEncoder(config)), got {type(encoder).__name__}")
        kwargs.setdefault("name", self.default_name)
        super().__init__(**kwargs)
        self.encoder = encoder

    @classmethod
    def from_encoder(cls, encoder, **head_kwargs):
        """This model around an existing encoder (what `from_pretrained` builds with)."""
        return cls(encoder, **head_kwargs)

    @property
    def config(self):
        return self.encoder.config

    def heads(self):
        """The head layers, built after the encoder."""
        raise NotImplementedError

    def google_head_entries(self):
        """google-research name -> (variable, transposed) of every head variable (see
        the class docstring); none by default."""
        return {}

    def build(self, input_shape=None):
        if not self.encoder.built:
            self.encoder.build()
        for head in self.heads():
            head.build()
        self.built = True

    def get_config(self):
        config = super().get_config()
        config["encoder"] = keras.saving.serialize_keras_object(self.encoder)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        # Without its build_config the encoder is deserialized unbuilt, and this model's
        # build builds it inside this model's name scope, as for a model made afresh:
        # the variable paths of a loaded model are then the saved model's
        # (`bert_classifier/bert_encoder/...`, not `bert_encoder/...`).
        encoder = {key: value for key, value in config["encoder"].items()
                   if key != "build_config"}
        config["encoder"] = keras.saving.deserialize_keras_object(encoder)
        return cls(**config)


def encoder_of(model):
    """The `BertEncoder` of a BERT model: the model itself, or its `encoder`.

    Raises:
        TypeError: for a model that is neither.
    """
    if isinstance(model, BertEncoder):
        return model
    encoder = getattr(model, "encoder", None)
    if not isinstance(encoder, BertEncoder):
        raise TypeError(f"expected a BERT model with a BertEncoder, got "
                        f"{type(model).__name__}.")
    return encoder
