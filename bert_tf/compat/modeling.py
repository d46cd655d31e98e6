"""google-research/bert's `modeling` module, eager, over `bert_tf.models.BertEncoder`.

    from bert_tf.compat import modeling               # was: import modeling
    config = modeling.BertConfig.from_json_file("uncased_L-12_H-768_A-12/bert_config.json")
    model = modeling.BertModel(config, is_training=False, input_ids=input_ids,
                               input_mask=input_mask, token_type_ids=segment_ids)
    modeling.init_from_checkpoint(model, "uncased_L-12_H-768_A-12/bert_model.ckpt")
    pooled = model.get_pooled_output()                # [batch, hidden], the loaded weights

`BertModel` runs the encoder when it is made (TensorFlow 2 is eager: there is no graph
to run later), with dropout only when `is_training`. Its getters return the tensors of
that pass: `get_sequence_output` [B, S, H], `get_pooled_output` [B, H],
`get_all_encoder_layers` (L tensors [B, S, H]), `get_embedding_output` [B, S, H] (the
input of the first layer, from the same pass) and `get_embedding_table` (the word
embeddings variable [V, H]). The values are `BertEncoder`'s: `hidden_act: "gelu"` is
the exact erf GELU the released checkpoints were trained with (the original's
`modeling.gelu` is the tanh approximation).

What differs from the original:

- The weights: `init_from_checkpoint(model, path)` loads a google-research checkpoint
  by its names (`bert/encoder/layer_3/...`) and runs the model again on its inputs, so
  the getters return the loaded values afterwards (tensors taken before are stale). It
  replaces `get_assignment_map_from_checkpoint` + `tf.train.init_from_checkpoint`.
- Training: `BertModel(..., encoder=model.encoder)` runs the same weights on a new
  batch, inside a `tf.GradientTape`; `model.trainable_variables` are the encoder's.
- `scope` names the Keras model (default "bert"); the checkpoint names do not depend on
  it. `use_one_hot_embeddings` (a TPU speed choice) changes nothing here.
- `BertConfig.from_json_file` refuses unknown keys, missing size fields and values
  that cannot work, naming the file (`bert_tf.configs.BertConfig`); a `BertConfig`
  built in code is checked when a `BertModel` is made of it.
- The TF1 building blocks (`attention_layer`, `transformer_model`,
  `embedding_lookup`, ...) are `bert_tf.layers`'s Keras layers.
"""

import collections
import copy
import json
import os

import tensorflow as tf

from bert_tf import configs
from bert_tf.models import BertEncoder
from bert_tf.models.encoder import as_bert_config, encoder_of, standardize_inputs
from bert_tf.weights import checkpoints

# The bert_config.json fields of the original's BertConfig, with its defaults.
_DEFAULTS = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=3072, hidden_act="gelu", hidden_dropout_prob=0.1,
                 attention_probs_dropout_prob=0.1, max_position_embeddings=512,
                 type_vocab_size=16, initializer_range=0.02)


