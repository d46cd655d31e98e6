"""ELECTRA (Clark et al., 2020): a small masked-LM generator fills the masked positions
with sampled tokens, and the discriminator, a BERT encoder, tells for every token
whether it was replaced.

    model = ElectraPretrainer(BertEncoder(config), generator_config(config, 0.25))
    outputs = model(features)   # create_pretraining_data's features, masks included

The generator shares the discriminator's token, position and segment embeddings (so
its `embedding_size` is the discriminator's embedding width; a narrower generator
projects them, `generator/embeddings_project`). Its masked-LM head is tied to those
embeddings.
"""

import dataclasses

import keras
import tensorflow as tf

from bert_tf.configs import BertConfig
from bert_tf.layers.dense import Projection
from bert_tf.models import BertEncoder, BertPretrainer
from bert_tf.models.checkpoint_names import (dense_entries, encoder_entries,
                                             layer_norm_entries)
from bert_tf.models.encoder import INPUT_NAMES, EncoderHeadModel, as_bert_config

# What the generator must share with the discriminator: the embedding tables' shapes.
SHARED_FIELDS = ("vocab_size", "max_position_embeddings", "type_vocab_size")
# The paper's generator widths (hyperparameter table): 1/3 of the discriminator for
# Base (hidden 768), 1/4 for Small (256) and Large (1024).
BASE_HIDDEN_SIZE = 768


def default_generator_fraction(config) -> float:
    """The paper's generator width as a fraction of the discriminator's `config`."""
    return 1 / 3 if config.hidden_size == BASE_HIDDEN_SIZE else 1 / 4


