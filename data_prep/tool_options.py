"""The option groups the data tools share, declared once (`bert_tf.options`; each tool's
flags are generated from its composed options class by `bert_tf.commands.command_line`).

`CORPUS`: how every tool reads its corpus (the input files and their case are
`bert_tf.runs.option_groups`' groups, shared with the runners). `SplitOptions`: how the
Beam tools cut it into units of reading. `MaxSentences`: how much of it the vocab tools
read. The tools compose them: `BuildVocabOptions` (data_prep/build_vocab.py),
`CreatePretrainingDataOptions` (data_prep/create_pretraining_data.py),
`ExtendVocabOptions` (data_prep/extend_vocab.py) and the Beam variants.
"""

import dataclasses
from typing import Optional

from absl import app

from bert_tf.options import OptionGroup, option
from bert_tf.runs import option_groups
from data_prep import wikipedia


@dataclasses.dataclass(kw_only=True)
class Corpus(OptionGroup):
    """The format of a data tool's corpus, and the language its sentences split in."""
    input_format: str = option(
        "auto", "Input format; auto looks at each file's name and first line.",
        choices=wikipedia.INPUT_FORMATS)
    language: Optional[str] = option(
        None, "pysbd language code for sentence splitting of wiki text (default: the "
        "dump's language, else en).", choices=wikipedia.LANGUAGES)


# The corpus a data tool reads, how its words are split, and their case.
CORPUS = (option_groups.InputFile, option_groups.Case, Corpus)
CORPUS_HELPS = {"do_lower_case": "Lower case the input and strip accents (uncased models)."}


@dataclasses.dataclass(kw_only=True)
class SplitOptions(OptionGroup):
    """How a Beam tool cuts its input into units of reading (the output does not depend
    on it)."""
    streams_per_split: int = option(
        100, "bz2 streams (100 pages each) of a multistream dump per unit of reading; the "
        "output does not depend on it.")
    split_bytes: int = option(
        2_000_000, "Bytes of an uncompressed one-sentence-per-line file per unit of "
        "reading (0: whole files); the output does not depend on it.")

    def check(self) -> None:
        """Refuses split sizes that cannot work."""
        if self.streams_per_split < 1 or self.split_bytes < 0:
            raise app.UsageError(f"--streams_per_split={self.streams_per_split}, "
                                 f"--split_bytes={self.split_bytes}: expected >= 1 and "
                                 ">= 0")


@dataclasses.dataclass(kw_only=True)
class MaxSentences(OptionGroup):
    """How much of the corpus a vocab tool reads."""
    max_sentences: int = option(0, "Read at most this many sentences (0: all).")

    def check(self) -> None:
        """Refuses a negative count."""
        if self.max_sentences < 0:
            raise ValueError(f"--max_sentences={self.max_sentences}: expected >= 0 (0: all)")


def require(*names):
    """A rule of a composition (`compose(..., checks=...)`) that refuses a run without
    one of the options `names` (the files a tool needs)."""
    def check_required(options) -> None:
        for name in names:
            if not getattr(options, name):
                raise app.UsageError(f"--{name} is required")
    check_required.__qualname__ = check_required.__name__ = f"require_{'_'.join(names)}"
    return check_required
