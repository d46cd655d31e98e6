"""WordPiece vocab files: loading (one token per line), the special tokens, and the
check that a vocab belongs to a model's embedding table."""

import collections
import dataclasses
import hashlib
import os

from absl import logging

from bert_tf.io import fileio
from bert_tf.io import input_paths

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


UNK_TOKEN = "[UNK]"


def load_vocab(vocab_file):
    """Loads a vocab file (one token per line) into an OrderedDict token -> id.

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: the file is empty, not UTF-8, or lists a token twice (the message names
            the file and the lines).
    """
    return VocabFile.read(vocab_file).tokens


@dataclasses.dataclass(frozen=True)
class VocabFile:
    """A vocab.txt read once: its path, tokens (token -> id) and SHA-256 (what feature
    caches and run settings are keyed by)."""
    path: str
    tokens: collections.OrderedDict
    sha256: str

    @classmethod
    def read(cls, vocab_file):
        """Reads and checks `vocab_file` (see `load_vocab` for what is refused)."""
        vocab_file = fileio.existing_file(vocab_file, "vocab file")
        with open(vocab_file, "rb") as reader:
            data = reader.read()
        return cls(vocab_file, _parse_vocab(data, vocab_file), hashlib.sha256(data).hexdigest())

    def write(self, path):
        """Writes the tokens to `path`, one a line in id order (atomically): the vocab.txt
        of a run folder or an export."""
        fileio.write_text_atomic(path, "".join(token + "\n" for token in self.tokens))


def _parse_vocab(data, vocab_file):
    input_paths.check_text_bytes(data, vocab_file)  # binary data: refused as a whole
    raw_lines = data.split(b"\n")
    if raw_lines and raw_lines[-1] == b"":
        raw_lines.pop()  # the newline that ends the last line
    vocab = collections.OrderedDict()
    for line_number, raw in enumerate(raw_lines, start=1):
        try:
            token = raw.decode("utf-8").strip()
        except UnicodeDecodeError:
            raise ValueError(f"{vocab_file}:{line_number}: vocab line is not valid UTF-8: "
                             f"{raw[:40]!r}") from None
        if token in vocab:
            raise ValueError(
                f"{vocab_file}:{line_number}: duplicate vocab entry {token!r}, first seen on line "
                f"{vocab[token] + 1}; every token must appear once")
        vocab[token] = len(vocab)
    if not vocab:
        raise ValueError(f"vocab file is empty: {vocab_file}; expected one token per line")
    return vocab


def check_vocab_matches(num_tokens, vocab_file, vocab_size, config_source="the config"):
    """Refuses a vocab that cannot belong to a model with `vocab_size` embedding rows.

    More tokens than rows would index past the table; fewer than half the rows means a
    vocab of another model (a few spare rows, as padded tables have, only warn).

    Raises:
      ValueError: naming both files and both sizes.
    """
    if num_tokens > vocab_size or num_tokens < vocab_size // 2:
        raise ValueError(f"vocab_file {vocab_file} has {num_tokens} tokens but "
                         f"{config_source} has vocab_size {vocab_size}: the vocab and the "
                         "model come from different checkpoints; pass the vocab.txt that "
                         "was released with the checkpoint")
    if num_tokens < vocab_size:
        logging.warning("vocab_file %s has %d tokens, %s has vocab_size %d (spare "
                        "embedding rows)", vocab_file, num_tokens, config_source, vocab_size)


def check_vocab_has_unk(vocab, vocab_file):
    """Raises ValueError naming `vocab_file` when `vocab` lacks `[UNK]`."""
    if UNK_TOKEN not in vocab:
        raise ValueError(f"vocab file {vocab_file} has no {UNK_TOKEN} token; a WordPiece vocab "
                         f"needs one for words it cannot split")


def convert_by_vocab(vocab, items):
    """Maps each item through `vocab` (a dict); raises KeyError naming the missing item."""
    output = []
    for item in items:
        try:
            output.append(vocab[item])
        except KeyError:
            raise KeyError(f"{item!r} is not in the vocabulary") from None
    return output


# Fewer word pieces than this cannot tell a cased vocabulary from an uncased one.
MIN_TOKENS_TO_TELL_CASE = 1000


def vocab_case(vocab):
    """"cased", "uncased", or None when `vocab` (tokens) is too small or mixed to tell.

    An uncased vocabulary has no capital letter; a cased one has capitals in at least 1%
    of its word pieces (google-research's cased vocabulary: about 30%).
    """
    pieces = [token for token in vocab if not (token.startswith("[") and token.endswith("]"))]
    if len(pieces) < MIN_TOKENS_TO_TELL_CASE:
        return None
    capitalised = sum(1 for token in pieces if token != token.lower())
    if capitalised == 0:
        return "uncased"
    return "cased" if capitalised >= 0.01 * len(pieces) else None


def released_model_case(init_checkpoint):
    """"cased" / "uncased" from a released model's folder name (`uncased_L-12_...`)."""
    for part in reversed(os.path.normpath(os.fspath(init_checkpoint)).split(os.sep)):
        name = part.lower()
        if name.startswith("uncased_l-"):
            return "uncased"
        if name.startswith(("cased_l-", "multi_cased_l-")):
            return "cased"
    return None


def check_case_matches(do_lower_case, vocab, vocab_file, init_checkpoint=None):
    """Refuses lower-casing that does not fit the model, as the original's
    `validate_case_matches_checkpoint` does (by the released folder names), and also by
    the vocabulary itself: an uncased vocabulary has no capitals.

    The one case rule of every command that reads a vocab (the runners, the data tools,
    extract-features, encode, export; `tests/test_invariants_case_columns.py` holds their
    table), each skipping it with --allow_case_mismatch.

    Raises:
      ValueError: naming the flag, the vocab or folder and what they are.
    """
    found = [(vocab_case(vocab), f"vocab_file {vocab_file}")]
    if init_checkpoint:
        found.append((released_model_case(init_checkpoint), f"init_checkpoint {init_checkpoint}"))
    for case, source in found:
        if case is not None and (case == "uncased") != bool(do_lower_case):
            raise ValueError(
                f"--do_lower_case={str(bool(do_lower_case)).lower()} does not fit {source}: it "
                f"is {case}; pass --do_lower_case={str(case == 'uncased').lower()} (or "
                "--allow_case_mismatch if you mean it)")
