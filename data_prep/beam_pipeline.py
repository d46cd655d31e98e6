"""create_pretraining_data on Apache Beam: DirectRunner, Dataflow, Flink or Spark.

Needs the `beam` extra: `pip install bert_tf[beam]`.

Example (this machine, 2 processes):
  bert-create-pretraining-data-beam \\
    --input_file=enwiki-latest-pages-articles-multistream.xml.bz2 \\
    --output_file=/data/wiki.tfrecord --num_output_shards=0 --noreshuffle_chunks \\
    --vocab_file=uncased_L-12_H-768_A-12/vocab.txt --do_lower_case \\
    --max_seq_length=128 --max_predictions_per_seq=20 --dupe_factor=5 \\
    --runner=DirectRunner --direct_num_workers=2 --direct_running_mode=multi_processing

The flags are the local tool's (data_prep/create_pretraining_data.py; --num_workers is
the local pool's and is ignored here: the runner decides; --num_output_shards=0 lets the
runner decide, one shard per bundle, streamed without a grouping step), plus
--streams_per_split;
every other argument is a Beam pipeline option (--runner, --project, --region,
--temp_location, --flink_master, ...). For the same input, flags and seed the
instances are the local tool's (the same multiset; the order within the shards is the
runner's). Inputs and outputs may be on any filesystem Beam reads (gs://, s3://,
hdfs://). A multistream dump beside its `-index.txt.bz2` is read in ranges of
--streams_per_split streams by many workers. When the job is done the launcher sums the
Beam metrics into `<output_file>.stats.json` (the local tool's stats).
"""

import collections
import dataclasses
import json
import os
import sys
import tempfile
import time

from absl import app
from absl import flags
from absl import logging

from bert_tf.commands import help_text
from bert_tf.commands import command_line
from bert_tf.process import signals
from bert_tf import extras
from bert_tf.io import fileio
from bert_tf.options import OptionGroup, compose, option
from bert_tf.text import tokenization
from data_prep import create_pretraining_data
from data_prep import pretraining_instances
from data_prep import pretraining_pipeline
from data_prep import process_lifetime
from data_prep import tool_options

try:  # the `beam` extra; without it, the command says how to install it
    import apache_beam as beam
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems
    from apache_beam.metrics.metric import MetricsFilter
    from apache_beam.options.pipeline_options import PipelineOptions
    from data_prep import beam_chunks
    from data_prep import beam_inputs
except ModuleNotFoundError as import_error:
    if not (import_error.name or "").startswith("apache_beam"):
        raise
    beam = None


@dataclasses.dataclass(kw_only=True)
class ChunkSpreading(OptionGroup):
    """Whether the Beam pipeline reshuffles its chunks over the workers."""
    reshuffle_chunks: bool = option(
        True, "Spread the chunks over the workers with a shuffle (balances the work when "
        "the input has few splits; the runner moves the raw text). false: each split's "
        "chunks are built where they are read, so a worker holds one chunk (with "
        "--num_output_shards=0, nothing grows with the corpus even on the DirectRunner). "
        "The output does not depend on it.")


def check_beam_output(options) -> None:
    """Refuses what the Beam pipeline cannot do: word boundary files, a list of output
    files, a negative shard count."""
    if options.word_boundaries_file:
        raise app.UsageError(
            f"--word_boundaries_file={options.word_boundaries_file}: its lines pair with "
            "the input's lines in reading order, which the Beam pipeline's splits do not "
            "keep; use --word_segmenter=jieba here, or the local "
            "bert-create-pretraining-data")
    if "," in options.output_file:
        raise app.UsageError(f"--output_file={options.output_file!r}: the Beam pipeline "
                             "writes one name's shards (--num_output_shards), not a list "
                             "of files")
    if options.num_output_shards < 0:
        raise app.UsageError(f"--num_output_shards={options.num_output_shards}: expected "
                             ">= 0 (0: one shard per bundle, as the runner cuts them)")


