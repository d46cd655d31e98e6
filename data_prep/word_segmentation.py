"""Words of unspaced scripts (Chinese) for whole-word masking.

BERT's tokenizer makes every CJK ideograph a token of its own, so grouping `##` pieces
(`--do_whole_word_mask`) groups nothing in Chinese text. A word segmenter says which
characters form a word; each WordPiece token then gets a mark, "continues the previous
token's word", and whole-word masking groups a token with the one before it when the
token is a `##` piece or carries the mark. The marks come from

* a segmenter run on each sentence (`--word_segmenter=jieba`, the `chinese` extra): two
  consecutive CJK characters of one segmented word are one word's; or
* a reference file (`--word_boundaries_file`) in the format of Hugging Face's
  `run_chinese_ref.py`: one JSON list per non-blank input line, the positions of the
  tokens that continue a word, counted in `[CLS] tokens [SEP]` (position 1 is the
  line's first token).

The mark travels with the token id as bit 30 (`CONTINUATION_BIT`; vocabularies are far
smaller), so the chunk layout code (segment pairs, truncation, full-sentence rows) moves
marks with their tokens unchanged; masking takes it off (`split_marks`). Records for
dynamic masking carry the words as a `word_starts` feature (`word_starts`).
"""

import dataclasses
import json
import logging
from typing import Callable, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from bert_tf import extras
from bert_tf.io import input_paths
from bert_tf.options import OptionGroup, option
from bert_tf.text import rules

SEGMENTERS = ("none", "jieba")
CONTINUATION_BIT = 1 << 30
WORD_STARTS = "word_starts"  # the record feature (bert_tf.train.masking reads it)

Segmenter = Callable[[str], List[str]]  # a sentence -> its words, which join to it
_LOADED = {}  # segmenter name -> callable, once per process


@dataclasses.dataclass(kw_only=True)
class WordSegmentationFields(OptionGroup):
    """How the words of unspaced text are found (part of the instance options)."""
    word_segmenter: str = option(
        "none", "Word segmenter for unspaced text (Chinese), so that whole-word masking "
        "masks the characters of a word together. jieba: the chinese extra (pip install "
        "bert_tf[chinese]). With --do_whole_word_mask the masks drawn here group them; "
        "with --masking=none the records carry word_starts, for run_pretraining "
        "--dynamic_masking --whole_word_masking. none: words are ## pieces only.",
        choices=SEGMENTERS)
    word_boundaries_file: Optional[str] = option(
        None, "Word boundaries instead of a segmenter: a file per input file "
        "(comma-separated, in the order the inputs are read), one JSON list per "
        "non-blank input line of the positions of the tokens that continue a word, "
        "counted in [CLS] tokens [SEP] (Hugging Face run_chinese_ref.py's ref file). "
        "One-sentence-per-line text input only.")

    @property
    def segments_words(self) -> bool:
        """Whether tokens carry word marks (a segmenter or a boundaries file)."""
        return self.word_segmenter != "none" or bool(self.word_boundaries_file)

    def check(self) -> None:
        """Refuses two sources of word boundaries.

        Raises:
          ValueError: naming the options.
        """
        if self.word_segmenter != "none" and self.word_boundaries_file:
            raise ValueError(f"word_segmenter={self.word_segmenter!r} and "
                             f"word_boundaries_file={self.word_boundaries_file!r}: give "
                             "one source of word boundaries")

    def check_segmentation(self, masking: str, whole_word_masking: bool):
        """Refuses word boundaries that the masks would not use.

        Raises:
          ValueError: naming the options.
        """
        if self.segments_words and masking != "none" and not whole_word_masking:
            source = ("word_boundaries_file" if self.word_boundaries_file
                      else f"word_segmenter={self.word_segmenter}")
            raise ValueError(
                f"{source} finds words for whole-word masking, which is off: add "
                "--do_whole_word_mask (or write --masking=none records for "
                "run_pretraining --dynamic_masking --whole_word_masking)")


def load_segmenter(name: str) -> Optional[Segmenter]:
    """The segmenter called `name` (None for "none"), loaded once per process.

    Raises:
      ImportError: the segmenter's package is not installed, naming the extra.
      ValueError: an unknown name.
    """
    if name == "none":
        return None
    if name not in SEGMENTERS:
        raise ValueError(f"word_segmenter={name!r}: expected one of {SEGMENTERS}")
    if name not in _LOADED:
        # optional and slow to import: only when asked for
        jieba = extras.require("jieba", "--word_segmenter=jieba")
        jieba.setLogLevel(logging.WARNING)  # not the dictionary-loading lines
        jieba.initialize()
        _LOADED[name] = jieba.lcut
    return _LOADED[name]


