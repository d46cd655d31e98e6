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
   candidate words (whole words, by ``##`` continuation, when ``do_whole_word_mask``),
   a word is skipped when it does not fit the remaining budget, 80% ``[MASK]``, 10%
   the original token, 10% a uniformly random vocabulary id.

``build_chunk_instances`` runs both over a chunk of documents for ``dupe_factor``
passes and shuffles the chunk's instances, as the original does for the whole corpus.
"""

import dataclasses
import random
from typing import List, NamedTuple, Sequence, Tuple

import numpy as np

Document = List[List[int]]  # sentences of token ids


@dataclasses.dataclass(frozen=True)
class InstanceOptions:
    """The instance-shaping flags of create_pretraining_data.py."""
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    dupe_factor: int = 10
    do_whole_word_mask: bool = False

    def __post_init__(self):
        if self.max_seq_length < 5:
            raise ValueError(
                f"max_seq_length={self.max_seq_length}: expected at least 5 "
                "([CLS] A [SEP] B [SEP] needs 3 special tokens and one token per segment)")
        if not 0.0 < self.masked_lm_prob < 1.0:
            raise ValueError(f"masked_lm_prob={self.masked_lm_prob}: expected a value in (0, 1)")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise ValueError(f"short_seq_prob={self.short_seq_prob}: expected a value in [0, 1]")
        if self.max_predictions_per_seq < 1:
            raise ValueError(
                f"max_predictions_per_seq={self.max_predictions_per_seq}: expected >= 1")
        if self.max_predictions_per_seq > self.max_seq_length:
            raise ValueError(
                f"max_predictions_per_seq={self.max_predictions_per_seq}: expected at most "
                f"max_seq_length={self.max_seq_length}")
        if self.dupe_factor < 1:
            raise ValueError(f"dupe_factor={self.dupe_factor}: expected >= 1")


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


class SegmentPair(NamedTuple):
    tokens_a: List[int]
    tokens_b: List[int]
    is_random_next: bool


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
    """Truncates the longer list, one token at a time from a random end (in place)."""
    while True:
        total_length = len(tokens_a) + len(tokens_b)
        if total_length <= max_num_tokens:
            break
        trunc_tokens = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del trunc_tokens[0]
        else:
            trunc_tokens.pop()


def _random_next_tokens(all_documents, document_index, target_b_length, rng):
    """Sentences of another random document from a random start (original rules)."""
    random_document_index = 0
    for _ in range(10):
        random_document_index = rng.randint(0, len(all_documents) - 1)
        if random_document_index != document_index:
            break
    random_document = all_documents[random_document_index]
    random_start = rng.randint(0, len(random_document) - 1)
    tokens_b = []
    for j in range(random_start, len(random_document)):
        tokens_b.extend(random_document[j])
        if len(tokens_b) >= target_b_length:
            break
    return tokens_b


def create_segment_pairs(all_documents: Sequence[Document], document_index: int,
                         max_seq_length: int, short_seq_prob: float,
                         rng: random.Random) -> List[SegmentPair]:
    """The A/B segment pairs of one document (create_instances_from_document)."""
    document = all_documents[document_index]
    max_num_tokens = max_seq_length - 3
    target_seq_length = max_num_tokens
    if rng.random() < short_seq_prob:
        target_seq_length = rng.randint(2, max_num_tokens)
    pairs = []
    current_chunk, current_length, i = [], 0, 0
    while i < len(document):
        segment = document[i]
        current_chunk.append(segment)
        current_length += len(segment)
        if i == len(document) - 1 or current_length >= target_seq_length:
            if current_chunk:
                a_end = 1
                if len(current_chunk) >= 2:
                    a_end = rng.randint(1, len(current_chunk) - 1)
                tokens_a = []
                for j in range(a_end):
                    tokens_a.extend(current_chunk[j])
                if len(current_chunk) == 1 or rng.random() < 0.5:
                    is_random_next = True
                    tokens_b = _random_next_tokens(
                        all_documents, document_index, target_seq_length - len(tokens_a), rng)
                    i -= len(current_chunk) - a_end  # put the unused sentences back
                else:
                    is_random_next = False
                    tokens_b = []
                    for j in range(a_end, len(current_chunk)):
                        tokens_b.extend(current_chunk[j])
                truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
                if tokens_a and tokens_b:
                    pairs.append(SegmentPair(tokens_a, tokens_b, is_random_next))
            current_chunk, current_length = [], 0
        i += 1
    return pairs


class PackedPairs(NamedTuple):
    """`[CLS] A [SEP] B [SEP]` rows, zero-padded."""
    input_ids: np.ndarray             # [N, S] int32
    lengths: np.ndarray               # [N] int32, real tokens per row
    segment_a_lengths: np.ndarray     # [N] int32, len(A) + 2 ([CLS] and first [SEP])
    next_sentence_labels: np.ndarray  # [N] int32, 1 = B is random


def pack_pairs(pairs: Sequence[SegmentPair], max_seq_length: int, vocab_ids: VocabIds) -> PackedPairs:
    """Lays the pairs out as padded id rows."""
    cls_id, sep_id = vocab_ids.cls_id, vocab_ids.sep_id
    flat = []
    for tokens_a, tokens_b, _ in pairs:
        flat.append(cls_id)
        flat.extend(tokens_a)
        flat.append(sep_id)
        flat.extend(tokens_b)
        flat.append(sep_id)
    len_a = np.fromiter((len(p.tokens_a) for p in pairs), dtype=np.int32, count=len(pairs))
    len_b = np.fromiter((len(p.tokens_b) for p in pairs), dtype=np.int32, count=len(pairs))
    lengths = len_a + len_b + 3
    if len(pairs) and lengths.max() > max_seq_length:
        raise AssertionError("a segment pair was not truncated to max_seq_length")
    valid = np.arange(max_seq_length, dtype=np.int32)[None, :] < lengths[:, None]  # [N, S]
    input_ids = np.zeros([len(pairs), max_seq_length], dtype=np.int32)
    input_ids[valid] = np.asarray(flat, dtype=np.int32)
    labels = np.fromiter((p.is_random_next for p in pairs), dtype=np.int32, count=len(pairs))
    return PackedPairs(input_ids, lengths, len_a + 2, labels)


class MaskedBatch(NamedTuple):
    input_ids: np.ndarray           # [N, S] int32, with the replacements
    masked_lm_positions: np.ndarray  # [N, P] int32, ascending, zero-padded
    masked_lm_ids: np.ndarray        # [N, P] int32, the original tokens
    masked_lm_weights: np.ndarray    # [N, P] float32, 1.0 for real predictions


def _word_groups(input_ids, lengths, vocab_ids, do_whole_word_mask):
    """Candidate mask and the word index of every candidate position."""
    max_seq_length = input_ids.shape[1]
    positions = np.arange(max_seq_length)[None, :]
    candidate = ((positions < lengths[:, None]) & (input_ids != vocab_ids.cls_id)
                 & (input_ids != vocab_ids.sep_id))  # [N, S]
    if do_whole_word_mask:
        first_candidate = candidate & (np.cumsum(candidate, axis=1) == 1)
        starts = candidate & (~vocab_ids.is_continuation[input_ids] | first_candidate)
    else:
        starts = candidate
    word_index = np.cumsum(starts, axis=1) - 1  # [N, S], valid where candidate
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


def mask_instances(packed: PackedPairs, options: InstanceOptions, vocab_ids: VocabIds,
                   rng: np.random.Generator) -> MaskedBatch:
    """Masked-LM predictions for a batch of packed rows (original rules, vectorized)."""
    input_ids, lengths = packed.input_ids, packed.lengths
    num_rows, max_seq_length = input_ids.shape
    num_predictions = options.max_predictions_per_seq
    num_to_predict = np.minimum(
        num_predictions,
        np.maximum(1, np.rint(lengths.astype(np.float64) * options.masked_lm_prob))).astype(np.int64)
    candidate, word_index = _word_groups(input_ids, lengths, vocab_ids, options.do_whole_word_mask)
    chosen_words = _choose_words(word_index, num_to_predict, rng)
    masked = candidate & np.take_along_axis(chosen_words, word_index, axis=1)  # [N, S]

    rows, cols = np.nonzero(masked)  # row-major: positions ascending within a row
    labels = input_ids[rows, cols]
    draw = rng.random(len(rows))
    keep_or_random = rng.random(len(rows))
    random_ids = rng.integers(0, vocab_ids.vocab_size, size=len(rows), dtype=np.int32)
    replaced = np.where(draw < 0.8, vocab_ids.mask_id,
                        np.where(keep_or_random < 0.5, labels, random_ids))
    output_ids = input_ids.copy()
    output_ids[rows, cols] = replaced

    slot = np.cumsum(masked, axis=1)[rows, cols] - 1
    positions = np.zeros([num_rows, num_predictions], dtype=np.int32)
    ids = np.zeros([num_rows, num_predictions], dtype=np.int32)
    weights = np.zeros([num_rows, num_predictions], dtype=np.float32)
    positions[rows, slot] = cols
    ids[rows, slot] = labels
    weights[rows, slot] = 1.0
    return MaskedBatch(output_ids, positions, ids, weights)


class ChunkInstances(NamedTuple):
    """All instances of one chunk (dupe_factor passes, shuffled)."""
    packed: PackedPairs
    masked: MaskedBatch
    num_documents: int


def chunk_rngs(random_seed: int, chunk_index: int) -> Tuple[random.Random, np.random.Generator]:
    """The two generators of a chunk, derived from the run seed and the chunk index."""
    sequence = np.random.SeedSequence(entropy=random_seed, spawn_key=(chunk_index,))
    python_seed = int.from_bytes(sequence.generate_state(4, np.uint32).tobytes(), "little")
    return random.Random(python_seed), np.random.default_rng(sequence)


def build_chunk_instances(documents: Sequence[Document], options: InstanceOptions,
                          vocab_ids: VocabIds, random_seed: int,
                          chunk_index: int) -> ChunkInstances:
    """Instances of a chunk of tokenized documents, as the original builds a corpus.

    Documents are shuffled, every document gives its pairs in each of the
    `dupe_factor` passes (random-next segments come from this chunk), each pass masks
    anew, and the chunk's instances are shuffled.
    """
    py_rng, np_rng = chunk_rngs(random_seed, chunk_index)
    all_documents = [[s for s in document if s] for document in documents]
    all_documents = [d for d in all_documents if d]
    py_rng.shuffle(all_documents)
    pairs = []
    for _ in range(options.dupe_factor):
        for document_index in range(len(all_documents)):
            pairs.extend(create_segment_pairs(
                all_documents, document_index, options.max_seq_length,
                options.short_seq_prob, py_rng))
    pairs = [pairs[i] for i in np_rng.permutation(len(pairs))]
    packed = pack_pairs(pairs, options.max_seq_length, vocab_ids)
    masked = mask_instances(packed, options, vocab_ids, np_rng)
    return ChunkInstances(packed, masked, len(all_documents))
