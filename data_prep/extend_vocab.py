"""Extend a released BERT's vocab with the words of a domain corpus that it splits most.

Example:
  bert-extend-vocab --input_file=pubmed_sentences.txt \\
    --init_checkpoint=uncased_L-12_H-768_A-12 --output_dir=/models/uncased_pubmed \\
    --mode=append --max_new_tokens=1000

Reads the corpus as bert-create-pretraining-data does (one-sentence-per-line text,
WikiExtractor output or a MediaWiki XML dump; see data_prep/wikipedia.py), counts its
words after the model's basic tokenization (its case: --do_lower_case, by default what
the vocab is), scores each word the vocab splits by frequency × (pieces - 1), and keeps
the best --max_new_tokens. Writes a new model folder:

- `--mode=unused`: the words take the `[unusedN]` lines in order; no shape changes, so
  any tool that reads the original model reads this one.
- `--mode=append`: the words are new lines after the last; the word-embedding matrix
  (`bert/embeddings/word_embeddings`), the masked-LM output bias
  (`cls/predictions/output_bias`, when present) and `vocab_size` in bert_config.json grow.

In both modes a new token's embedding row (and output bias) starts as the mean of the
rows of the pieces the old vocab gave that word; every other tensor is copied unchanged.
The folder holds vocab.txt, bert_config.json, bert_model.ckpt.*, extend_vocab_report.tsv
(each new token: id, frequency, old piece count, old pieces, score) and
extend_vocab_summary.json (tokens per sentence before and after). It is written under a
temporary name and renamed when complete. No randomness: the same input gives the same
folder.
"""

import dataclasses
import sys

from absl import flags

from bert_tf.commands import command_line
from bert_tf.options import OptionGroup, compose, option
from bert_tf.runs import option_groups
from data_prep import tool_options

STEPS = "data_prep.extend_vocab_run:extend_vocab"  # the run code, loaded when it runs
# --mode (`vocab_extension.new_token_ids`).
MODES = ("unused", "append")


@dataclasses.dataclass(kw_only=True)
class VocabExtension(OptionGroup):
    """Which words are added, and where in the vocab."""
    mode: str = option(
        "unused", "unused: the new words take the [unusedN] lines (no shape change); "
        "append: new lines after the last (the embedding matrix and vocab_size grow).",
        choices=MODES)
    max_new_tokens: int = option(
        0, "Most words to add (0: every free [unusedN] slot in unused mode; required "
        "with --mode=append).")
    min_frequency: int = option(5, "Words seen fewer times in the corpus are not added.")

    def check(self) -> None:
        """Refuses, before any file is read, values that cannot work.

        Raises:
          ValueError: naming the option and the values it accepts.
        """
        if self.max_new_tokens < 0:
            raise ValueError(f"--max_new_tokens={self.max_new_tokens}: expected >= 0")
        if self.mode == "append" and self.max_new_tokens == 0:
            raise ValueError("--mode=append needs --max_new_tokens=N (N >= 1): how many "
                             "rows the vocab and the embedding matrix grow by")
        if self.min_frequency < 1:
            raise ValueError(f"--min_frequency={self.min_frequency}: expected >= 1")


ExtendVocabOptions = compose(
    "ExtendVocabOptions", tool_options.CORPUS, option_groups.InitCheckpoint,
    option_groups.OutputDir, VocabExtension, tool_options.MaxSentences,
    option_groups.Overwrite, option_groups.CaseCheck,
    defaults={"do_lower_case": None},
    helps={"do_lower_case": "Lower case the input and strip accents; default: the model's "
           "case (true for a vocab without capitals, false for a cased one; true when the "
           "vocab is too small to tell).",
           "init_checkpoint": "The model folder to extend (google-research layout: "
           "vocab.txt, bert_config.json, bert_model.ckpt.*).",
           "output_dir": "The new model folder; must not exist or be empty (see "
           "--overwrite).",
           "overwrite": "Replace a non-empty --output_dir.",
           "allow_case_mismatch": "Run even when --do_lower_case does not fit the model's "
           "vocab or its released folder name (uncased / cased)."},
    checks=(tool_options.require("init_checkpoint", "output_dir"),),
    doc="Every option of bert-extend-vocab.")


def define_flags(flag_values=flags.FLAGS):
    """Defines the flags (not at import, so that other CLIs' flags never clash)."""
    command_line.define_flags(ExtendVocabOptions, __name__, flag_values)


def extend(options: ExtendVocabOptions):
    """Runs the tool; returns the summary dict (the steps, which import TensorFlow, load
    now: `command_line.load`)."""
    return command_line.load(STEPS)(options)


def run(flag_values):
    """Runs the tool with parsed flags; returns the summary dict."""
    return extend(command_line.options_from_flags(ExtendVocabOptions, flag_values))


def run_main():
    command_line.run_command(sys.modules[__name__], extend, options_class=ExtendVocabOptions)


if __name__ == "__main__":
    run_main()
