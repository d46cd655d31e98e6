"""Dynamic masking in tf.data: the original's rules, whole words, n-gram spans.

Statistics over 10,000 rows: masked share, the 80/10/10 split and the n-gram lengths
within 1 point of their targets.
"""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.train import masking
from data_prep import pretraining_instances

PAD, CLS, SEP, MASK, VOCAB = 0, 2, 3, 4, 1000
CONTINUATION = list(range(850, VOCAB))  # 15% of the ids are ## pieces


def _rows(count, seq_length, seed=0):
    """[CLS] random tokens [SEP], random lengths in [S/2, S], zero padded."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(seq_length // 2, seq_length + 1, count)
    mask = (np.arange(seq_length)[None] < lengths[:, None]).astype(np.int32)
    ids = rng.integers(5, VOCAB, (count, seq_length)).astype(np.int32) * mask
    ids[:, 0] = CLS
    ids[np.arange(count), lengths - 1] = SEP
    return ids, mask, lengths


def _options(**kwargs):
    return masking.MaskingOptions(mask_id=MASK, vocab_size=VOCAB,
                                  special_ids=[PAD, CLS, SEP, MASK],
                                  continuation_ids=CONTINUATION, **kwargs)


def _mask(ids, mask, options, seed=(1, 2)):
    out = masking.mask_features({"input_ids": tf.constant(ids), "input_mask": tf.constant(mask)},
                                options, tf.constant(seed, tf.int64))
    return {name: value.numpy() for name, value in out.items()}


def _replacement_shares(ids, out):
    rows, slots = np.nonzero(out["masked_lm_weights"])
    positions = out["masked_lm_positions"][rows, slots]
    original, now = ids[rows, positions], out["input_ids"][rows, positions]
    assert (out["masked_lm_ids"][rows, slots] == original).all()
    return (np.mean(now == MASK), np.mean((now == original) & (now != MASK)),
            np.mean((now != original) & (now != MASK)))


def test_token_masking_follows_the_original_rules_over_10000_rows():
    ids, mask, lengths = _rows(10000, 128)
    out = _mask(ids, mask, _options(max_predictions_per_seq=20))
    weights = out["masked_lm_weights"]
    # As many per row as the original's rule, the same as data_prep's count.
    expected = np.minimum(20, np.maximum(1, np.round(lengths * 0.15))).astype(int)
    np.testing.assert_array_equal(weights.sum(1), expected)
    packed = pretraining_instances.PackedPairs(ids, lengths.astype(np.int32),
                                               (lengths // 2).astype(np.int32),
                                               np.zeros(len(ids), np.int32))
    vocab_ids = pretraining_instances.VocabIds(CLS, SEP, MASK, VOCAB, np.zeros(VOCAB, bool))
    reference = pretraining_instances.mask_instances(
        packed, pretraining_instances.InstanceOptions(max_predictions_per_seq=20),
        vocab_ids, np.random.default_rng(0))
    np.testing.assert_array_equal(weights.sum(1), reference.masked_lm_weights.sum(1))
    assert weights.sum() / lengths.sum() == pytest.approx(0.15, abs=0.01)
    # Never a special token or padding; positions ascending, then zero padded.
    rows, slots = np.nonzero(weights)
    positions = out["masked_lm_positions"][rows, slots]
    assert not np.isin(ids[rows, positions], [PAD, CLS, SEP]).any()
    assert (positions < lengths[rows]).all()
    for row in range(20):
        real = out["masked_lm_positions"][row][weights[row] > 0]
        assert (np.diff(real) > 0).all()
        assert (out["masked_lm_positions"][row][weights[row] == 0] == 0).all()
    for share, target in zip(_replacement_shares(ids, out), (0.8, 0.1, 0.1)):
        assert share == pytest.approx(target, abs=0.01)
    # Only masked positions changed.
    changed = out["input_ids"] != ids
    masked_at = np.zeros_like(changed)
    masked_at[rows, positions] = True
    assert not (changed & ~masked_at).any()


def test_masks_are_new_for_each_seed_and_the_same_for_the_same_seed():
    ids, mask, _ = _rows(64, 32)
    first = _mask(ids, mask, _options(max_predictions_per_seq=5), seed=(1, 2))
    again = _mask(ids, mask, _options(max_predictions_per_seq=5), seed=(1, 2))
    other = _mask(ids, mask, _options(max_predictions_per_seq=5), seed=(1, 3))
    np.testing.assert_array_equal(first["masked_lm_positions"], again["masked_lm_positions"])
    assert (first["masked_lm_positions"] != other["masked_lm_positions"]).any()


def test_whole_word_masking_masks_whole_words_over_10000_rows():
    ids, mask, lengths = _rows(10000, 128)
    out = _mask(ids, mask, _options(max_predictions_per_seq=20, whole_word_masking=True))
    masked = np.zeros(ids.shape, bool)
    rows, slots = np.nonzero(out["masked_lm_weights"])
    masked[rows, out["masked_lm_positions"][rows, slots]] = True
    continuation = np.isin(ids, CONTINUATION) & (mask > 0)
    continuation[:, 1] = False  # a ## piece right after [CLS] starts a word
    # A ## piece is masked exactly when the piece before it is.
    inside = continuation[:, 1:]
    assert (masked[:, 1:][inside] == masked[:, :-1][inside]).all()
    assert masked.sum() / lengths.sum() == pytest.approx(0.15, abs=0.01)
    for share, target in zip(_replacement_shares(ids, out), (0.8, 0.1, 0.1)):
        assert share == pytest.approx(target, abs=0.01)


def test_records_word_starts_group_words_over_10000_rows():
    """Records of segmented (Chinese) text carry word_starts: a token where it is 0
    continues the word before it, as a ## piece does; the feature is not passed on."""
    ids, mask, lengths = _rows(10000, 128)
    word_starts = (np.random.default_rng(3).random(ids.shape) < 0.5).astype(np.int32) * mask
    features = {"input_ids": tf.constant(ids), "input_mask": tf.constant(mask),
                "word_starts": tf.constant(word_starts)}
    options = _options(max_predictions_per_seq=20, whole_word_masking=True)
    out = {name: value.numpy() for name, value in masking.mask_features(
        features, options, tf.constant([1, 2], tf.int64)).items()}
    assert "word_starts" not in out
    masked = np.zeros(ids.shape, bool)
    rows, slots = np.nonzero(out["masked_lm_weights"])
    masked[rows, out["masked_lm_positions"][rows, slots]] = True
    candidate = (mask > 0) & ~np.isin(ids, [CLS, SEP])
    continuation = (word_starts == 0) | np.isin(ids, CONTINUATION)
    inside = continuation[:, 1:] & candidate[:, 1:] & candidate[:, :-1]
    assert inside.sum() > 0.4 * candidate.sum()  # words of 2 tokens on average
    assert (masked[:, 1:][inside] == masked[:, :-1][inside]).all()
    assert masked.sum() / candidate.sum() == pytest.approx(0.15, abs=0.01)
    # Without whole-word masking the feature changes nothing.
    token_options = _options(max_predictions_per_seq=20)
    with_feature = masking.mask_features(features, token_options, tf.constant([1, 2], tf.int64))
    without = _mask(ids, mask, token_options)
    np.testing.assert_array_equal(with_feature["masked_lm_positions"].numpy(),
                                  without["masked_lm_positions"])


