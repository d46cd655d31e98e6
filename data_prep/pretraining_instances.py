"""Pre-training instances exactly as google-research/bert's create_pretraining_data.py.

The algorithm is the original one, split in two steps so that the hot part runs on
numpy arrays of token ids instead of Python lists of strings:

1. ``create_segment_pairs`` (per document, Python ``random.Random``, the same calls in
   the same order as the original): a target length (``short_seq_prob`` of the time a
   random one in [2, max_num_tokens]), sentences gathered until the target is reached,
   A/B split at a random sentence boundary, B the real continuation or (50%, always for
   one-sentence chunks) sentences from another random document, the unused sentences
   put back, the longer segment truncated from a random end.
2. ``mask_instances`` (a batch at a time, numpy): ``[CLS] A [SEP] B [SEP]``, then
   num_to_predict = min(max_predictions_per_seq, max(1, round(len * masked_lm_prob)))
   positions chosen among the non-``[CLS]``/``[SEP]`` tokens by a random order of the
   candidate words (whole words, by ``##`` continuation and the marks of a word
   segmenter, when ``whole_word_masking``),
   a word is skipped when it does not fit the remaining budget, 80% ``[MASK]``, 10%
   the original token, 10% a uniformly random vocabulary id.

``build_chunk_instances`` runs both over a chunk of documents for ``dupe_factor``
passes and shuffles the chunk's instances, as the original does for the whole corpus.
"""

import dataclasses
import functools
import itertools
import random
from typing import List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from bert_tf.options import OptionGroup, compose, option
from bert_tf.runs import option_groups
from data_prep import word_segmentation

MASKING_MODES = ("static", "none")


@dataclasses.dataclass(kw_only=True)
class InstanceShape(OptionGroup):
    """How many copies of the corpus are made, how many rows are short, and whether
    masks are drawn here."""
    short_seq_prob: float = option(
        0.1, "Probability of creating sequences shorter than the maximum length.")
    dupe_factor: int = option(
        10, "Number of times to duplicate the input data (with different masks).")
    masking: str = option(
        "static", "static: masks drawn here, one set per --dupe_factor copy (the "
        "original). none: rows without masked_lm_* features, one copy (--dupe_factor=1), "
        "for run_pretraining --dynamic_masking, which draws new masks every epoch.",
        choices=MASKING_MODES)

    def check(self) -> None:
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise ValueError(f"short_seq_prob={self.short_seq_prob}: expected a value in [0, 1]")
        if self.dupe_factor < 1:
            raise ValueError(f"dupe_factor={self.dupe_factor}: expected >= 1")
        if self.masking == "none" and self.dupe_factor != 1:
            raise ValueError(
                f"dupe_factor={self.dupe_factor} with masking='none': the copies would be "
                "identical (no masks to vary); write one copy, --dupe_factor=1, and let "
                "run_pretraining --dynamic_masking draw new masks every epoch")


def check_instance_rules(options) -> None:
    """Refuses rows too short for a pair, more masks than tokens, and word boundaries
    the masks would not use."""
    if options.max_seq_length < 5:
        raise ValueError(
            f"max_seq_length={options.max_seq_length}: expected at least 5 "
            "([CLS] A [SEP] B [SEP] needs 3 special tokens and one token per segment)")
    if options.max_predictions_per_seq > options.max_seq_length:
        raise ValueError(
            f"max_predictions_per_seq={options.max_predictions_per_seq}: expected at most "
            f"max_seq_length={options.max_seq_length}")
    options.check_segmentation(options.masking, options.whole_word_masking)


# The instance-shaping options of create_pretraining_data; its flags' helps (the
# original's wording) where they differ from run_pretraining's.
INSTANCE_GROUPS = (option_groups.SequenceLength, option_groups.MaskedLm, InstanceShape,
                   word_segmentation.WordSegmentationFields)
