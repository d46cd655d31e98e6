"""Learn a WordPiece vocab.txt from a corpus with tensorflow-text's vocab learner.

Example:
  bert-build-vocab --input_file=enwiki-latest-pages-articles.xml.bz2 \\
    --output_file=/data/vocab.txt --vocab_size=30522 --do_lower_case --num_unused=100

Inputs: one-sentence-per-line text (blank lines between documents), WikiExtractor
output, or a MediaWiki XML dump (see data_prep/wikipedia.py). Words are split with the
original BERT rules (`bert_tf.text.rules.BasicTokenizer`, cased or uncased), so the
vocab fits the tokenizer that will use it. The file starts with
`[PAD] [UNK] [CLS] [SEP] [MASK]` and `[unused0]` ... `[unused<N-1>]`, then the learned
single characters and word pieces; when the learner stops short of --vocab_size (it
aims within 5 % below it) the rest is filled with more `[unusedN]` slots, so the file
has exactly --vocab_size lines. It is written to a temporary name, then renamed.
"""

import collections
import dataclasses
import os
import sys
import time

from absl import flags
from absl import logging

from bert_tf.commands import command_line
from bert_tf.io import fileio
from bert_tf.options import OptionGroup, compose, option
from bert_tf.runs import option_groups
from bert_tf.text.rules import BasicTokenizer
from data_prep import tool_options
from data_prep import wikipedia

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# Learned tokens a vocab needs at least: the single characters of a small alphabet and
# their ## forms (a-z, 0-9 and ASCII punctuation alone are about 100).
MIN_LEARNED_TOKENS = 100
_LOG_EVERY_SENTENCES = 100_000


@dataclasses.dataclass(kw_only=True)
class VocabLearning(OptionGroup):
    """The vocab's size and reserved slots, and the learner's settings."""
    vocab_size: int = option(30522, "Number of lines of vocab.txt.")
    num_unused: int = option(100, "Number of [unusedN] slots after the special tokens.")
    max_unique_chars: int = option(
        1000, "Largest alphabet of single-character tokens; words with rarer characters "
        "are not counted.")
    max_token_length: int = option(50, "Longest word counted.")
    lower_thresh: int = option(
        10, "Lowest word count the learner's threshold search starts from (lower it for a "
        "small corpus).")
    num_iterations: int = option(4, "Learner iterations.")

    def check(self) -> None:
        """Refuses, before the corpus is read, sizes that cannot work.

        Raises:
          ValueError: naming the option and the values it accepts.
        """
        check_vocab_size(self.vocab_size, self.num_unused)
        for name in ("max_unique_chars", "max_token_length", "num_iterations"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name}={getattr(self, name)}: expected >= 1")


BuildVocabOptions = compose(
    "BuildVocabOptions", tool_options.CORPUS, option_groups.OutputFile, VocabLearning,
    tool_options.MaxSentences,
    helps=dict(tool_options.CORPUS_HELPS, output_file="Where to write vocab.txt (an existing file there is replaced; "
               "never the corpus)."),
    doc="Every option of bert-build-vocab.")


def define_flags(flag_values=flags.FLAGS):
    """Defines the flags (not at import, so that other CLIs' flags never clash)."""
    command_line.define_flags(BuildVocabOptions, __name__,
                              flag_values)


def reserved_tokens(num_unused):
    """The special tokens then `[unused0]` ... `[unused<num_unused-1>]`."""
    return list(SPECIAL_TOKENS) + [f"[unused{i}]" for i in range(num_unused)]


def check_vocab_size(vocab_size, num_unused):
    """Refuses a --vocab_size without room for MIN_LEARNED_TOKENS after the reserved tokens.

    Raises:
      ValueError: naming --vocab_size (or --num_unused) and the smallest value accepted.
    """
    if num_unused < 0:
        raise ValueError(f"--num_unused={num_unused}: expected >= 0")
    minimum = len(SPECIAL_TOKENS) + num_unused + MIN_LEARNED_TOKENS
    if vocab_size < minimum:
        raise ValueError(
            f"--vocab_size={vocab_size}: expected at least {minimum} ({len(SPECIAL_TOKENS)} "
            f"special tokens + --num_unused={num_unused} [unusedN] slots + "
            f"{MIN_LEARNED_TOKENS} learned tokens, the room the single characters and "
            "their ## forms need)")


