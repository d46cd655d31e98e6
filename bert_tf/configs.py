"""BertConfig: the fields of google-research/bert's `bert_config.json`."""

import dataclasses
import json
import math
import os
from typing import Optional

from absl import logging

from bert_tf.io import fileio
from bert_tf.io import input_paths

# "truncated_normal": google-research/bert's N(0, r) cut at 2r (its std is 0.88 r);
# "normal": N(0, r), as Hugging Face transformers initialises new heads.
KERNEL_DISTRIBUTIONS = ("truncated_normal", "normal")

# "gelu" is the exact erf GELU the released checkpoints were trained with; the tanh
# approximation has its own name.
HIDDEN_ACTIVATIONS = ("gelu", "gelu_tanh", "relu", "swish")

_POSITIVE_INT_FIELDS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "max_position_embeddings",
    "type_vocab_size",
)
_PROBABILITY_FIELDS = ("hidden_dropout_prob", "attention_probs_dropout_prob")


# Keys of google-research's released configs (the Chinese and multilingual models') that
# its BertConfig ignores: read with a note in the log. Other unknown keys are refused
# (a misspelt field would silently take its default).
IGNORED_KEYS = ("directionality", "pooler_fc_size", "pooler_num_attention_heads",
                "pooler_num_fc_layers", "pooler_size_per_head", "pooler_type")

# Fields every bert_config.json must name: they fix the shapes of the weights.
REQUIRED_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                 "intermediate_size")


@dataclasses.dataclass(frozen=True)
class BertConfig:
    """Hyper-parameters of a BERT encoder, as in google-research's `bert_config.json`.

    Attributes:
        vocab_size: Size of the WordPiece vocabulary.
        hidden_size: Width H of every Transformer layer.
        num_hidden_layers: Number of Transformer layers L.
        num_attention_heads: Number of attention heads A; must divide `hidden_size`.
        intermediate_size: Width of the feed-forward block.
        hidden_act: One of `HIDDEN_ACTIVATIONS`.
        hidden_dropout_prob: Dropout on embeddings and every sub-layer output.
        attention_probs_dropout_prob: Dropout on the attention probabilities.
        max_position_embeddings: Longest sequence the position table covers.
        type_vocab_size: Number of segment ids.
        initializer_range: Stddev of the truncated-normal initializer.
        embedding_size: Width E of the token, position and segment embeddings when it
            differs from `hidden_size` (ELECTRA-Small: 128 against 256); the encoder
            then projects them to H (`embeddings_project`, as transformers'
            `ElectraModel`). None (or equal to `hidden_size`): a plain BERT, and
            `to_dict` leaves the field out.
    """

    vocab_size: int
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 16
    initializer_range: float = 0.02
    embedding_size: Optional[int] = None

    def __post_init__(self):
        if self.embedding_size == self.hidden_size:  # one model, one spelling: none
            object.__setattr__(self, "embedding_size", None)
        self.validate()

    def validate(self):
        """Raises ValueError naming the field when a value cannot work."""
        for name in _POSITIVE_INT_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"`{name}` must be a positive integer, got {value!r}.")
        size = self.embedding_size
        if size is not None and (isinstance(size, bool) or not isinstance(size, int)
                                 or size <= 0):
            raise ValueError(f"`embedding_size` must be a positive integer or null, got "
                             f"{size!r}.")
        for name in _PROBABILITY_FIELDS:
            value = getattr(self, name)
            if (isinstance(value, bool) or not isinstance(value, (int, float))
                    or not 0.0 <= value < 1.0):
                raise ValueError(f"`{name}` must be a number in [0, 1), got {value!r}.")
        value = self.initializer_range
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or not math.isfinite(value) or value <= 0):
            raise ValueError(f"`initializer_range` must be a finite positive number, "
                             f"got {value!r}.")
        if self.hidden_act not in HIDDEN_ACTIVATIONS:
            raise ValueError(
                f"unknown `hidden_act` {self.hidden_act!r}; "
                f"expected one of {', '.join(HIDDEN_ACTIVATIONS)}."
            )
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"`hidden_size` ({self.hidden_size}) must be divisible by "
                f"`num_attention_heads` ({self.num_attention_heads})."
            )

    @property
    def embedding_width(self):
        """The width of the embeddings: `embedding_size`, else `hidden_size`."""
        return self.embedding_size or self.hidden_size

    @property
    def attention_head_size(self):
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def field_names(cls):
        return [field.name for field in dataclasses.fields(cls)]

    @classmethod
    def from_dict(cls, values, source="config"):
        """Builds a config from a dict of `bert_config.json` fields.

        Args:
            values: Mapping of field name to value. The shape fields (`REQUIRED_KEYS`)
                are required.
            source: What to call the input in error messages (e.g. a file path).

        Raises:
            ValueError: on unknown keys (but `IGNORED_KEYS`, logged), a missing shape
                field or an invalid value.
        """
        if not isinstance(values, dict):
            raise ValueError(f"{source}: expected a JSON object, got {type(values).__name__}.")
        known = set(cls.field_names())
        ignored = sorted(set(values) & set(IGNORED_KEYS))
        if ignored:
            logging.info("%s: ignoring %s (keys of google-research's released configs "
                         "that its BertConfig does not use)", source, ", ".join(ignored))
            values = {key: value for key, value in values.items() if key not in ignored}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(
                f"{source}: unknown BERT config keys {unknown}; expected keys are "
                f"{sorted(known)}."
            )
        # The shape fields have no safe default: a missing one would silently build a
        # model of another size (the original's defaults are BERT-base's).
        missing = [key for key in REQUIRED_KEYS if key not in values]
        if missing:
            raise ValueError(f"{source}: missing required key(s) "
                             f"{', '.join(f'`{key}`' for key in missing)}; a "
                             "bert_config.json names every one of "
                             f"{', '.join(REQUIRED_KEYS)}.")
        try:
            return cls(**values)
        except ValueError as e:
            raise ValueError(f"{source}: {e}") from None

    @classmethod
    def from_json_file(cls, path):
        """Reads a `bert_config.json`; errors name the file and the problem."""
        path = fileio.existing_file(path, "BERT config file")
        with open(path, "rb") as f:  # read once: sniffed, then parsed
            data = f.read()
        input_paths.check_text_bytes(data, path)  # binary data: refused as a whole, named
        try:
            values = json.loads(data.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise ValueError(f"{path}: not UTF-8 text ({e}).") from e
        except json.JSONDecodeError as e:
            raise ValueError(
                f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})."
            ) from e
        return cls.from_dict(values, source=path)

    def to_dict(self):
        """The `bert_config.json` fields; `embedding_size` only where it is set."""
        values = dataclasses.asdict(self)
        if values["embedding_size"] is None:
            del values["embedding_size"]
        return values

    def to_json_string(self):
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, path):
        """Writes the config as `bert_config.json` (temporary name, then rename)."""
        fileio.write_text_atomic(os.fspath(path), self.to_json_string())