def generator_config(config, hidden_fraction=None, layers_fraction=1.0) -> BertConfig:
    """The generator of discriminator `config`, as google-research/electra sizes it:
    hidden `round(H * hidden_fraction)`, `round(L * layers_fraction)` layers, heads of 64
    (at least one, dividing the width), intermediate 4x, embeddings the discriminator's.

    Raises:
      ValueError: naming the fraction, when the generator would be wider or deeper than
        the discriminator or empty.
    """
    if hidden_fraction is None:
        hidden_fraction = default_generator_fraction(config)
    for name, value in (("generator_hidden_size", hidden_fraction),
                        ("generator_layers", layers_fraction)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                0 < value <= 1):
            raise ValueError(f"--{name}={value}: expected a fraction of the "
                             "discriminator's size in (0, 1]; a generator larger than the "
                             "discriminator makes replacements it cannot learn to detect")
    hidden = max(1, int(round(config.hidden_size * hidden_fraction)))
    heads = max(1, hidden // 64)
    while hidden % heads:
        heads -= 1
    return dataclasses.replace(
        config, hidden_size=hidden, num_attention_heads=heads, intermediate_size=4 * hidden,
        num_hidden_layers=max(1, int(round(config.num_hidden_layers * layers_fraction))),
        embedding_size=config.embedding_width)


def check_generator_config(generator, discriminator) -> None:
    """Refuses a generator that cannot share the discriminator's embeddings or is larger.

    Raises:
      ValueError: naming the setting and both values.
    """
    for name in SHARED_FIELDS + ("embedding_width",):
        ours, theirs = getattr(generator, name), getattr(discriminator, name)
        if ours != theirs:
            raise ValueError(f"generator {name}={ours} but the discriminator's is {theirs}: "
                             "the two share the token, position and segment embeddings, "
                             "so these must be equal")
    for name in ("hidden_size", "num_hidden_layers"):
        if getattr(generator, name) > getattr(discriminator, name):
            raise ValueError(f"generator {name}={getattr(generator, name)} is larger than "
                             f"the discriminator's ({getattr(discriminator, name)}): a "
                             "generator too strong makes the task too hard (the paper uses "
                             "1/4 to 1/2 of the width)")


@keras.saving.register_keras_serializable(package="bert_tf")
class DiscriminatorHead(keras.layers.Layer):
    """One logit per token: dense H -> H with the activation, then dense H -> 1.
    google-research/electra names: `discriminator_predictions/dense`, `.../dense_1`.

    Args:
      hidden_size, hidden_act, initializer_range: as in `BertConfig`.
    """

    def __init__(self, hidden_size, hidden_act="gelu", initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.dense = Projection(hidden_size, activation=hidden_act,
                                initializer_range=initializer_range, name="dense",
                                dtype=self.dtype_policy)
        self.prediction = Projection(1, initializer_range=initializer_range,
                                     name="dense_prediction", dtype=self.dtype_policy)

    def build(self, input_shape=None):
        self.dense.build((None, self.hidden_size))
        self.prediction.build((None, self.hidden_size))
        self.built = True

    def call(self, sequence_output):
        """[B, S, H] -> float32 logits [B, S] (> 0: replaced)."""
        return tf.cast(self.prediction(self.dense(sequence_output))[..., 0], tf.float32)

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, hidden_act=self.hidden_act,
                      initializer_range=self.initializer_range)
        return config


def scatter_positions(input_ids, positions, values, weights):
    """`input_ids` [B, S] with `values` [B, P] written at `positions` [B, P] where
    `weights` [B, P] > 0 (padding slots, weight 0, write nothing). One-hot arithmetic
    keeps every shape static (XLA, TPU). A position named twice (never, in records of
    create_pretraining_data) takes the larger value."""
    hits = tf.one_hot(positions, tf.shape(input_ids)[1], dtype=tf.int32)  # [B, P, S]
    hits *= tf.cast(weights > 0, tf.int32)[:, :, tf.newaxis]
    written = tf.reduce_max(hits * values[:, :, tf.newaxis], axis=1)  # [B, S], ids >= 0
    return input_ids * (1 - tf.reduce_max(hits, axis=1)) + written


@keras.saving.register_keras_serializable(package="bert_tf")
class ElectraPretrainer(EncoderHeadModel):
    """The ELECTRA generator and discriminator, trained together.

    Call with create_pretraining_data's features: `input_ids` (masked), `input_mask`,
    `segment_ids` [B, S] (and the packed rows' `position_ids`, `sequence_ids`),
    `masked_lm_positions`, `masked_lm_ids`, `masked_lm_weights` [B, P]. Returns float32
    `masked_lm_logits` [B, P, V] (the generator's), `discriminator_logits` [B, S],
    int32 `replaced` [B, S] (1 where the discriminator's input differs from the original
    text) and int32 `sampled_ids` [B, P]. The samples are drawn from
    `softmax(masked_lm_logits / temperature)` with no gradient through them; pass
    `replacements` [B, P] to use given ones instead (a reference comparison).

    Sub-layers: `encoder` (the discriminator), `generator` (a `BertPretrainer` without a
    next-sentence head, its encoder's `embeddings` being the discriminator's),
    `discriminator_predictions`. Neither pooler is read: both are frozen.

    Args:
      encoder: The discriminator, a `BertEncoder`.
      generator_config: The generator's `BertConfig` (or dict); see `generator_config`.
      temperature: Of the sampling (1.0: the generator's distribution).
    """

    default_name = "electra_pretrainer"
    export_input_names = INPUT_NAMES + ("masked_lm_positions", "masked_lm_ids",
                                        "masked_lm_weights")
    pretrained_heads = (("generator", "generator/", "generator"),
                        ("discriminator_head", "discriminator_predictions/",
                         "discriminator head"))

    def __init__(self, encoder, generator_config, temperature=1.0, **kwargs):
        super().__init__(encoder, **kwargs)
        self.generator_config = as_bert_config(generator_config)
        check_generator_config(self.generator_config, encoder.config)
        self.temperature = float(temperature)
        generator_encoder = BertEncoder(self.generator_config, name="generator_encoder",
                                        dtype=self.dtype_policy)
        generator_encoder.embeddings = encoder.embeddings  # shared tables
        self.generator = BertPretrainer(generator_encoder, next_sentence=False,
                                        name="generator", dtype=self.dtype_policy)
        self.discriminator_head = DiscriminatorHead(
            encoder.config.hidden_size, encoder.config.hidden_act,
            encoder.config.initializer_range, name="discriminator_predictions",
            dtype=self.dtype_policy)
        encoder.pooler.trainable = False
        generator_encoder.pooler.trainable = False

    def heads(self):
        return [self.generator, self.discriminator_head]

    def build(self, input_shape=None):
        super().build(input_shape)
        self.seed_generator = keras.random.SeedGenerator(name="sampling_seed")

    def google_head_entries(self):
        """google-research/electra's names: `generator/*` (the generator's encoder, its
        embeddings being `bert/embeddings/*`), `generator_predictions/*` and
        `discriminator_predictions/*` (the discriminator is `bert/*`; that release
        calls it `electra/*`, `bert_tf.weights.checkpoints` translates)."""
        generator, head = self.generator, self.generator.masked_lm
        entries = encoder_entries(generator.encoder, "generator", embeddings=False)
        entries.update(dense_entries("generator_predictions/dense", head.transform))
        entries.update(layer_norm_entries("generator_predictions/LayerNorm",
                                          head.transform_layer_norm))
        entries["generator_predictions/output_bias"] = (head.output_bias, False)
        entries.update(dense_entries("discriminator_predictions/dense",
                                     self.discriminator_head.dense))
        entries.update(dense_entries("discriminator_predictions/dense_1",
                                     self.discriminator_head.prediction))
        return entries

    def sample(self, logits):
        """Token ids [B, P] drawn from softmax(logits / temperature) (Gumbel-max)."""
        seed = tf.cast(tf.bitwise.bitwise_and(
            tf.cast(self.seed_generator.next(), tf.int64), 0xFFFFFFFF), tf.int32)
        uniform = tf.random.stateless_uniform(tf.shape(logits), seed, minval=1e-9,
                                              maxval=1.0)
        gumbel = -tf.math.log(-tf.math.log(uniform))
        return tf.argmax(logits / self.temperature + gumbel, -1, output_type=tf.int32)

    def call(self, inputs, replacements=None, training=None):
        for key in ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights"):
            if key not in inputs:
                raise ValueError(f"ElectraPretrainer inputs need `{key}` [batch, "
                                 f"max_predictions]; got keys {sorted(inputs)}.")
        positions = tf.cast(inputs["masked_lm_positions"], tf.int32)  # [B, P]
        weights = tf.cast(inputs["masked_lm_weights"], tf.float32)  # [B, P]
        masked_lm_logits = self.generator(inputs, training=training)[
            "masked_lm_logits"]  # [B, P, V]
        if replacements is None:
            replacements = self.sample(tf.stop_gradient(masked_lm_logits))
        replacements = tf.cast(replacements, tf.int32)  # [B, P]
        input_ids = tf.cast(inputs["input_ids"], tf.int32)  # [B, S]
        original = scatter_positions(input_ids, positions,
                                     tf.cast(inputs["masked_lm_ids"], tf.int32), weights)
        corrupted = scatter_positions(input_ids, positions, replacements, weights)
        features = dict(inputs, input_ids=corrupted)
        sequence_output = self.encoder(features, training=training)["sequence_output"]
        return {"masked_lm_logits": masked_lm_logits,
                "discriminator_logits": self.discriminator_head(sequence_output),  # [B, S]
                "replaced": tf.cast(tf.not_equal(corrupted, original), tf.int32),  # [B, S]
                "sampled_ids": replacements}

    def get_config(self):
        config = super().get_config()
        config.update(generator_config=self.generator_config.to_dict(),
                      temperature=self.temperature)
        return config


def electra_losses(features, outputs, discriminator_weight=50.0, generator_weight=1.0):
    """The ELECTRA losses, float32: the generator's masked LM (as BERT's) and the
    replaced-token detection's sigmoid cross-entropy averaged over the real tokens
    (`input_mask`), and `total_loss = generator_weight * mlm + discriminator_weight *
    rtd`."""
    mlm_logits = tf.cast(outputs["masked_lm_logits"], tf.float32)  # [B, P, V]
    ids = tf.cast(features["masked_lm_ids"], tf.int32)
    weights = tf.cast(features["masked_lm_weights"], tf.float32)
    per_slot = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=ids, logits=mlm_logits)
    mlm_loss = tf.reduce_sum(per_slot * weights) / (tf.reduce_sum(weights) + 1e-5)
    real = real_token_weights(features)  # [B, S]
    per_token = tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.cast(outputs["replaced"], tf.float32),
        logits=outputs["discriminator_logits"])  # [B, S]
    rtd_loss = tf.reduce_sum(per_token * real) / (tf.reduce_sum(real) + 1e-6)
    return {"total_loss": generator_weight * mlm_loss + discriminator_weight * rtd_loss,
            "masked_lm_loss": mlm_loss, "discriminator_loss": rtd_loss}