INSTANCE_HELPS = {
    "max_seq_length": "Maximum sequence length.",
    "max_predictions_per_seq": "Maximum number of masked LM predictions per sequence.",
    "masked_lm_prob": "Masked LM probability.",
    "whole_word_masking": "Mask all the WordPieces of a word together.",
    "next_sentence": "true: [CLS] A [SEP] B [SEP] pairs with next_sentence_labels (the "
    "original). false: RoBERTa's full-sentence rows, [CLS] sentences [SEP] filled to "
    "--max_seq_length across documents ([SEP] between documents), segment ids 0, no "
    "next_sentence_labels; train with run_pretraining --next_sentence=false."}


def _of(cls, fields) -> "InstanceOptions":
    """The instance options part of `fields` (a tool's options object), checked."""
    return cls(**{field.name: getattr(fields, field.name)
                  for field in dataclasses.fields(cls)})


InstanceOptions = compose(
    "InstanceOptions", INSTANCE_GROUPS, helps=INSTANCE_HELPS,
    checks=(check_instance_rules,),
    namespace={"__post_init__": lambda self: self.check(), "of": classmethod(_of)},
    doc="The instance-shaping options of create_pretraining_data.py, checked when made.")


@dataclasses.dataclass(frozen=True)
class VocabIds:
    """Ids of the special tokens and the `##` continuation table of a vocabulary."""
    cls_id: int
    sep_id: int
    mask_id: int
    vocab_size: int
    is_continuation: np.ndarray  # [V] bool, token starts with "##"

    @classmethod
    def from_vocab(cls, vocab, vocab_file="vocab"):
        """Builds it from a token -> id mapping; names the missing special token."""
        for token in ("[CLS]", "[SEP]", "[MASK]"):
            if token not in vocab:
                raise ValueError(f"{vocab_file}: the vocabulary has no {token} token")
        size = max(vocab.values()) + 1
        continuation = np.zeros([size], dtype=bool)
        for token, index in vocab.items():
            if token.startswith("##"):
                continuation[index] = True
        return cls(vocab["[CLS]"], vocab["[SEP]"], vocab["[MASK]"], size, continuation)


class ChunkCorpus(NamedTuple):
    """Token ids of a chunk, flat, and its documents as sentence offsets into them.

    Attributes:
      token_ids: [T] int32, every sentence of every document, in order (a token that
        continues a segmented word has `word_segmentation.CONTINUATION_BIT` set).
      documents: per document, the list of its n + 1 sentence offsets into token_ids
        (sentence j is token_ids[offsets[j]:offsets[j + 1]]); sentences non-empty.
    """
    token_ids: np.ndarray
    documents: List[List[int]]

    @classmethod
    def from_documents(cls, documents: Sequence[Sequence[Sequence[int]]]) -> "ChunkCorpus":
        """From documents as lists of token-id lists (empty ones are dropped)."""
        flat, offsets_list, position = [], [], 0
        for document in documents:
            offsets = [position]
            for sentence in document:
                if len(sentence):
                    flat.extend(sentence)
                    position += len(sentence)
                    offsets.append(position)
            if len(offsets) > 1:
                offsets_list.append(offsets)
        return cls(np.asarray(flat, dtype=np.int32), offsets_list)


class SegmentPair(NamedTuple):
    """Segments A and B as (start, length) spans of ChunkCorpus.token_ids."""
    a_start: int
    a_length: int
    b_start: int
    b_length: int
    is_random_next: bool


def _bit_pattern(num_draws, first, step):
    """Bits 64 * i + 31 for i = first, first + step, ... < num_draws."""
    # Built as bytes (bit 31 of word i is the top bit of its byte 8 * i + 3, little
    # endian): linear in num_draws, where OR-ing shifted ints one at a time was quadratic
    # (a 40,000-word line took 46 s).
    data = bytearray(8 * max(num_draws, 0))
    data[8 * first + 3::8 * step] = b"\x80" * len(range(first, num_draws, step))
    return int.from_bytes(data, "little")


