"""The parts of bert-extend-vocab (data_prep/extend_vocab.py) that need no flags: the
model folder read and checked, the words ranked, the new vocab, and the checkpoint's
tensors with the new rows.

    model = ModelFolder.read("uncased_L-12_H-768_A-12")
    ranked = rank_words(word_counts, model.vocab.tokens, do_lower_case=True, min_frequency=5)
    ids = new_token_ids(model, len(ranked[:100]), "append")
    tensors = extended_tensors(model.checkpoint, ids, [w.piece_ids for w in ranked[:100]])
    save_tensors("out/bert_model.ckpt", tensors)

A word's score is its frequency × (its WordPiece pieces under the model's vocab - 1):
the tokens the corpus would save if the word were one token. Ties go to the more
frequent word, then to the word itself (so the same counts always give the same list).
A new token's embedding row (and masked-LM output bias) is the mean of the rows of the
pieces the old vocab gave that word.
"""

import dataclasses
import os
import re
from typing import Dict, List, Sequence, Tuple

import numpy as np
import tensorflow as tf

from bert_tf.configs import BertConfig
from bert_tf.text.rules import BasicTokenizer, WordpieceTokenizer
from bert_tf.text import vocab as vocab_lib
from data_prep.extend_vocab import MODES

WORD_EMBEDDINGS = "bert/embeddings/word_embeddings"
OUTPUT_BIAS = "cls/predictions/output_bias"
# The tensors with one row per vocab id; anything stored under them (`.../adam_m`, the
# optimizer's slots) has those rows too.
VOCAB_ROWS_TENSORS = (WORD_EMBEDDINGS, OUTPUT_BIAS)
CHECKPOINT_NAME = "bert_model.ckpt"
_UNUSED_TOKEN = re.compile(r"\[unused\d+\]")


@dataclasses.dataclass(frozen=True)
class ModelFolder:
    """A released model folder read and checked: vocab, config and checkpoint agree."""
    folder: str
    vocab: vocab_lib.VocabFile
    config: BertConfig
    checkpoint: str  # the prefix: <folder>/bert_model.ckpt

    @classmethod
    def read(cls, folder: str) -> "ModelFolder":
        """Reads vocab.txt and bert_config.json and checks the checkpoint's embeddings.

        Raises:
          FileNotFoundError: the folder, its vocab.txt, bert_config.json or
            bert_model.ckpt.index is missing (named).
          ValueError: the vocab, the config and the checkpoint disagree (both named).
        """
        folder = os.fspath(folder)
        if not os.path.isdir(folder):
            raise FileNotFoundError(
                f"init_checkpoint {folder!r} is not a folder: expected a released model "
                f"folder (vocab.txt, bert_config.json, {CHECKPOINT_NAME}.*)")
        for name in ("vocab.txt", "bert_config.json", CHECKPOINT_NAME + ".index"):
            if not os.path.isfile(os.path.join(folder, name)):
                raise FileNotFoundError(
                    f"init_checkpoint {folder}: no {name}; expected a released model "
                    f"folder (vocab.txt, bert_config.json, {CHECKPOINT_NAME}.*)")
        vocab = vocab_lib.VocabFile.read(os.path.join(folder, "vocab.txt"))
        vocab_lib.check_vocab_has_unk(vocab.tokens, vocab.path)
        config_file = os.path.join(folder, "bert_config.json")
        config = BertConfig.from_json_file(config_file)
        vocab_lib.check_vocab_matches(len(vocab.tokens), vocab.path, config.vocab_size,
                                      config_file)
        checkpoint = os.path.join(folder, CHECKPOINT_NAME)
        shapes = tf.train.load_checkpoint(checkpoint).get_variable_to_shape_map()
        expected = [config.vocab_size, config.hidden_size]
        if WORD_EMBEDDINGS not in shapes:
            raise ValueError(f"{checkpoint}: no {WORD_EMBEDDINGS}; expected a google-research "
                             "(name-based) BERT checkpoint")
        if shapes[WORD_EMBEDDINGS] != expected:
            raise ValueError(
                f"{checkpoint}: {WORD_EMBEDDINGS} has shape {shapes[WORD_EMBEDDINGS]}, "
                f"but {config_file} says {expected} (vocab_size, hidden_size); expected a "
                "google-research BERT checkpoint of that config")
        return cls(folder, vocab, config, checkpoint)


@dataclasses.dataclass(frozen=True)
class RankedWord:
    """A word the vocab splits: how often the corpus has it and its pieces today."""
    word: str
    frequency: int
    pieces: Tuple[str, ...]
    piece_ids: Tuple[int, ...]

    @property
    def score(self) -> int:
        """Tokens the corpus saves when the word is one token."""
        return self.frequency * (len(self.pieces) - 1)


def is_single_word(word: str, basic_tokenizer) -> bool:
    """Whether basic tokenization keeps `word` whole and unchanged (no punctuation,
    whitespace or CJK character to split at, already in the model's case)."""
    return basic_tokenizer.tokenize(word) == [word]


