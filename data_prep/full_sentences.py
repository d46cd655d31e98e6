"""RoBERTa's FULL-SENTENCES rows, for pre-training without next-sentence prediction.

`create_pretraining_data --next_sentence=false`: instead of A/B segment pairs, each row
is `[CLS] s1 s2 ... [SEP]`, whole sentences taken contiguously, crossing document
boundaries with a [SEP] between documents (Liu et al., 2019, sec. 4.2), filled up to
`max_seq_length`. A sentence longer than a row is cut into row-sized pieces (no text
is dropped). All segment ids are 0; no `next_sentence_labels` are written. Documents
are visited in the chunk's shuffled order, once (`dupe_factor` copies are that many
passes), and the rows are shuffled.
"""

from typing import List

import numpy as np

from data_prep import pretraining_instances


def _row_spans(documents, budget):
    """Per row, its pieces as (start, length) spans of the token ids, or (-1, 1) for a
    document separator."""
    rows, current, used = [], [], 0
    for offsets in documents:
        if current:  # a [SEP] between documents, when it fits
            if used + 1 >= budget:
                rows.append(current)
                current, used = [], 0
            else:
                current.append((-1, 1))
                used += 1
        for start, end in zip(offsets[:-1], offsets[1:]):
            while end - start > 0:
                piece = min(end - start, budget)
                if used + piece > budget:
                    rows.append(current)
                    current, used = [], 0
                current.append((start, piece))
                used += piece
                start += piece
    if current:
        rows.append(current)
    return rows


def full_sentence_rows(corpus: pretraining_instances.ChunkCorpus, documents: List[List[int]],
                       max_seq_length: int,
                       vocab_ids: pretraining_instances.VocabIds
                       ) -> pretraining_instances.PackedPairs:
    """The rows of `documents` (sentence offsets into `corpus.token_ids`), in order.

    Returns PackedPairs whose segment A is the whole row (`segment_a_lengths` = lengths:
    every segment id 0) and whose next-sentence labels are 0 (not written).
    """
    budget = max_seq_length - 2
    spans = _row_spans(documents, budget)
    input_ids = np.zeros([len(spans), max_seq_length], np.int32)
    lengths = np.zeros([len(spans)], np.int32)
    for row, pieces in enumerate(spans):
        parts = [np.asarray([vocab_ids.sep_id], np.int32) if start < 0
                 else corpus.token_ids[start:start + length] for start, length in pieces]
        tokens = np.concatenate([[vocab_ids.cls_id], *parts, [vocab_ids.sep_id]])
        input_ids[row, :len(tokens)] = tokens
        lengths[row] = len(tokens)
    return pretraining_instances.PackedPairs(input_ids, lengths, lengths.copy(),
                                             np.zeros([len(spans)], np.int32))


def build_chunk_rows(corpus: pretraining_instances.ChunkCorpus,
                     options: pretraining_instances.InstanceOptions,
                     vocab_ids: pretraining_instances.VocabIds, random_seed: int,
                     chunk_index: int) -> pretraining_instances.ChunkInstances:
    """Full-sentence rows of a chunk (`dupe_factor` passes), shuffled and, unless
    `options.masking == "none"`, masked with the original's rules."""
    py_rng, np_rng = pretraining_instances.chunk_rngs(random_seed, chunk_index)
    documents = list(corpus.documents)
    py_rng.shuffle(documents)
    passes = [full_sentence_rows(corpus, documents, options.max_seq_length, vocab_ids)
              for _ in range(options.dupe_factor)]
    order = np_rng.permutation(sum(len(p.lengths) for p in passes))
    packed = pretraining_instances.PackedPairs(
        *(np.concatenate([getattr(p, field) for p in passes])[order]
          for field in pretraining_instances.PackedPairs._fields))
    masked = None
    if options.masking != "none":
        masked = pretraining_instances.mask_instances(packed, options, vocab_ids, np_rng)
    return pretraining_instances.ChunkInstances(packed, masked, len(documents))