@functools.lru_cache(maxsize=1 << 16)
def _draw_masks(num_draws, lead, first_to_a):
    """(bits of A's draws, bits of B's draws) in the getrandbits word of truncate_seq_pair."""
    leading = _bit_pattern(lead, 0, 1)
    a_bits = _bit_pattern(num_draws, lead + 1, 2) | (leading if first_to_a else 0)
    b_bits = _bit_pattern(num_draws, lead, 2) | (0 if first_to_a else leading)
    return a_bits, b_bits


def truncate_seq_pair(a_length, b_length, max_num_tokens, rng):
    """The original truncation, one token at a time from a random end of the longer.

    Same random draws as the original loop, without the loop over tokens: each
    `rng.random() < 0.5` of the original takes two 32-bit words of the Mersenne Twister
    and is true when the first word's top bit is 0, so one `getrandbits(64 * n)` (the
    same 2n words, first word lowest) holds the n draws in its bits 64 * i + 31.

    Returns:
      (a_front, a_back, b_front, b_back): tokens removed from each end.
    """
    excess = a_length + b_length - max_num_tokens
    if excess <= 0:
        return 0, 0, 0, 0
    bits = rng.getrandbits(64 * excess)  # a set bit 64 * i + 31: draw i removes the back
    # The longer one loses tokens until equal (ties go to B), then B, A, B, A, ...
    first_to_a = a_length > b_length
    lead = min(excess, abs(a_length - b_length))
    a_bits, b_bits = _draw_masks(excess, lead, first_to_a)
    a_count, b_count = a_bits.bit_count(), b_bits.bit_count()
    a_back, b_back = (bits & a_bits).bit_count(), (bits & b_bits).bit_count()
    return a_count - a_back, a_back, b_count - b_back, b_back


def _random_next_span(documents, document_index, target_b_length, rng):
    """(start, length) of sentences of another random document (original rules; never
    this document: `documents` holds at least two)."""
    # rng._randbelow(n) is what rng.randint(0, n - 1) draws, without two call layers.
    randbelow = rng._randbelow  # pylint: disable=protected-access
    random_document_index = 0
    for _ in range(10):
        random_document_index = randbelow(len(documents))
        if random_document_index != document_index:
            break
    else:  # ten draws of this document (the original then used it): another one
        random_document_index = (document_index + 1 + randbelow(len(documents) - 1)) \
            % len(documents)
    offsets = documents[random_document_index]
    random_start = randbelow(len(offsets) - 1)
    b_end = random_start + 1
    while offsets[b_end] - offsets[random_start] < target_b_length and b_end < len(offsets) - 1:
        b_end += 1
    return offsets[random_start], offsets[b_end] - offsets[random_start]


