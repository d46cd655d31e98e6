"""Create masked-LM / next-sentence pre-training TFRecords (google-research/bert flags).

Example:
  bert-create-pretraining-data \\
    --input_file=enwiki-latest-pages-articles.xml.bz2 \\
    --output_file=/data/wiki.tfrecord --num_output_shards=64 \\
    --vocab_file=uncased_L-12_H-768_A-12/vocab.txt --do_lower_case \\
    --max_seq_length=128 --max_predictions_per_seq=20 --masked_lm_prob=0.15 \\
    --dupe_factor=5 --num_workers=8

Inputs: one-sentence-per-line text (blank lines between documents), WikiExtractor
output, or a MediaWiki XML dump (see data_prep/wikipedia.py). Writes the shards, then
`<output_file>.stats.json` (the first name when --output_file is a list).
"""

import dataclasses
import sys

from absl import app
from absl import flags
from absl import logging

from bert_tf.commands import command_line
from bert_tf.io import fileio
from bert_tf.options import OptionGroup, compose, option
from bert_tf.runs import option_groups
from bert_tf.text import cached_tokenizer
from bert_tf.text import vocab as vocab_lib
from data_prep import pretraining_instances
from data_prep import pretraining_pipeline
from data_prep import tool_options
from data_prep import wikipedia
from data_prep import word_segmentation

_CONFIG = pretraining_pipeline.PipelineConfig  # its defaults are the flags'


@dataclasses.dataclass(kw_only=True)
class RecordOutput(OptionGroup):
    """The seed and the workers that make the records, and how they are written."""
    random_seed: int = option(_CONFIG.random_seed, "Random seed for data generation.")
    num_workers: int = option(
        _CONFIG.num_workers, "Processes that build instances (1: all in this process). "
        "The output does not depend on it.")
    num_output_shards: int = option(
        1, "Shards to write when --output_file is a single name.")
    gzip: bool = option(_CONFIG.gzip, "Write GZIP-compressed TFRecords.")
    chunk_chars: int = option(
        _CONFIG.chunk_chars, "Characters of text per chunk: documents are shuffled and "
        "paired within a chunk. Part of the seed: changing it changes the output.")

    def check(self) -> None:
        if self.num_workers < 1:
            raise app.UsageError(f"--num_workers={self.num_workers}: expected >= 1")


def _instance_options(self) -> pretraining_instances.InstanceOptions:
    """The instance options, checked (every option of the tool is, first), and the word
    segmenter loaded (a missing package names the extra to install)."""
    self.check()
    instance_options = pretraining_instances.InstanceOptions.of(self)
    word_segmentation.load_segmenter(self.word_segmenter)
    return instance_options


CreatePretrainingDataOptions = compose(
    "CreatePretrainingDataOptions", tool_options.CORPUS,
    pretraining_instances.INSTANCE_GROUPS, option_groups.OutputFile, option_groups.Vocab,
    option_groups.CaseCheck, RecordOutput,
    helps=dict(tool_options.CORPUS_HELPS, **pretraining_instances.INSTANCE_HELPS,
               output_file="Output TFRecord file(s): comma-separated, or one name that "
               "--num_output_shards expands to NAME-00000-of-0000N. A rerun replaces the "
               "whole set (never the corpus or the vocab).",
               vocab_file="The vocabulary file of the BERT model."),
    checks=(tool_options.require("vocab_file"), pretraining_instances.check_instance_rules),
    namespace={"instance_options": _instance_options},
    doc="Every option of bert-create-pretraining-data (the instance-shaping ones are "
        "`pretraining_instances.INSTANCE_GROUPS`).")


def define_flags(flag_values=flags.FLAGS):
    """Defines the flags (not at import, so that other CLIs' flags never clash)."""
    command_line.define_flags(CreatePretrainingDataOptions, __name__,
                              flag_values)


def load_vocab(options: CreatePretrainingDataOptions):
    """(CachedTokenizer, VocabIds) of --vocab_file, read once for the whole run; a
    --do_lower_case that does not fit the vocab is refused as the runners refuse it
    (`vocab.check_case_matches`), unless --allow_case_mismatch."""
    try:
        tokenizer = cached_tokenizer.CachedTokenizer.from_vocab_file(
            options.vocab_file, options.do_lower_case)
        ids = pretraining_instances.VocabIds.from_vocab(tokenizer.vocab, options.vocab_file)
    except (ValueError, OSError) as error:
        raise app.UsageError(f"--vocab_file: {error}") from error
    check_case(options, tokenizer.vocab)
    return tokenizer, ids


def check_case(options, vocab) -> None:
    """Refuses a --do_lower_case that does not fit the vocab (the runners' check)."""
    if not options.allow_case_mismatch:
        vocab_lib.check_case_matches(options.do_lower_case, vocab, options.vocab_file)


def create(options: CreatePretrainingDataOptions):
    """Runs the tool with its options; returns the stats dict."""
    instance_options = options.instance_options()
    input_files = wikipedia.resolve_input_files(options.input_file)
    output_files = pretraining_pipeline.resolve_output_files(
        options.output_file, options.num_output_shards)
    stats_file = output_files[0] + pretraining_pipeline.STATS_SUFFIX
    # An output never replaces the corpus, the vocab or a reference file it reads.
    fileio.check_outputs_apart(
        {"output_file": output_files + [stats_file]},
        {"input_file": input_files, "vocab_file": options.vocab_file,
         "word_boundaries_file": word_segmentation.boundaries_files(
             options.word_boundaries_file, input_files)})
    logging.info("*** Reading from %d input file(s) ***", len(input_files))
    tokenizer, vocab_ids = load_vocab(options)
    config = pretraining_pipeline.PipelineConfig(
        input_files=input_files, output_files=output_files,
        random_seed=options.random_seed, input_format=options.input_format,
        num_workers=options.num_workers, gzip=options.gzip,
        chunk_chars=options.chunk_chars, language=options.language,
        stats_file=stats_file)
    return pretraining_pipeline.create_pretraining_data(tokenizer, instance_options, config,
                                                        vocab_ids=vocab_ids)


def run(flag_values):
    """Runs the tool with parsed flags; returns the stats dict."""
    return create(command_line.options_from_flags(CreatePretrainingDataOptions, flag_values))


def run_main():
    # SIGTERM / Ctrl-C end the command with one line (bert_tf.commands.command_line); on the way
    # out the pool's workers are terminated and the temporary shards removed.
    command_line.run_command(sys.modules[__name__], create,
                             options_class=CreatePretrainingDataOptions)


if __name__ == "__main__":
    run_main()
