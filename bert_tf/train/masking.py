"""Dynamic masked-LM masks, drawn in the tf.data pipeline (TensorFlow ops, batched).

The rules of google-research/bert's create_pretraining_data.py, so that records
written without masks (`create_pretraining_data --masking=none`) get a fresh mask each
epoch instead of `dupe_factor` fixed ones on disk:

* num_to_predict = min(max_predictions_per_seq, max(1, round(length * masked_lm_prob)))
  per instance, `length` counting [CLS] and [SEP] (Python's round: half to even);
* only real tokens other than the special ones ([CLS], [SEP], [PAD], ...) are masked;
* units are chosen in a random order and a unit is skipped when it does not fit the
  remaining budget; a unit is a token, a whole word (`whole_word_masking`: a token and
  the `##` continuations after it, and, when the records carry a `word_starts` feature
  (create_pretraining_data with a word segmenter, for Chinese), the tokens after it
  up to the next word start) or, with `max_ngram_size` N > 1, an n-gram of 1..N
  whole words, its length drawn with weights 1, 1/2, ..., 1/N (the n-gram masking of
  tensorflow/models' create_pretraining_data.py, SpanBERT-like spans); for n-grams
  the first one that does not fit ends the choice (see below);
* each masked token becomes [MASK] 80% of the time, stays itself 10%, and becomes a
  uniformly random vocabulary id 10%.

N-grams: the words of a row are cut into consecutive n-grams whose lengths are drawn
from that distribution (the last, cut short by the end of the row, is not a candidate),
then n-grams are chosen as units. Non-overlapping by construction, so the chosen
lengths follow the target distribution, except that the budget ends the choice of a
row more often at a long n-gram (stopping there, instead of skipping to shorter ones as
for words, keeps that bias under 1 point at seq 512: measured 0.553 / 0.270 / 0.178
for targets 0.545 / 0.273 / 0.182 with N = 3, 15% of ~1.2 tokens a word). The masked
share is then a little under the target (14.8% for 15%).

Random draws are stateless, from a seed [2] per batch, so a pipeline with a fixed seed
draws the same masks each run and different ones each epoch.
"""

import dataclasses
from typing import Optional, Sequence

import numpy as np
import tensorflow as tf

MASK_TOKEN_SHARE = 0.8  # of masked tokens replaced by [MASK]
KEEP_SHARE_OF_REST = 0.5  # of the others: kept (the rest: a random id)
SPECIAL_TOKENS = ("[PAD]", "[CLS]", "[SEP]", "[MASK]")  # never masked
WORD_STARTS = "word_starts"  # optional record feature: 1 where a token starts a word


@dataclasses.dataclass(frozen=True)
class MaskingOptions:
    """How masks are drawn; ids come from the vocabulary of the records.

    Attributes:
        mask_id: Id of [MASK].
        vocab_size: Random replacements are drawn from [0, vocab_size).
        special_ids: Ids never masked ([CLS], [SEP], [PAD], ...).
        max_predictions_per_seq: At most this many masked tokens per instance.
        masked_lm_prob: Share of each instance's tokens to mask.
        whole_word_masking: Mask a word's `##` continuations with it.
        max_ngram_size: Mask spans of up to this many whole words (1: single words or
            tokens); needs `whole_word_masking` when above 1.
        continuation_ids: Ids of the `##` tokens (for whole words).
    """
    mask_id: int
    vocab_size: int
    special_ids: Sequence[int]
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    whole_word_masking: bool = False
    max_ngram_size: int = 1
    continuation_ids: Optional[Sequence[int]] = None

    def __post_init__(self):
        if not 0.0 < self.masked_lm_prob < 1.0:
            raise ValueError(f"masked_lm_prob={self.masked_lm_prob}: expected a value in "
                             "(0, 1)")
        if self.max_predictions_per_seq < 1:
            raise ValueError(f"max_predictions_per_seq={self.max_predictions_per_seq}: "
                             "expected >= 1")
        if self.max_ngram_size < 1:
            raise ValueError(f"max_ngram_size={self.max_ngram_size}: expected >= 1")
        if self.max_ngram_size > 1 and not self.whole_word_masking:
            raise ValueError(f"max_ngram_size={self.max_ngram_size} masks spans of whole "
                             "words: set whole_word_masking too")
        if self.whole_word_masking and self.continuation_ids is None:
            raise ValueError("whole_word_masking needs continuation_ids (the ids of the "
                             "vocabulary's ## tokens)")

    @classmethod
    def from_vocab(cls, vocab, vocab_file="vocab", **kwargs):
        """From a token -> id mapping: [MASK], the special tokens and the ## ids.

        Raises:
            ValueError: naming the vocabulary file when it has no [MASK], [CLS] or [SEP].
        """
        for token in ("[CLS]", "[SEP]", "[MASK]"):
            if token not in vocab:
                raise ValueError(f"{vocab_file}: the vocabulary has no {token} token, "
                                 "which dynamic masking needs")
        specials = sorted(vocab[token] for token in SPECIAL_TOKENS if token in vocab)
        continuation = sorted(index for token, index in vocab.items()
                              if token.startswith("##"))
        return cls(mask_id=vocab["[MASK]"], vocab_size=max(vocab.values()) + 1,
                   special_ids=specials, continuation_ids=continuation, **kwargs)

    def ngram_weights(self):
        """Relative weights 1, 1/2, ..., 1/N of the n-gram lengths 1..N (in words)."""
        return 1.0 / np.arange(1, self.max_ngram_size + 1)


