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

from absl import app
from absl import flags
from absl import logging

from bert_tf import fileio
from data_prep import beam_pipeline
from data_prep import build_vocab
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


def define_flags(flag_values=flags.FLAGS):
    """bert-build-vocab's flags plus the Beam-only ones."""
    build_vocab.define_flags(flag_values)
    flags.DEFINE_integer("min_word_count", 1,
                         "Drop words seen fewer times before learning (1: none; the vocab "
                         "is then the local builder's).", flag_values=flag_values)
    beam_pipeline.define_split_flags(flag_values)


def count_split_words(split, input_format, language, do_lower_case):
    """(word, count) pairs of one split's sentences; skips go to the Beam metrics."""
    stats = collections.Counter()
    sentences = (sentence
                 for document in beam_chunks.readable_documents(split, input_format, language, stats)
                 for sentence in wikipedia.raw_document_to_sentences(document, stats))
    counts = build_vocab.count_words(sentences, do_lower_case)
    beam_chunks.count_stats(stats)
    return list(counts.items())


def learn_and_write(word_counts, output_file, vocab_size, num_unused, learn_kwargs):
    """The local builder's learn_vocab on the summed counts; writes vocab.txt."""
    vocab = build_vocab.learn_vocab(dict(word_counts), vocab_size, num_unused, **learn_kwargs)
    beam_chunks.count_stats({"distinct_words": len(word_counts)})
    if beam_inputs.is_remote(output_file):
        with FileSystems.create(output_file) as writer:
            writer.write("".join(token + "\n" for token in vocab).encode("utf-8"))
    else:
        build_vocab.write_vocab(vocab, output_file)
    return len(vocab)


def build_pipeline(pipeline, input_files, output_file, vocab_size=30522, do_lower_case=True,
                   num_unused=100, input_format="auto", language=None, min_word_count=1,
                   streams_per_split=100, split_bytes=2_000_000, **learn_kwargs):
    """Adds the vocab graph to `pipeline` (learn_kwargs: build_vocab.learn_vocab's)."""
    return (beam_chunks.input_splits(pipeline, input_files, streams_per_split, input_format,
                                     split_bytes)
            | "CountWords" >> beam.FlatMap(count_split_words, input_format=input_format,
                                           language=language, do_lower_case=do_lower_case)
            | "SumCounts" >> beam.CombinePerKey(sum)
            | "DropRare" >> beam.Filter(lambda word_count: word_count[1] >= min_word_count)
            | "AllCounts" >> beam.combiners.ToList()
            | "Learn" >> beam.Map(learn_and_write, output_file=output_file,
                                  vocab_size=vocab_size, num_unused=num_unused,
                                  learn_kwargs=learn_kwargs))


def run(flag_values, pipeline_args) -> dict:
    """Runs the command with parsed flags and the Beam pipeline arguments."""
    FLAGS = flag_values  # pylint: disable=invalid-name
    if beam is None:
        raise app.UsageError(beam_pipeline.MISSING_BEAM)
    for name in ("input_file", "output_file"):
        if not getattr(FLAGS, name):
            raise app.UsageError(f"--{name} is required")
    if FLAGS.max_sentences:
        raise app.UsageError("--max_sentences: not supported on Beam (all sentences count)")
    if FLAGS.min_word_count < 1:
        raise app.UsageError(f"--min_word_count={FLAGS.min_word_count}: expected >= 1")
    beam_pipeline.check_split_flags(FLAGS)
    if not beam_inputs.is_remote(FLAGS.output_file):
        fileio.check_output_path(FLAGS.output_file, parent_must_exist=False)
    input_files = beam_inputs.match_input_files(FLAGS.input_file)
    with beam.Pipeline(options=PipelineOptions(pipeline_args)) as pipeline:
        build_pipeline(
            pipeline, input_files, FLAGS.output_file, vocab_size=FLAGS.vocab_size,
            do_lower_case=FLAGS.do_lower_case, num_unused=FLAGS.num_unused,
            input_format=FLAGS.input_format, language=FLAGS.language,
            min_word_count=FLAGS.min_word_count, streams_per_split=FLAGS.streams_per_split,
            split_bytes=FLAGS.split_bytes,
            max_unique_chars=FLAGS.max_unique_chars, max_token_length=FLAGS.max_token_length,
            lower_thresh=FLAGS.lower_thresh, num_iterations=FLAGS.num_iterations)
    summary = dict(beam_pipeline.metric_counts(pipeline.result), output_file=FLAGS.output_file)
    logging.info("wrote %s: %s", FLAGS.output_file, summary)
    return summary


def run_main():
    define_flags()
    beam_pipeline.run_beam_command("bert-build-vocab-beam", __doc__, run)


if __name__ == "__main__":
    run_main()