def segmented_units(sentence: str, words: Sequence[str]) -> Tuple[List[str], List[bool]]:
    """The sentence cut into texts that tokenize alone as within it, with their marks.

    The tokenizer puts spaces around every CJK character, so the sentence tokenizes as
    its CJK characters one by one and the runs of other characters between them. A CJK
    character is marked when the character before it is a CJK character of the same
    segmented word.

    Raises:
      ValueError: the words do not join to the sentence.
    """
    if "".join(words) != sentence:
        raise ValueError(f"the word segmenter changed the text of {sentence[:60]!r}")
    units, marks, run = [], [], []
    previous_word = -1  # the word of the CJK character just before; -1 after another
    for word_index, word in enumerate(words):
        for char in word:
            if not rules.is_chinese_char(ord(char)):
                run.append(char)
                previous_word = -1
                continue
            if run:
                units.append("".join(run))
                marks.append(False)
                run = []
            units.append(char)
            marks.append(previous_word == word_index)
            previous_word = word_index
    if run:
        units.append("".join(run))
        marks.append(False)
    return units, marks


def tokenize_segmented(ids_and_lengths, sentences: Sequence[str], segment: Segmenter):
    """Ids of the sentences with word marks from `segment`.

    Args:
      ids_and_lengths: texts -> (flat int32 ids, int64 lengths): the tokenizer.
      sentences: the texts.
      segment: a sentence -> its words.

    Returns:
      (flat ids with CONTINUATION_BIT on marked tokens, [len(sentences)] lengths): the
      ids are those of tokenizing the sentences themselves.
    """
    units, unit_marks, units_per_sentence = [], [], []
    for sentence in sentences:
        sentence_units, marks = segmented_units(sentence, segment(sentence))
        units.extend(sentence_units)
        unit_marks.extend(marks)
        units_per_sentence.append(len(sentence_units))
    flat, unit_lengths = ids_and_lengths(units)
    unit_lengths = np.asarray(unit_lengths, np.int64)
    unit_starts = np.cumsum(unit_lengths) - unit_lengths
    has_token = unit_lengths > 0
    marks = np.asarray(unit_marks, bool) & has_token
    marks[1:] &= has_token[:-1]  # a character without a token: the next starts a word
    flat = np.asarray(flat, np.int32).copy()
    flat[unit_starts[marks]] |= CONTINUATION_BIT
    token_ends = np.concatenate([[0], np.cumsum(unit_lengths)])[np.cumsum(units_per_sentence)]
    return flat, np.diff(token_ends, prepend=0).astype(np.int64)