CreatePretrainingDataBeamOptions = compose(
    "CreatePretrainingDataBeamOptions", create_pretraining_data.CreatePretrainingDataOptions,
    tool_options.SplitOptions, ChunkSpreading, checks=(check_beam_output,),
    doc="Every option of bert-create-pretraining-data-beam: the local tool's, how the "
        "input is split, and whether the chunks are reshuffled.")


def define_flags(flag_values=flags.FLAGS):
    """The local tool's flags plus the Beam-only ones."""
    command_line.define_flags(CreatePretrainingDataBeamOptions,
                              __name__, flag_values)


def settings_from_options(options: CreatePretrainingDataBeamOptions):
    """BeamSettings of the tool's options; bad values and empty globs are refused here."""
    instance_options = options.instance_options()  # every option checked first
    input_files = beam_inputs.match_input_files(options.input_file)
    prefix = options.output_file
    fileio.check_outputs_apart(  # an output never replaces the corpus or the vocab
        {"output_file": (beam_chunks.output_files(prefix, options.num_output_shards)
                         or [prefix]) + [prefix + pretraining_pipeline.STATS_SUFFIX]},
        {"input_file": input_files, "vocab_file": options.vocab_file})
    vocab_bytes, vocab_ids = read_vocab(options.vocab_file, options.do_lower_case,
                                        options)
    return beam_chunks.BeamSettings(
        input_files=tuple(input_files),
        output_prefix=options.output_file, num_shards=options.num_output_shards,
        options=instance_options, vocab_bytes=vocab_bytes, vocab_ids=vocab_ids,
        do_lower_case=options.do_lower_case, random_seed=options.random_seed,
        input_format=options.input_format, language=options.language,
        chunk_chars=options.chunk_chars, streams_per_split=options.streams_per_split,
        split_bytes=options.split_bytes, reshuffle_chunks=options.reshuffle_chunks,
        gzip=options.gzip)


def settings_from_flags(flag_values):
    """BeamSettings of parsed flags (`settings_from_options`)."""
    return settings_from_options(
        command_line.options_from_flags(CreatePretrainingDataBeamOptions, flag_values))


def read_vocab(vocab_file: str, do_lower_case: bool, options=None):
    """(bytes, VocabIds) of the vocab file (any Beam filesystem), checked as the local
    tool checks it (with `options`, its case too: `create_pretraining_data.check_case`):
    the bytes travel to the workers, which build their tokenizers from them, and the
    VocabIds with them (built once, here)."""
    try:
        with FileSystems.open(vocab_file, compression_type=CompressionTypes.UNCOMPRESSED) as reader:
            content = reader.read()
    except Exception as error:  # pylint: disable=broad-except  (each filesystem its own)
        raise app.UsageError(f"--vocab_file={vocab_file}: cannot read it ({error})") from error
    with tempfile.TemporaryDirectory(prefix="bert_tf_vocab_") as folder:
        path = os.path.join(folder, "vocab.txt")
        with open(path, "wb") as local:
            local.write(content)
        try:
            tokenizer = tokenization.FullTokenizer(path, do_lower_case)
            vocab_ids = pretraining_instances.VocabIds.from_vocab(tokenizer.vocab, vocab_file)
        except ValueError as error:
            raise app.UsageError(f"--vocab_file={vocab_file}: {error}") from error
        if options is not None:
            create_pretraining_data.check_case(options, tokenizer.vocab)
    return content, vocab_ids


def metric_counts(result) -> collections.Counter:
    """The `bert_tf` counters of a finished pipeline, summed over steps."""
    counts = collections.Counter()
    query = result.metrics().query(MetricsFilter().with_namespace(beam_chunks.METRICS_NAMESPACE))
    for counter in query["counters"]:
        value = counter.committed if counter.committed is not None else counter.attempted
        counts[counter.key.metric.name] += value or 0
    return counts


