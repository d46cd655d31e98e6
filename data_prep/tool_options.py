"""The options the data tools share, declared once (`bert_tf.options`; each tool's flags
are generated from its options class by `bert_tf.command_line.define_flags`).

`CorpusOptions`: how every tool reads its corpus. `SplitOptions`: how the Beam tools cut
it into units of reading. Each tool's class extends these: `BuildVocabOptions`
(data_prep/build_vocab.py), `CreatePretrainingDataOptions`
(data_prep/create_pretraining_data.py) and their Beam variants.
"""

import dataclasses
from typing import Optional

from absl import app

from bert_tf import options as options_lib
from bert_tf.options import option
from data_prep import wikipedia


@dataclasses.dataclass(frozen=True, kw_only=True)
class CorpusOptions:
    """The corpus a data tool reads, and how its words are split."""
    input_file: Optional[str] = option(
        None, "Input corpus files: comma-separated paths or globs.")
    input_format: str = option(
        "auto", "Input format; auto looks at each file's name and first line.",
        choices=wikipedia.INPUT_FORMATS)
    do_lower_case: bool = option(
        True, "Lower case the input and strip accents (uncased models).")
    language: Optional[str] = option(
        None, "pysbd language code for sentence splitting of wiki text (default: the "
        "dump's language, else en).", choices=wikipedia.LANGUAGES)

    def require(self, *names):
        """Refuses a run without one of the options `names` (the files a tool needs)."""
        for name in names:
            if not getattr(self, name):
                raise app.UsageError(f"--{name} is required")

    def check_corpus(self):
        """Refuses, before any reading, a value outside an option's `choices`
        (--input_format, --language, ...), naming it and listing the accepted ones.

        Raises:
          ValueError: naming the option.
        """
        options_lib.check_choices(self)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SplitOptions:
    """How a Beam tool cuts its input into units of reading (the output does not depend
    on it)."""
    streams_per_split: int = option(
        100, "bz2 streams (100 pages each) of a multistream dump per unit of reading; the "
        "output does not depend on it.")
    split_bytes: int = option(
        2_000_000, "Bytes of an uncompressed one-sentence-per-line file per unit of "
        "reading (0: whole files); the output does not depend on it.")

    def check_splits(self):
        """Refuses split sizes that cannot work."""
        if self.streams_per_split < 1 or self.split_bytes < 0:
            raise app.UsageError(f"--streams_per_split={self.streams_per_split}, "
                                 f"--split_bytes={self.split_bytes}: expected >= 1 and "
                                 ">= 0")