def num_to_predict(lengths, masked_lm_prob, max_predictions_per_seq):
    """Masked tokens per instance of `lengths` real tokens (int32 tensor [B])."""
    rounded = tf.round(tf.cast(lengths, tf.float64) * masked_lm_prob)  # half to even
    return tf.clip_by_value(tf.cast(rounded, tf.int32), 1, max_predictions_per_seq)


def _word_starts(input_ids, candidate, options, word_starts=None):
    """bool [B, S]: candidates that start a unit of whole-word masking (or every one).

    A token continues the word before it when it is a `##` piece or, given the records'
    `word_starts` [B, S], where that is 0; never after a non-candidate ([CLS], [SEP]).
    """
    if not options.whole_word_masking:
        return candidate
    table = np.zeros([options.vocab_size], bool)
    table[np.asarray(options.continuation_ids, np.int64)] = True
    is_continuation = tf.gather(tf.constant(table), input_ids)
    if word_starts is not None:
        is_continuation |= tf.cast(word_starts, tf.int32) == 0
    previous = tf.pad(candidate[:, :-1], [[0, 0], [1, 0]])  # a candidate before it
    return candidate & (~is_continuation | ~previous)


def _ngram_of_word(num_words, seq_length, options, seed):
    """N-gram index [B, S] of every word, and whether n-gram t is whole [B, S]."""
    batch = tf.shape(num_words)[0]
    logits = tf.math.log(tf.constant(options.ngram_weights(), tf.float32))[tf.newaxis]
    draws = tf.random.stateless_categorical(
        tf.repeat(logits, batch, axis=0), seq_length, seed, dtype=tf.int32) + 1  # [B, S]
    ends = tf.cumsum(draws, axis=1)  # [B, S]: end (exclusive, in words) of n-gram t
    words = tf.repeat(tf.range(seq_length)[tf.newaxis], batch, axis=0)
    ngram = tf.searchsorted(ends, words, side="right", out_type=tf.int32)  # [B, S]
    return ngram, ends <= num_words[:, tf.newaxis]


def choose_units(input_ids, input_mask, options, seed, word_starts=None):
    """Which tokens to mask, before replacement (`word_starts`: see `_word_starts`).

    Returns:
        (masked bool [B, S], unit int32 [B, S] (the unit of each candidate token, S for
        the others), unit_words int32 [B, S] (words per unit)).
    """
    seeds = tf.random.experimental.stateless_split(seed, 2)
    seq_length = input_ids.shape[1]
    special = tf.reduce_any(input_ids[..., tf.newaxis] == tf.constant(
        list(options.special_ids), tf.int32), axis=-1)
    candidate = (input_mask > 0) & ~special  # [B, S]
    starts = _word_starts(input_ids, candidate, options, word_starts)
    word = tf.cumsum(tf.cast(starts, tf.int32), axis=1) - 1  # [B, S]
    num_words = tf.reduce_sum(tf.cast(starts, tf.int32), axis=1)  # [B]
    unit_is_whole = None
    if options.max_ngram_size > 1:
        ngram_of_word, unit_is_whole = _ngram_of_word(num_words, seq_length, options,
                                                      seeds[0])
        unit = tf.gather(ngram_of_word, tf.maximum(word, 0), batch_dims=1)
    else:
        unit = word
    unit = tf.where(candidate, unit, seq_length)  # [B, S], S: not a candidate
    batch = tf.shape(input_ids)[0]
    flat = unit + (seq_length + 1) * tf.range(batch)[:, tf.newaxis]
    sizes = tf.math.unsorted_segment_sum(tf.cast(candidate, tf.int32), flat,
                                         batch * (seq_length + 1))
    sizes = tf.reshape(sizes, [batch, seq_length + 1])[:, :seq_length]  # tokens per unit
    words = tf.math.unsorted_segment_sum(tf.cast(starts, tf.int32), flat,
                                         batch * (seq_length + 1))
    words = tf.reshape(words, [batch, seq_length + 1])[:, :seq_length]
    valid = sizes > 0
    if unit_is_whole is not None:
        valid &= unit_is_whole
    budget = num_to_predict(tf.reduce_sum(tf.cast(input_mask > 0, tf.int32), axis=1),
                            options.masked_lm_prob, options.max_predictions_per_seq)
    keys = tf.where(valid, tf.random.stateless_uniform([batch, seq_length], seeds[1]), 2.0)
    order = tf.argsort(keys, axis=1, stable=True)  # random order of the valid units
    ordered_sizes = tf.gather(tf.where(valid, sizes, 0), order, batch_dims=1)
    taken_ordered = _take_while_fits(ordered_sizes, budget,
                                     stop_at_misfit=options.max_ngram_size > 1)  # [B, S]
    taken = tf.gather(taken_ordered, tf.argsort(order, axis=1), batch_dims=1)  # [B, S]
    taken = tf.pad(taken, [[0, 0], [0, 1]])  # unit S: never taken
    masked = tf.gather(taken, unit, batch_dims=1) & candidate
    return masked, unit, words