def run_pipeline(settings, pipeline_options) -> dict:
    """Runs the pipeline to the end, writes stats.json; returns the stats dict.

    Raises:
      ValueError: the corpus gave no instance, or fewer than --num_output_shards (the
        output files are removed).
    """
    files = beam_chunks.output_files(settings.output_prefix, settings.num_shards)
    start = time.time()
    with beam_chunks.removed_if_unfinished(settings.output_prefix), \
            beam.Pipeline(options=pipeline_options) as pipeline:
        beam_chunks.build_pipeline(pipeline, settings)
    stats = metric_counts(pipeline.result)
    files = files or beam_chunks.written_shards(settings.output_prefix)
    config = pretraining_pipeline.PipelineConfig(
        input_files=settings.input_files, output_files=files,
        random_seed=settings.random_seed, input_format=settings.input_format,
        num_workers=0, gzip=settings.gzip, chunk_chars=settings.chunk_chars,
        language=settings.language)
    summary = pretraining_pipeline.summarize_stats(stats, settings.options, config,
                                                   time.time() - start)
    summary["skipped"]["unreadable_files"] = stats["unreadable_files"]
    summary["runner"] = type(pipeline.runner).__name__
    try:
        if not summary["instances"]:
            raise ValueError(
                f"no training instances from {list(settings.input_files)}: "
                f"{summary['documents']} usable documents, skipped {summary['skipped']} "
                "(expected text with one sentence per line, WikiExtractor output or a "
                "MediaWiki XML dump)")
        if settings.num_shards:  # shards the runner chose are never empty
            pretraining_pipeline.check_shards_filled(summary["instances"], files)
    except ValueError:
        FileSystems.delete([f for f in files if FileSystems.exists(f)])
        raise
    write_stats(settings.output_prefix + pretraining_pipeline.STATS_SUFFIX, summary)
    beam_chunks.remove_earlier_outputs(settings.output_prefix, files)
    logging.info("Wrote %d instances to %d file(s) in %.1f s (%.0f instances/s)",
                 summary["instances"], len(files), summary["seconds"],
                 summary["instances_per_second"])
    return summary


def write_stats(path: str, summary: dict):
    """stats.json as the local tool writes it; local ones through a temporary name."""
    text = json.dumps(summary, indent=2, sort_keys=True) + "\n"
    if not beam_inputs.is_remote(path):
        fileio.write_text_atomic(path, text)
        return
    with FileSystems.create(path) as writer:
        writer.write(text.encode("utf-8"))


def run(flag_values, pipeline_args) -> dict:
    """Runs the command with parsed flags and the Beam pipeline arguments."""
    if beam is None:
        raise extras.missing("apache_beam", "this command")
    settings = settings_from_flags(flag_values)
    logging.info("*** Reading %d input file(s) on Beam ***", len(settings.input_files))
    return run_pipeline(settings, PipelineOptions(pipeline_args))


def run_beam_command(program: str, doc: str, options_class, run_fn):
    """Runs a Beam command: absl flags first, every other argument a pipeline option.

    `run_fn(flag_values, pipeline_args)` does the work; a user error ends the process
    with one line, as every command does (bert_tf.commands.command_line). `doc` and
    `options_class` (whose flags the command defined) are its `--help`.
    """
    if help_text.help_requested(sys.argv):  # absl's own --help would exit 1
        help_text.print_help(doc, options_class, flag_modules=(
            run_fn.__module__, sys.argv[0], command_line.__name__))
        sys.exit(0)
    app.define_help_flags()  # before the parse below: --help must not become a pipeline option
    for module_name in (run_fn.__module__, command_line.__name__):  # listed by --help
        for flag in flags.FLAGS.get_flags_for_module(module_name):
            flags.FLAGS.register_flag_by_module(sys.argv[0], flag)
    pipeline_args = flags.FLAGS(sys.argv, known_only=True)[1:]

    def main(argv):  # returns None: app.run would exit with any value returned
        del argv
        # A signal ends the runner's worker processes at once: the DirectRunner would
        # wait for each to finish its bundle (issue 49: 4 to 40 s and more).
        with signals.on_stop(process_lifetime.end_all_workers):
            command_line.run_reporting_user_errors(program, run_fn, flags.FLAGS,
                                                   pipeline_args)

    app.run(main, argv=sys.argv[:1])


def run_main():
    define_flags()
    run_beam_command("bert-create-pretraining-data-beam", __doc__,
                     CreatePretrainingDataBeamOptions, run)


if __name__ == "__main__":
    run_main()