def create_segment_pairs(documents: Sequence[List[int]], document_index: int,
                         max_seq_length: int, short_seq_prob: float,
                         rng: random.Random) -> List[SegmentPair]:
    """The A/B segment pairs of one document (create_instances_from_document).

    Args:
      documents: ChunkCorpus.documents (sentence offsets per document).
      document_index: the document to pair.
      max_seq_length: including [CLS] and two [SEP].
      short_seq_prob: chance of a random target length in [2, max_seq_length - 3].
      rng: random.Random; called exactly as the original calls its rng, but that a
        "random next" segment always comes from another document: a chunk of one
        document (a one-document corpus) pairs actual next segments only.
    """
    offsets = documents[document_index]
    num_sentences = len(offsets) - 1
    max_num_tokens = max_seq_length - 3
    target_seq_length = max_num_tokens
    if rng.random() < short_seq_prob:
        target_seq_length = rng.randint(2, max_num_tokens)
    pairs = []
    first, i = 0, 0  # current chunk: sentences first..i
    while i < num_sentences:
        current_length = offsets[i + 1] - offsets[first]
        if i == num_sentences - 1 or current_length >= target_seq_length:
            chunk_size = i - first + 1
            a_end = 1  # rng.randint(1, chunk_size - 1), as drawn by the original:
            if chunk_size >= 2:
                a_end = 1 + rng._randbelow(chunk_size - 1)  # pylint: disable=protected-access
            a_start, a_length = offsets[first], offsets[first + a_end] - offsets[first]
            if len(documents) < 2 and chunk_size == 1:
                first = i + 1  # no next sentence and no other document to draw from
                i += 1
                continue
            if len(documents) >= 2 and (chunk_size == 1 or rng.random() < 0.5):
                is_random_next = True
                b_start, b_length = _random_next_span(
                    documents, document_index, target_seq_length - a_length, rng)
                i -= chunk_size - a_end  # put the unused sentences back
            else:
                is_random_next = False
                b_start, b_length = offsets[first + a_end], current_length - a_length
            a_front, a_back, b_front, b_back = truncate_seq_pair(
                a_length, b_length, max_num_tokens, rng)
            pairs.append(SegmentPair(
                a_start + a_front, a_length - a_front - a_back,
                b_start + b_front, b_length - b_front - b_back, is_random_next))
            first = i + 1
        i += 1
    return pairs


class PackedPairs(NamedTuple):
    """`[CLS] A [SEP] B [SEP]` rows, zero-padded."""
    input_ids: np.ndarray             # [N, S] int32
    lengths: np.ndarray               # [N] int32, real tokens per row
    segment_a_lengths: np.ndarray     # [N] int32, len(A) + 2 ([CLS] and first [SEP])
    next_sentence_labels: np.ndarray  # [N] int32, 1 = B is random


def pack_pairs(pairs: Sequence[SegmentPair], token_ids: np.ndarray, max_seq_length: int,
               vocab_ids: VocabIds) -> PackedPairs:
    """Lays the pairs out as padded id rows (one gather, no Python loop over tokens)."""
    spans = np.fromiter(itertools.chain.from_iterable(pairs), dtype=np.int32,
                        count=5 * len(pairs)).reshape(-1, 5)  # [N, 5]
    a_start, a_length, b_start, b_length = (spans[:, k:k + 1] for k in range(4))  # [N, 1]
    lengths = (a_length + b_length + 3)[:, 0]
    if len(pairs) and (lengths.max() > max_seq_length or a_length.min() < 1 or b_length.min() < 1):
        raise AssertionError("a segment pair is empty or longer than max_seq_length")
    column = np.arange(max_seq_length, dtype=np.int32)[None, :]  # [1, S]
    index = np.where(column <= a_length, a_start - 1 + column, b_start - 2 - a_length + column)
    np.clip(index, 0, max(len(token_ids) - 1, 0), out=index)
    input_ids = token_ids[index]  # [N, S] int32
    input_ids[column >= lengths[:, None]] = 0
    input_ids[:, 0] = vocab_ids.cls_id
    rows = np.arange(len(pairs))
    input_ids[rows, a_length[:, 0] + 1] = vocab_ids.sep_id
    input_ids[rows, lengths - 1] = vocab_ids.sep_id
    return PackedPairs(input_ids, lengths.astype(np.int32), (a_length[:, 0] + 2).astype(np.int32),
                       spans[:, 4].astype(np.int32))


class MaskedBatch(NamedTuple):
    input_ids: np.ndarray           # [N, S] int32, with the replacements
    masked_lm_positions: np.ndarray  # [N, P] int32, ascending, zero-padded
    masked_lm_ids: np.ndarray        # [N, P] int32, the original tokens
    masked_lm_weights: np.ndarray    # [N, P] float32, 1.0 for real predictions