class BertConfig:
    """The original's `BertConfig`: a plain object of the `bert_config.json` fields.

    Args:
        vocab_size: Size of the WordPiece vocabulary.
        hidden_size: Width of the encoder layers and the pooler.
        num_hidden_layers: Number of Transformer layers.
        num_attention_heads: Attention heads per layer.
        intermediate_size: Width of the feed-forward layer.
        hidden_act: "gelu" (exact erf), "gelu_tanh", "relu" or "swish".
        hidden_dropout_prob: Dropout of the embeddings, layers and pooler.
        attention_probs_dropout_prob: Dropout of the attention probabilities.
        max_position_embeddings: Longest sequence the model takes.
        type_vocab_size: Number of `token_type_ids` values.
        initializer_range: Stddev of the truncated-normal initializer.
    """

    def __init__(self, vocab_size, hidden_size=768, num_hidden_layers=12,
                 num_attention_heads=12, intermediate_size=3072, hidden_act="gelu",
                 hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                 max_position_embeddings=512, type_vocab_size=16, initializer_range=0.02):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.hidden_act = hidden_act
        self.intermediate_size = intermediate_size
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range

    @classmethod
    def from_dict(cls, json_object):
        """A config of the fields in `json_object` (the others keep their defaults)."""
        config = cls(vocab_size=None)
        for key, value in json_object.items():
            config.__dict__[key] = value
        return config

    @classmethod
    def from_json_file(cls, json_file):
        """Reads a `bert_config.json`.

        Raises:
            FileNotFoundError, ValueError: naming the file and the problem (unknown
                keys, a missing size field, a value that cannot work).
        """
        return cls.from_dict(configs.BertConfig.from_json_file(json_file).to_dict())

    def to_dict(self):
        """The fields as a new dict."""
        return copy.deepcopy(self.__dict__)

    def to_json_string(self):
        """The fields as `bert_config.json` text."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"


def to_bert_config(config):
    """bert_tf's (checked) `configs.BertConfig` of `config`: this module's `BertConfig`,
    bert_tf's, or a dict of the fields.

    Raises:
        ValueError: naming the field whose value cannot work.
    """
    if isinstance(config, BertConfig):
        return configs.BertConfig.from_dict({**_DEFAULTS, **config.to_dict()},
                                            source="modeling.BertConfig")
    return as_bert_config(config)


def _check_rank(name, tensor, rank=2):
    if tensor is not None and len(tensor.shape) != rank:
        raise ValueError(f"`{name}` must be [batch_size, seq_length] (rank {rank}), got "
                         f"shape {tuple(tensor.shape)}")


class BertModel:
    """The original's `BertModel`, run eagerly on `BertEncoder` (see the module).

    Args:
        config: A `BertConfig` (this module's or bert_tf's) or a dict of its fields.
        is_training: Dropout on (True) or off (False).
        input_ids: int [batch_size, seq_length].
        input_mask: int [batch_size, seq_length], 1 for real tokens (default all ones).
        token_type_ids: int [batch_size, seq_length] segment ids (default all zeros).
        use_one_hot_embeddings: Accepted for the original's callers; no effect.
        scope: The Keras name of a new encoder (default "bert").
        encoder: Run this `BertEncoder` (e.g. `model.encoder` of a `BertModel` made
            before: its weights) instead of a new one.

    Raises:
        ValueError: for inputs that are not [batch_size, seq_length], or a config value
            that cannot work (naming the field).
    """

    def __init__(self, config, is_training, input_ids, input_mask=None, token_type_ids=None,
                 use_one_hot_embeddings=False, scope=None, encoder=None):
        del use_one_hot_embeddings  # the original's TPU gather choice: same values
        self.config = copy.deepcopy(config)
        self.is_training = bool(is_training)
        if not self.is_training and isinstance(self.config, BertConfig):
            self.config.hidden_dropout_prob = 0.0  # as the original's copy says
            self.config.attention_probs_dropout_prob = 0.0
        if encoder is None:
            encoder = BertEncoder(to_bert_config(config), name=scope or "bert")
        self.encoder = encoder_of(encoder)
        if not self.encoder.built:
            self.encoder.build()
        inputs = {"input_ids": input_ids, "input_mask": input_mask,
                  "segment_ids": token_type_ids}
        inputs = {name: None if value is None else tf.convert_to_tensor(value)
                  for name, value in inputs.items()}
        for name, value in zip(("input_ids", "input_mask", "token_type_ids"), inputs.values()):
            _check_rank(name, value)
        self._features = standardize_inputs(inputs)
        self._run()

    def _run(self):
        """Runs the encoder on the inputs; the getters return this pass's tensors."""
        self.embedding_output = self.encoder.embed(self._features, training=self.is_training)
        outputs = self.encoder.encode(self.embedding_output, self._features,
                                      training=self.is_training)
        self.all_encoder_layers = list(outputs["encoder_outputs"])
        self.sequence_output = outputs["sequence_output"]
        self.pooled_output = outputs["pooled_output"]
        self.embedding_table = self.encoder.embeddings.word_embeddings.embeddings

    @property
    def trainable_variables(self):
        """The encoder's trainable variables."""
        return self.encoder.trainable_variables

    def get_pooled_output(self):
        """[batch_size, hidden_size]: tanh dense of the first token's last hidden state."""
        return self.pooled_output

    def get_sequence_output(self):
        """[batch_size, seq_length, hidden_size]: the last layer's hidden states."""
        return self.sequence_output

    def get_all_encoder_layers(self):
        """The hidden states of every layer, a list of [batch_size, seq_length, hidden]."""
        return self.all_encoder_layers

    def get_embedding_output(self):
        """[batch_size, seq_length, hidden_size]: word + position + token type
        embeddings after LayerNorm (and dropout when training): the first layer's input."""
        return self.embedding_output

    def get_embedding_table(self):
        """The word embeddings variable [vocab_size, hidden_size]."""
        return self.embedding_table