def rank_words(counts: Dict[str, int], vocab: Dict[str, int], do_lower_case: bool,
               min_frequency: int) -> List[RankedWord]:
    """The words worth adding, best first.

    A word qualifies when it is seen at least `min_frequency` times, is not in `vocab`,
    is one token after basic tokenization, and WordPiece splits it into two or more
    pieces, none of them [UNK].

    Args:
      counts: word (after `BasicTokenizer(do_lower_case)`) -> occurrences.
      vocab: token -> id of the model's vocab.
      do_lower_case: the model's case (words must already be in it).
      min_frequency: fewest occurrences of a word that can be added.
    """
    basic = BasicTokenizer(do_lower_case=do_lower_case)
    wordpiece = WordpieceTokenizer(vocab=vocab)
    ranked = []
    for word, frequency in counts.items():
        if frequency < min_frequency or word in vocab:
            continue
        pieces = tuple(piece for piece, _, _ in wordpiece.tokenize_word_spans(word))
        if len(pieces) < 2 or vocab_lib.UNK_TOKEN in pieces:
            continue
        if is_single_word(word, basic):
            ranked.append(RankedWord(word, frequency, pieces,
                                     tuple(vocab[piece] for piece in pieces)))
    ranked.sort(key=lambda w: (-w.score, -w.frequency, w.word))
    return ranked


def corpus_tokens(counts: Dict[str, int], vocab: Dict[str, int]) -> int:
    """WordPiece tokens of a corpus whose words are `counts`, under `vocab`."""
    wordpiece = WordpieceTokenizer(vocab=vocab)
    return sum(frequency * len(wordpiece.tokenize_word_spans(word))
               for word, frequency in counts.items())


def free_unused_ids(tokens: Sequence[str]) -> List[int]:
    """Ids of the `[unusedN]` slots of a vocab (token list), in id order."""
    return [index for index, token in enumerate(tokens) if _UNUSED_TOKEN.fullmatch(token)]


def new_token_ids(model: ModelFolder, count: int, mode: str) -> List[int]:
    """The ids the `count` new tokens take: the first free `[unusedN]` slots (unused),
    or the ids after the vocab's last (append).

    Raises:
      ValueError: more tokens than free `[unusedN]` slots in unused mode (the count named).
    """
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: expected one of {', '.join(MODES)}")
    tokens = list(model.vocab.tokens)
    if mode == "append":
        return list(range(len(tokens), len(tokens) + count))
    free = free_unused_ids(tokens)
    check_unused_room(model, count, len(free))
    return free[:count]


def check_unused_room(model: ModelFolder, count: int, free: int) -> None:
    """Refuses `count` new tokens when the vocab has fewer than that `[unusedN]` slots
    (`free`), or none.

    Raises:
      ValueError: naming the vocab and the count of free slots.
    """
    if free == 0:
        raise ValueError(f"{model.vocab.path} has no [unusedN] slots for --mode=unused: "
                         "use --mode=append --max_new_tokens=N")
    if count > free:
        raise ValueError(
            f"--max_new_tokens={count}: {model.vocab.path} has only {free} free "
            "[unusedN] slots; pass --max_new_tokens at most that, or --mode=append")


def extended_vocab(tokens: Sequence[str], ids: Sequence[int], words: Sequence[str]) -> list:
    """`tokens` with `words[k]` at id `ids[k]` (an `[unusedN]` line replaced, or a new
    line after the last)."""
    result = list(tokens)
    for index, word in zip(ids, words):
        if index < len(result):
            result[index] = word
        elif index == len(result):
            result.append(word)
        else:
            raise ValueError(f"new token id {index} leaves a gap after id {len(result) - 1}")
    return result


def _with_rows(value: np.ndarray, ids: Sequence[int], rows: np.ndarray) -> np.ndarray:
    """`value` ([V, ...]) with `rows` at `ids`, grown with zero rows as far as needed."""
    needed = max(max(ids) + 1, value.shape[0])
    result = np.zeros((needed,) + value.shape[1:], dtype=value.dtype)
    result[:value.shape[0]] = value
    result[list(ids)] = rows.astype(value.dtype)
    return result


def mean_rows(value: np.ndarray, piece_ids: Sequence[Sequence[int]]) -> np.ndarray:
    """Row k: the mean of `value`'s rows `piece_ids[k]` (float64 sums, in order)."""
    return np.stack([value[list(ids)].astype(np.float64).mean(axis=0) for ids in piece_ids])


def extended_tensors(checkpoint: str, ids: Sequence[int],
                     piece_ids: Sequence[Sequence[int]]) -> Dict[str, np.ndarray]:
    """Every tensor of `checkpoint`, the per-vocab-id ones with the new rows.

    `bert/embeddings/word_embeddings` and `cls/predictions/output_bias` (when present)
    get, at `ids[k]`, the mean of their rows `piece_ids[k]`; their optimizer slots
    (`.../adam_m`, ...) get zero rows there. The table grows when an id is past its
    end; other tensors are copied unchanged.
    """
    reader = tf.train.load_checkpoint(checkpoint)
    tensors = {}
    for name in sorted(reader.get_variable_to_shape_map()):
        value = reader.get_tensor(name)
        owner = next((table for table in VOCAB_ROWS_TENSORS
                      if name == table or name.startswith(table + "/")), None)
        if owner == name:
            value = _with_rows(value, ids, mean_rows(value, piece_ids))
        elif owner is not None and np.ndim(value) >= 1:
            value = _with_rows(value, ids, np.zeros((len(ids),) + value.shape[1:]))
        tensors[name] = value
    return tensors


def save_tensors(prefix: str, tensors: Dict[str, np.ndarray]) -> None:
    """Writes `tensors` (name -> array) as a TF1 name-based checkpoint at `prefix`
    (`prefix.index`, `prefix.data-00000-of-00001`), names in sorted order."""
    names = sorted(tensors)
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.convert_to_tensor(tensors[name]) for name in names])