def _word_groups(input_ids, marks, lengths, vocab_ids, whole_word_masking):
    """Candidate mask and the word index of every candidate position (None when every
    token is a word of its own: no whole-word masking). A `##` piece continues the word
    before it (across a [SEP], as the original); a token marked by a word segmenter
    (`marks`) continues the token before it when that one is a candidate."""
    max_seq_length = input_ids.shape[1]
    positions = np.arange(max_seq_length, dtype=np.int32)[None, :]
    candidate = ((positions < lengths[:, None]) & (input_ids != vocab_ids.cls_id)
                 & (input_ids != vocab_ids.sep_id))  # [N, S]
    if not whole_word_masking:
        return candidate, None
    first_candidate = candidate & (np.cumsum(candidate, axis=1, dtype=np.int32) == 1)
    continuation = vocab_ids.is_continuation[input_ids]
    continuation[:, 1:] |= marks[:, 1:] & candidate[:, :-1]
    starts = candidate & (~continuation | first_candidate)
    word_index = np.cumsum(starts, axis=1, dtype=np.int32) - 1  # [N, S], valid where candidate
    return candidate, np.where(candidate, word_index, max_seq_length)


def _choose_words(word_index, num_to_predict, rng):
    """Greedy pick over words in a random order; a word that does not fit is skipped."""
    num_rows, max_seq_length = word_index.shape
    flat_index = (np.arange(num_rows)[:, None] * (max_seq_length + 1) + word_index).ravel()
    word_sizes = np.bincount(flat_index, minlength=num_rows * (max_seq_length + 1))
    word_sizes = word_sizes.reshape(num_rows, max_seq_length + 1)[:, :max_seq_length]  # [N, W]
    keys = np.where(word_sizes > 0, rng.random(word_sizes.shape), 2.0)
    order = np.argsort(keys, axis=1, kind="stable")  # [N, W] random order of real words
    sorted_sizes = np.take_along_axis(word_sizes, order, axis=1)
    taken_sorted = np.zeros(sorted_sizes.shape, dtype=bool)
    count = np.zeros([num_rows], dtype=np.int64)
    for rank in range(max_seq_length):
        size = sorted_sizes[:, rank]
        take = (size > 0) & (count + size <= num_to_predict)
        taken_sorted[:, rank] = take
        count += np.where(take, size, 0)
        if not (size > 0).any() or (count >= num_to_predict).all():
            break
    chosen = np.zeros([num_rows, max_seq_length + 1], dtype=bool)
    np.put_along_axis(chosen[:, :max_seq_length], order, taken_sorted, axis=1)
    return chosen


def _choose_tokens(candidate, num_to_predict, num_predictions, rng):
    """A uniformly random num_to_predict-subset of the candidates of each row.

    The same sets as the first k of a shuffled candidate list: the k smallest of
    uniform keys (a partition, not a full sort).
    """
    keys = np.where(candidate, rng.random(candidate.shape, dtype=np.float32), 2.0)  # [N, S]
    kth = min(num_predictions, keys.shape[1]) - 1
    smallest = np.sort(np.partition(keys, kth, axis=1)[:, :kth + 1], axis=1)  # [N, P]
    threshold = np.take_along_axis(smallest, (num_to_predict - 1)[:, None], axis=1)
    chosen = candidate & (keys <= threshold)
    # float32 keys can tie at the threshold (about once in 10^5 rows at seq 512): keep
    # the keys below it and the first tied ones, so that no row has more than its count.
    over = np.nonzero(chosen.sum(axis=1) > num_to_predict)[0]
    if len(over):
        below = candidate[over] & (keys[over] < threshold[over])
        tied = candidate[over] & (keys[over] == threshold[over])
        room = num_to_predict[over] - below.sum(axis=1)
        chosen[over] = below | (tied & (np.cumsum(tied, axis=1) <= room[:, None]))
    return chosen


