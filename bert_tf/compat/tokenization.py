"""google-research/bert's `tokenization` module, over `bert_tf.text`.

    from bert_tf.compat import tokenization          # was: import tokenization
    tokenizer = tokenization.FullTokenizer("vocab.txt", do_lower_case=True)
    ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize("Hello, world!"))

Every public function and class of the original, with its signature and its tokens,
plus the three character helpers its tests call (`_is_whitespace`, `_is_control`,
`_is_punctuation`). They are `bert_tf.text`'s own (`bert_tf.text.rules`,
`bert_tf.text.vocab`, `bert_tf.text.tokenization.FullTokenizer`), not a second copy.

What differs, all on input the original accepts silently:

- `convert_to_unicode` (and so every tokenizer) refuses bytes that are not UTF-8,
  naming the byte; the original drops them (`decode("utf-8", "ignore")`).
- `load_vocab` (and `FullTokenizer`) refuses a vocab file that is missing, empty, not
  UTF-8 or lists a token twice, naming the file and lines; `FullTokenizer` also needs
  `[UNK]` in it. It reads local paths (the original's `tf.gfile` also read `gs://`).
- `convert_by_vocab` raises KeyError naming the item that is not in the vocab.
- `validate_case_matches_checkpoint` knows the released models by their folder names
  (`uncased_L-*`, `cased_L-*`, `multi_cased_L-*`, any size); the original's list also
  called `multilingual_L-12_H-768_A-12` and `chinese_L-12_H-768_A-12` lower-cased.
- `FullTokenizer` takes `keep_special_tokens` and has the fast batch methods of
  `bert_tf.text.tokenization.FullTokenizer` (`tokenize_batch`, ...); the private
  methods of `BasicTokenizer` have other names.
"""

from bert_tf.text import rules
from bert_tf.text import vocab as vocab_files
# The original's public names, bert_tf.text's implementations.
from bert_tf.text.rules import BasicTokenizer, WordpieceTokenizer, whitespace_tokenize  # noqa: F401
from bert_tf.text.tokenization import FullTokenizer  # noqa: F401
from bert_tf.text.vocab import convert_by_vocab, load_vocab  # noqa: F401

# The original's character helpers (its tests call them by these names).
_is_whitespace = rules.is_whitespace
_is_control = rules.is_control
_is_punctuation = rules.is_punctuation

__all__ = ["BasicTokenizer", "FullTokenizer", "WordpieceTokenizer", "convert_by_vocab",
           "convert_ids_to_tokens", "convert_to_unicode", "convert_tokens_to_ids",
           "load_vocab", "printable_text", "validate_case_matches_checkpoint",
           "whitespace_tokenize"]


def convert_to_unicode(text):
    """Returns `text` (str, or UTF-8 bytes) as str.

    Raises:
        ValueError: for bytes that are not UTF-8 (naming the byte) or another type (as
            the original, which raises ValueError there too).
    """
    try:
        return rules.convert_to_unicode(text)
    except TypeError as error:
        raise ValueError(str(error)) from None


def printable_text(text):
    """Returns `text` as str, for print or logging (bytes decoded, bad bytes dropped).

    Raises:
        ValueError: for a type that is neither str nor bytes.
    """
    try:
        return rules.printable_text(text)
    except TypeError as error:
        raise ValueError(str(error)) from None


def convert_tokens_to_ids(vocab, tokens):
    """The ids of `tokens` in `vocab` (token -> id)."""
    return convert_by_vocab(vocab, tokens)


def convert_ids_to_tokens(inv_vocab, ids):
    """The tokens of `ids` in `inv_vocab` (id -> token)."""
    return convert_by_vocab(inv_vocab, ids)


def validate_case_matches_checkpoint(do_lower_case, init_checkpoint):
    """Refuses `do_lower_case` that contradicts a released checkpoint's folder name.

    As the original: nothing to check without `init_checkpoint` or for a folder name
    that is not a released model's (`uncased_L-12_H-768_A-12/bert_model.ckpt` is one).

    Raises:
        ValueError: naming the flag, the checkpoint, the model and the flag to pass.
    """
    if not init_checkpoint:
        return
    case = vocab_files.released_model_case(init_checkpoint)
    if case is None or (case == "uncased") == bool(do_lower_case):
        return
    raise ValueError(
        f"You passed in `--do_lower_case={bool(do_lower_case)}` with `--init_checkpoint="
        f"{init_checkpoint}`. However, it seems to be a "
        f"{'lowercased' if case == 'uncased' else 'cased'} model, so you should pass in "
        f"`--do_lower_case={case == 'uncased'}` so that the fine-tuning matches how the "
        "model was pre-trained.")