def count_words(sentences, do_lower_case=True, max_sentences=0):
    """Counts the words (BERT basic tokenization) of an iterable of sentence strings."""
    basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
    counts = collections.Counter()
    start = time.time()
    num_sentences = num_chars = 0
    for sentence in sentences:
        if max_sentences and num_sentences >= max_sentences:
            break
        counts.update(basic_tokenizer.tokenize(sentence))
        num_sentences += 1
        num_chars += len(sentence)
        if num_sentences % _LOG_EVERY_SENTENCES == 0:
            elapsed = max(time.time() - start, 1e-9)
            logging.info("counted %d sentences, %d distinct words (%.0f sentences/s, "
                         "%.2f M chars/s)", num_sentences, len(counts),
                         num_sentences / elapsed, num_chars / elapsed / 1e6)
    logging.info("counted %d sentences, %d chars, %d distinct words in %.1f s",
                 num_sentences, num_chars, len(counts), time.time() - start)
    return counts


def learn_vocab(word_counts, options: BuildVocabOptions):
    """Learns a vocab of exactly `options.vocab_size` tokens from (word -> count).

    Raises:
      ValueError: no words, or `vocab_size` leaves too little room after the reserved
        tokens (check_vocab_size).
    """
    from tensorflow_text.tools.wordpiece_vocab import (  # pylint: disable=import-outside-toplevel
        wordpiece_tokenizer_learner_lib as learner)
    vocab_size, num_unused = options.vocab_size, options.num_unused
    check_vocab_size(vocab_size, num_unused)
    reserved = reserved_tokens(num_unused)
    if not word_counts:
        raise ValueError("the corpus has no words: expected non-empty text input")
    vocab = learner.learn(
        sorted(word_counts.items()), vocab_size, reserved, lower_thresh=options.lower_thresh,
        num_iterations=options.num_iterations, max_token_length=options.max_token_length,
        max_unique_chars=options.max_unique_chars, include_joiner_token=True)
    vocab = [token for token in vocab if token and not any(c.isspace() for c in token)]
    vocab = list(dict.fromkeys(vocab))[:vocab_size]
    next_unused = num_unused
    while len(vocab) < vocab_size:
        token = f"[unused{next_unused}]"
        next_unused += 1
        if token not in vocab:
            vocab.append(token)
    return vocab


def write_vocab(vocab, output_file):
    """Writes one token per line to a temporary name, then renames it to `output_file`."""
    os.makedirs(os.path.dirname(os.path.abspath(output_file)), exist_ok=True)
    fileio.write_text_atomic(output_file, "".join(token + "\n" for token in vocab))


def build_vocab(options: BuildVocabOptions):
    """Reads the corpus, learns the vocab and writes it. Returns a summary dict."""
    options.check()
    output_file = options.output_file
    fileio.check_output_path(output_file, parent_must_exist=False)  # before any work
    input_files = wikipedia.resolve_input_files(options.input_file)
    fileio.check_outputs_apart({"output_file": output_file}, {"input_file": input_files})
    stats = collections.Counter()
    sentences = (sentence for document in wikipedia.iter_documents(
        input_files, input_format=options.input_format, stats=stats,
        language=options.language) for sentence in document)
    counts = count_words(sentences, options.do_lower_case, options.max_sentences)
    start = time.time()
    vocab = learn_vocab(counts, options)
    learned = sum(1 for token in vocab if not token.startswith("[unused"))
    learned -= len(SPECIAL_TOKENS)
    logging.info("learned %d tokens in %.1f s; %d [unusedN] slots", learned,
                 time.time() - start, len(vocab) - learned - len(SPECIAL_TOKENS))
    write_vocab(vocab, output_file)
    summary = {"output_file": output_file, "vocab_size": len(vocab),
               "learned_tokens": learned, "distinct_words": len(counts),
               "skipped": dict(stats)}
    logging.info("wrote %s: %s", output_file, summary)
    return summary


def run(flag_values):
    """Runs the tool with parsed flags; returns the summary dict."""
    return build_vocab(command_line.options_from_flags(BuildVocabOptions, flag_values))


def run_main():
    command_line.run_command(sys.modules[__name__], build_vocab,
                             options_class=BuildVocabOptions)


if __name__ == "__main__":
    run_main()