def mask_instances(packed: PackedPairs, options: InstanceOptions, vocab_ids: VocabIds,
                   rng: np.random.Generator) -> MaskedBatch:
    """Masked-LM predictions for a batch of packed rows (original rules, vectorized).

    Ids may carry word marks (`word_segmentation.CONTINUATION_BIT`); the result's do not.
    """
    input_ids, marks = word_segmentation.split_marks(packed.input_ids)
    lengths = packed.lengths
    num_rows, max_seq_length = input_ids.shape
    num_predictions = options.max_predictions_per_seq
    rounded = np.rint(lengths.astype(np.float64) * options.masked_lm_prob)  # round half even
    num_to_predict = np.minimum(num_predictions, np.maximum(1, rounded)).astype(np.int64)
    candidate, word_index = _word_groups(
        input_ids, marks, lengths, vocab_ids, options.whole_word_masking)
    if options.whole_word_masking:
        chosen_words = _choose_words(word_index, num_to_predict, rng)
        masked = candidate & np.take_along_axis(chosen_words, word_index, axis=1)  # [N, S]
    else:
        masked = _choose_tokens(candidate, num_to_predict, num_predictions, rng)

    rows, cols = np.nonzero(masked)  # row-major: positions ascending within a row
    labels = input_ids[rows, cols]
    draw = rng.random(len(rows))
    keep_or_random = rng.random(len(rows))
    random_ids = rng.integers(0, vocab_ids.vocab_size, size=len(rows), dtype=np.int32)
    replaced = np.where(draw < 0.8, vocab_ids.mask_id,
                        np.where(keep_or_random < 0.5, labels, random_ids))
    output_ids = input_ids.copy()
    output_ids[rows, cols] = replaced

    counts = masked.sum(axis=1, dtype=np.int64)  # rows come sorted: slot = rank within the row
    slot = np.arange(len(rows)) - np.repeat(np.cumsum(counts) - counts, counts)
    positions = np.zeros([num_rows, num_predictions], dtype=np.int32)
    ids = np.zeros([num_rows, num_predictions], dtype=np.int32)
    weights = np.zeros([num_rows, num_predictions], dtype=np.float32)
    positions[rows, slot] = cols
    ids[rows, slot] = labels
    weights[rows, slot] = 1.0
    return MaskedBatch(output_ids, positions, ids, weights)


class ChunkInstances(NamedTuple):
    """All instances of one chunk (dupe_factor passes, shuffled); no masks (None) with
    `masking="none"`."""
    packed: PackedPairs
    masked: Optional[MaskedBatch]
    num_documents: int


def chunk_rngs(random_seed: int, chunk_index: int) -> Tuple[random.Random, np.random.Generator]:
    """The two generators of a chunk, derived from the run seed and the chunk index."""
    sequence = np.random.SeedSequence(entropy=random_seed, spawn_key=(chunk_index,))
    python_seed = int.from_bytes(sequence.generate_state(4, np.uint32).tobytes(), "little")
    return random.Random(python_seed), np.random.default_rng(sequence)


def build_chunk_instances(corpus: ChunkCorpus, options: InstanceOptions,
                          vocab_ids: VocabIds, random_seed: int,
                          chunk_index: int) -> ChunkInstances:
    """Instances of a chunk of tokenized documents, as the original builds a corpus.

    Documents are shuffled, every document gives its pairs in each of the
    `dupe_factor` passes (random-next segments come from this chunk), every instance
    gets its own mask, and the chunk's instances are shuffled.
    """
    py_rng, np_rng = chunk_rngs(random_seed, chunk_index)
    documents = list(corpus.documents)
    py_rng.shuffle(documents)
    pairs = []
    for _ in range(options.dupe_factor):
        for document_index in range(len(documents)):
            pairs.extend(create_segment_pairs(
                documents, document_index, options.max_seq_length,
                options.short_seq_prob, py_rng))
    pairs = [pairs[i] for i in np_rng.permutation(len(pairs))]
    packed = pack_pairs(pairs, corpus.token_ids, options.max_seq_length, vocab_ids)
    masked = None if options.masking == "none" else mask_instances(
        packed, options, vocab_ids, np_rng)
    return ChunkInstances(packed, masked, len(documents))