def _take_while_fits(ordered_sizes, budget, stop_at_misfit=False):
    """Greedy over units in order: a unit is taken when it fits the remaining budget.

    With `stop_at_misfit` (n-grams) the first unit that does not fit ends the row's
    choice: skipping it for later, shorter units would favour short n-grams.
    """
    if ordered_sizes.shape[1] == 0:
        return tf.zeros_like(ordered_sizes, tf.bool)

    def step(state, size):
        count, _, still_open = state
        take = still_open & (size > 0) & (count + size <= budget)
        if stop_at_misfit:
            still_open &= take | (size == 0)
        return count + tf.where(take, size, 0), take, still_open

    initial = (tf.zeros_like(budget), tf.zeros_like(budget, tf.bool),
               tf.ones_like(budget, tf.bool))
    _, taken, _ = tf.scan(step, tf.transpose(ordered_sizes), initializer=initial)
    return tf.transpose(taken)  # [B, S]


def mask_features(features, options, seed):
    """Draws masks for a batch of instances; returns the features with them.

    Args:
        features: dict with int `input_ids`, `input_mask` [B, S], optionally
            `word_starts` [B, S] (the words of whole-word masking; dropped from the
            result) and any others, kept.
        options: `MaskingOptions`.
        seed: int tensor [2] for the stateless random ops.

    Returns:
        The features with `input_ids` replaced (80/10/10) and `masked_lm_positions`,
        `masked_lm_ids` int32, `masked_lm_weights` float32 [B, max_predictions_per_seq]
        added (positions ascending, padded with 0 / weight 0).
    """
    input_ids = tf.cast(features["input_ids"], tf.int32)
    input_mask = tf.cast(features["input_mask"], tf.int32)
    seq_length = input_ids.shape[1]
    if options.max_predictions_per_seq > seq_length:
        raise ValueError(f"max_predictions_per_seq={options.max_predictions_per_seq} is "
                         f"more than the records' max_seq_length={seq_length}")
    choice_seed, replace_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    masked, _, _ = choose_units(input_ids, input_mask, options, choice_seed,
                                features.get(WORD_STARTS))
    draws = tf.random.experimental.stateless_split(replace_seed, 3)
    shape = tf.shape(input_ids)
    to_mask = tf.random.stateless_uniform(shape, draws[0]) < MASK_TOKEN_SHARE
    keep = tf.random.stateless_uniform(shape, draws[1]) < KEEP_SHARE_OF_REST
    random_ids = tf.random.stateless_uniform(shape, draws[2], maxval=options.vocab_size,
                                             dtype=tf.int32)
    replaced = tf.where(to_mask, options.mask_id, tf.where(keep, input_ids, random_ids))
    columns = tf.range(seq_length)[tf.newaxis]
    keys = tf.sort(tf.where(masked, columns, seq_length + columns), axis=1)
    keys = keys[:, :options.max_predictions_per_seq]  # masked positions first, ascending
    real = keys < seq_length
    positions = tf.where(real, keys, 0)
    result = dict(features)
    result.pop(WORD_STARTS, None)
    result["input_ids"] = tf.where(masked, replaced, input_ids)
    result["masked_lm_positions"] = positions
    result["masked_lm_ids"] = tf.where(real, tf.gather(input_ids, positions, batch_dims=1), 0)
    result["masked_lm_weights"] = tf.cast(real, tf.float32)
    return result


def mask_dataset(dataset, options, seed=None):
    """Draws masks for every batch of `dataset` (dicts of instance batches).

    Each batch gets its own seed from `tf.data.Dataset.random(seed)`: new masks every
    epoch, the same ones for the same `seed` (None: nondeterministic).
    """
    seeds = tf.data.Dataset.random(seed=seed).batch(2)
    return tf.data.Dataset.zip(dataset, seeds).map(
        lambda features, batch_seed: mask_features(features, options, batch_seed),
        num_parallel_calls=tf.data.AUTOTUNE)
