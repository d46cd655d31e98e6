"""build_vocab on Apache Beam: words counted by many workers, the vocab learned on one.

Needs the `beam` extra: `pip install bert_tf[beam]`.

Example:
  bert-build-vocab-beam --input_file='gs://my-bucket/enwiki/*-multistream.xml.bz2' \\
    --output_file=gs://my-bucket/vocab.txt --vocab_size=30522 --do_lower_case \\
    --runner=DataflowRunner --project=my-project --region=us-central1 \\
    --temp_location=gs://my-bucket/tmp --setup_file=./setup.py

The flags are bert-build-vocab's (data_prep/build_vocab.py) plus --min_word_count and
--streams_per_split; every other argument is a Beam pipeline option. The corpus is read
in splits (data_prep/beam_inputs.py: whole files, multistream dumps by stream range);
sentences are split and words counted (BERT basic tokenization) in parallel and summed
by a combiner; the word counts then go to tensorflow-text's WordPiece learner
(`wordpiece_tokenizer_learner_lib.learn`, the algorithm of tensorflow-text's Beam vocab
tool, whose Beam module the tensorflow-text wheel does not ship) on one worker, through
the local builder's `learn_vocab`. With --min_word_count=1 (the default) the vocab is
the local builder's; a higher value drops rarer words before learning, which bounds the
learner's memory on a huge corpus and changes the vocab slightly (rare words add to the
counts of the pieces and characters they contain).
"""

import collections
import dataclasses

from absl import app
from absl import flags
from absl import logging

from bert_tf.commands import command_line
from bert_tf import extras
from bert_tf.io import fileio
from bert_tf.options import OptionGroup, compose, option
from data_prep import beam_pipeline
from data_prep import build_vocab
from data_prep import tool_options
from data_prep import wikipedia

try:  # the `beam` extra; without it, the command says how to install it
    import apache_beam as beam
    from apache_beam.io.filesystems import FileSystems
    from apache_beam.options.pipeline_options import PipelineOptions
    from data_prep import beam_chunks
    from data_prep import beam_inputs
except ModuleNotFoundError as import_error:
    if not (import_error.name or "").startswith("apache_beam"):
        raise
    beam = None


@dataclasses.dataclass(kw_only=True)
class RareWords(OptionGroup):
    """The rare words a Beam vocab build drops before learning."""
    min_word_count: int = option(
        1, "Drop words seen fewer times before learning (1: none; the vocab is then the "
        "local builder's).")

    def check(self) -> None:
        if self.min_word_count < 1:
            raise app.UsageError(f"--min_word_count={self.min_word_count}: expected >= 1")


def _all_sentences(options) -> None:
    """Beam counts every sentence: --max_sentences is refused."""
    if options.max_sentences:
        raise app.UsageError("--max_sentences: not supported on Beam (all sentences count)")


BuildVocabBeamOptions = compose(
    "BuildVocabBeamOptions", build_vocab.BuildVocabOptions, tool_options.SplitOptions,
    RareWords, checks=(_all_sentences,),
    doc="Every option of bert-build-vocab-beam: bert-build-vocab's, how the input is "
        "split, and the rare words dropped before learning.")


def define_flags(flag_values=flags.FLAGS):
    """bert-build-vocab's flags plus the Beam-only ones."""
    command_line.define_flags(BuildVocabBeamOptions, __name__,
                              flag_values)


def count_split_words(split, options: BuildVocabBeamOptions):
    """(word, count) pairs of one split's sentences; skips go to the Beam metrics."""
    stats = collections.Counter()
    sentences = (sentence
                 for document in beam_chunks.readable_documents(
                     split, options.input_format, options.language, stats)
                 for sentence in wikipedia.raw_document_to_sentences(document, stats))
    counts = build_vocab.count_words(sentences, options.do_lower_case)
    beam_chunks.count_stats(stats)
    return list(counts.items())


def learn_and_write(word_counts, options: BuildVocabBeamOptions):
    """The local builder's learn_vocab on the summed counts; writes vocab.txt."""
    vocab = build_vocab.learn_vocab(dict(word_counts), options)
    beam_chunks.count_stats({"distinct_words": len(word_counts)})
    if beam_inputs.is_remote(options.output_file):
        with FileSystems.create(options.output_file) as writer:
            writer.write("".join(token + "\n" for token in vocab).encode("utf-8"))
    else:
        build_vocab.write_vocab(vocab, options.output_file)
    return len(vocab)


def build_pipeline(pipeline, input_files, options: BuildVocabBeamOptions):
    """Adds the vocab graph to `pipeline`."""
    min_word_count = options.min_word_count
    return (beam_chunks.input_splits(pipeline, input_files, options.streams_per_split,
                                     options.input_format, options.split_bytes)
            | "CountWords" >> beam.FlatMap(count_split_words, options=options)
            | "SumCounts" >> beam.CombinePerKey(sum)
            | "DropRare" >> beam.Filter(lambda word_count: word_count[1] >= min_word_count)
            | "AllCounts" >> beam.combiners.ToList()
            | "Learn" >> beam.Map(learn_and_write, options=options))


def run(flag_values, pipeline_args) -> dict:
    """Runs the command with parsed flags and the Beam pipeline arguments."""
    if beam is None:
        raise extras.missing("apache_beam", "this command")
    options = command_line.options_from_flags(BuildVocabBeamOptions, flag_values)
    options.check()  # every group's checks, before the pipeline reads anything
    if not beam_inputs.is_remote(options.output_file):
        fileio.check_output_path(options.output_file, parent_must_exist=False)
    input_files = beam_inputs.match_input_files(options.input_file)
    fileio.check_outputs_apart({"output_file": options.output_file},
                               {"input_file": input_files})
    with beam_chunks.removed_if_unfinished(options.output_file), \
            beam.Pipeline(options=PipelineOptions(pipeline_args)) as pipeline:
        build_pipeline(pipeline, input_files, options)
    summary = dict(beam_pipeline.metric_counts(pipeline.result),
                   output_file=options.output_file)
    logging.info("wrote %s: %s", options.output_file, summary)
    return summary


def run_main():
    define_flags()
    beam_pipeline.run_beam_command("bert-build-vocab-beam", __doc__, BuildVocabBeamOptions,
                                   run)


if __name__ == "__main__":
    run_main()