def real_token_weights(features):
    """1.0 on the real tokens of [B, S] rows, 0.0 on padding (packed rows included)."""
    if features.get("sequence_ids") is not None:
        return tf.cast(features["sequence_ids"] > 0, tf.float32)
    mask = features.get("input_mask")
    if mask is None:
        return tf.ones_like(features["input_ids"], tf.float32)
    return tf.cast(tf.cast(mask, tf.int32) > 0, tf.float32)


def electra_metrics(features, outputs):
    """(values, weights) per metric: the generator's masked-LM accuracy and loss, the
    discriminator's accuracy, precision and recall of "replaced" over the real tokens,
    and the share of sampled tokens equal to the original (which count as not
    replaced)."""
    mlm_logits = tf.cast(outputs["masked_lm_logits"], tf.float32)
    ids = tf.cast(features["masked_lm_ids"], tf.int32)
    slot_weights = tf.cast(features["masked_lm_weights"], tf.float32)  # [B, P]
    real = real_token_weights(features)  # [B, S]
    replaced = tf.cast(outputs["replaced"], tf.float32)  # [B, S]
    predicted = tf.cast(outputs["discriminator_logits"] > 0, tf.float32)  # [B, S]
    correct = tf.cast(tf.equal(predicted, replaced), tf.float32)

    def hit(a, b):
        return tf.cast(tf.equal(a, b), tf.float32)
    return {
        "masked_lm_accuracy": (hit(tf.argmax(mlm_logits, -1, output_type=tf.int32), ids),
                               slot_weights),
        "masked_lm_loss": (tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=ids, logits=mlm_logits), slot_weights),
        "discriminator_loss": (tf.nn.sigmoid_cross_entropy_with_logits(
            labels=replaced, logits=outputs["discriminator_logits"]), real),
        "discriminator_accuracy": (correct, real),
        "discriminator_precision": (replaced, predicted * real),
        "discriminator_recall": (predicted, replaced * real),
        "sampled_equal_original": (hit(tf.cast(outputs["sampled_ids"], tf.int32), ids),
                                   slot_weights),
    }