def test_ngram_masking_lengths_follow_one_over_n_over_10000_rows():
    ids, mask, lengths = _rows(10000, 512)
    options = _options(max_predictions_per_seq=76, whole_word_masking=True,
                       max_ngram_size=3)
    masked, unit, words = (t.numpy() for t in masking.choose_units(
        tf.constant(ids), tf.constant(mask), options, tf.constant([5, 6], tf.int64)))
    rows, columns = np.nonzero(masked)
    chosen = np.unique(rows * (ids.shape[1] + 1) + unit[rows, columns])
    sizes = words[chosen // (ids.shape[1] + 1), chosen % (ids.shape[1] + 1)]
    shares = np.bincount(sizes, minlength=4)[1:] / len(sizes)
    targets = (1 / np.arange(1, 4)) / (1 / np.arange(1, 4)).sum()  # 6/11, 3/11, 2/11
    np.testing.assert_allclose(shares, targets, atol=0.01)
    assert masked.sum() / lengths.sum() == pytest.approx(0.15, abs=0.01)
    out = _mask(ids[:2000], mask[:2000], options)
    assert (out["masked_lm_weights"].sum(1) <= 76).all()
    for share, target in zip(_replacement_shares(ids[:2000], out), (0.8, 0.1, 0.1)):
        assert share == pytest.approx(target, abs=0.01)


def test_bad_options_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="max_ngram_size=3 masks spans of whole words"):
        _options(max_ngram_size=3)
    with pytest.raises(ValueError, match="masked_lm_prob=1.5: expected a value in"):
        _options(masked_lm_prob=1.5)
    with pytest.raises(ValueError, match="vocab.txt: the vocabulary has no \\[MASK\\] token"):
        masking.MaskingOptions.from_vocab({"[CLS]": 0, "[SEP]": 1}, "vocab.txt")