def split_marks(input_ids: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(ids without the mark bit, bool marks) of ids that may carry CONTINUATION_BIT."""
    input_ids = np.asarray(input_ids)
    return input_ids & (CONTINUATION_BIT - 1), input_ids >= CONTINUATION_BIT


def word_starts(input_ids, marks, valid, special, is_continuation) -> np.ndarray:
    """The `word_starts` feature: 1 where a real token starts a word, 0 elsewhere.

    A token continues a word when it is a `##` piece or marked and the token before it
    is a word's (not [CLS] or [SEP]); special tokens count as starts.

    Args:
      input_ids, marks, valid, special: [N, S] ids (without marks), marks, real tokens,
        [CLS]/[SEP] positions.
      is_continuation: [V] bool, `##` tokens of the vocabulary.
    """
    candidate = valid & ~special
    previous = np.zeros_like(candidate)
    previous[:, 1:] = candidate[:, :-1]
    continues = candidate & previous & (is_continuation[input_ids] | marks)
    return (valid & ~continues).view(np.uint8)


class LineBoundaries(NamedTuple):
    """The word-continuation positions of one input line, and where they were read."""
    where: str  # "ref.txt:12"
    positions: Tuple[int, ...]


class MarkedDocument(NamedTuple):
    """A one-sentence-per-line document with its lines' boundaries (as RawDocument)."""
    kind: str
    content: List[str]
    boundaries: List[LineBoundaries]


def read_boundaries(path: str) -> Iterator[LineBoundaries]:
    """The lines of a reference file, checked: a JSON list of positions (ints >= 1).

    Raises:
      ValueError: naming file and line.
    """
    input_paths.check_text_file(path)  # binary data: refused as a whole, named
    with open(path, "rb") as file:
        for number, raw in enumerate(file, start=1):
            where = f"{path}:{number}"
            try:
                positions = json.loads(raw)
            except (ValueError, UnicodeDecodeError):
                positions = None
            if not isinstance(positions, list) or not all(
                    isinstance(p, int) and not isinstance(p, bool) and p >= 1
                    for p in positions):
                raise ValueError(f"{where}: expected a JSON list of token positions >= 1 "
                                 "(Hugging Face run_chinese_ref.py's format), got "
                                 f"{raw[:80]!r}")
            yield LineBoundaries(where, tuple(positions))


def with_boundaries(documents, corpus_path: str, boundaries_path: str, stats,
                    sentences_kind: str) -> Iterator[MarkedDocument]:
    """The documents of `corpus_path`, each line paired with the next reference line.

    Raises:
      ValueError: the corpus is not one-sentence-per-line text, has a line that is not
        UTF-8 (skipped, so the pairing would shift), or has another number of non-blank
        lines than the reference file has lines.
    """
    references = read_boundaries(boundaries_path)
    lines = 0
    skipped = stats["non_utf8_lines"]
    for document in documents:
        if document.kind != sentences_kind:
            raise ValueError(f"--word_boundaries_file={boundaries_path}: {corpus_path} is "
                             "not one-sentence-per-line text; the reference lines pair with "
                             "text lines (use --word_segmenter on wiki input)")
        if stats["non_utf8_lines"] != skipped:
            raise ValueError(f"{corpus_path}: a line that is not UTF-8 was skipped, so the "
                             f"lines after it cannot be paired with {boundaries_path}")
        pairs = [next(references, None) for _ in document.content]
        lines += len(pairs)
        if pairs and pairs[-1] is None:
            raise ValueError(f"{boundaries_path}: fewer lines than the non-blank lines of "
                             f"{corpus_path} (expected one JSON list per non-blank line)")
        yield MarkedDocument(document.kind, list(document.content), pairs)
    extra = next(references, None)
    if extra is not None:
        raise ValueError(f"{extra.where}: more lines than the {lines} non-blank lines of "
                         f"{corpus_path} (expected one JSON list per non-blank line)")


def mark_boundaries(flat: np.ndarray, lengths: np.ndarray,
                    boundaries: Sequence[LineBoundaries]) -> np.ndarray:
    """`flat` ids with CONTINUATION_BIT at the reference positions of each sentence.

    Raises:
      ValueError: a position past the sentence's tokens, naming file and line.
    """
    flat = np.asarray(flat, np.int32).copy()
    starts = np.cumsum(lengths) - lengths
    for start, length, line in zip(starts.tolist(), np.asarray(lengths).tolist(), boundaries):
        if not line.positions:
            continue
        if max(line.positions) > length:
            raise ValueError(
                f"{line.where}: position {max(line.positions)} is past the line's "
                f"{length} tokens (positions count [CLS] as 0; was the file made for this "
                "corpus, with this vocab and casing?)")
        flat[start + np.asarray(line.positions) - 1] |= CONTINUATION_BIT
    return flat


def boundaries_files(word_boundaries_file: Optional[str],
                     input_files: Sequence[str]) -> Optional[List[str]]:
    """The reference file of each input file, from the comma-separated option (None
    without one).

    Raises:
      ValueError: not one file per input file, naming both counts.
      FileNotFoundError: naming a missing file.
    """
    if not word_boundaries_file:
        return None
    names = input_paths.expand_input_paths(word_boundaries_file, "word_boundaries_file")
    if len(names) != len(input_files):
        shown = ", ".join(input_files[:3]) + (" ..." if len(input_files) > 3 else "")
        raise ValueError(f"word_boundaries_file names {len(names)} file(s) for "
                         f"{len(input_files)} input file(s) ({shown}): expected one per "
                         "input file, in the order they are read")
    return names


def boundaries_of(raw_documents) -> Optional[List[LineBoundaries]]:
    """The reference boundaries of every sentence of `MarkedDocument`s, in order; None
    for other documents."""
    if not raw_documents or not hasattr(raw_documents[0], "boundaries"):
        return None
    return [line for document in raw_documents for line in document.boundaries]