def _google_prefix(init_checkpoint):
    """`init_checkpoint` as a checkpoint prefix (a released folder: its bert_model.ckpt)."""
    path = os.fspath(init_checkpoint)
    return os.path.join(path, "bert_model.ckpt") if os.path.isdir(path) else path


def init_from_checkpoint(model, init_checkpoint):
    """Loads a google-research checkpoint (or a Hugging Face / bert_tf one) by its names.

    Replaces the original's `get_assignment_map_from_checkpoint` +
    `tf.train.init_from_checkpoint`. A `BertModel` is then run again on its inputs, so
    that its getters return the loaded values.

    Args:
        model: A `BertModel`, or a bert_tf model (`BertEncoder`, `BertClassifier`, ...).
        init_checkpoint: `.../bert_model.ckpt`, or a folder holding one (or
            `model.safetensors`, or a bert_tf run's checkpoints).

    Returns:
        The `LoadReport`: what was loaded, newly initialised, unmatched and skipped.

    Raises:
        ValueError: when encoder variables would stay random, or shapes differ
            (naming the variables); FileNotFoundError for a missing checkpoint.
    """
    target = model.encoder if isinstance(model, BertModel) else model
    report = checkpoints.load_pretrained_weights(target, init_checkpoint)
    if isinstance(model, BertModel):
        model._run()
    return report


def get_assignment_map_from_checkpoint(model, init_checkpoint):
    """(assignment_map, initialized_variable_names) as the original's, for `model` and a
    google-research checkpoint (a `.../bert_model.ckpt` prefix or its folder).

    The original takes `tf.trainable_variables()` (a TF1 graph's); here `model` (a
    `BertModel` or a bert_tf model) names its variables itself. Nothing is loaded: use
    `init_from_checkpoint`.

    Returns:
        assignment_map: OrderedDict checkpoint name -> the model's (Keras) variable, for
            every variable the checkpoint holds; initialized_variable_names: dict of
            those names, and each with ":0", -> 1.
    """
    target = model.encoder if isinstance(model, BertModel) else model
    if not hasattr(target, "weights"):
        raise TypeError("get_assignment_map_from_checkpoint takes the model (a BertModel "
                        f"or a bert_tf model), got {type(model).__name__}: TF2 has no "
                        "graph of trainable variables to match by name")
    stored = tf.train.load_checkpoint(_google_prefix(init_checkpoint))
    names = stored.get_variable_to_shape_map()
    assignment_map = collections.OrderedDict()
    initialized_variable_names = {}
    for name, (variable, _) in checkpoints.google_variable_map(target).items():
        if name in names:
            assignment_map[name] = variable
            initialized_variable_names[name] = 1
            initialized_variable_names[name + ":0"] = 1
    return assignment_map, initialized_variable_names
