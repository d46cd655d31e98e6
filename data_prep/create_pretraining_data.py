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

import sys

from absl import app
from absl import flags
from absl import logging

from bert_tf.cli import common
from bert_tf.text import cached_tokenizer
from data_prep import pretraining_instances
from data_prep import pretraining_pipeline
from data_prep import wikipedia


def define_flags(flag_values=flags.FLAGS):
    """Defines the flags (not at import, so that other CLIs' flags never clash)."""
    fv = flag_values
    flags.DEFINE_string("input_file", None,
                        "Input corpus files: comma-separated paths or globs.", flag_values=fv)
    flags.DEFINE_string("output_file", None,
                        "Output TFRecord file(s): comma-separated, or one name that "
                        "--num_output_shards expands to NAME-00000-of-0000N.", flag_values=fv)
    flags.DEFINE_string("vocab_file", None, "The vocabulary file of the BERT model.", flag_values=fv)
    flags.DEFINE_bool("do_lower_case", True, "Lower case the input (uncased models).", flag_values=fv)
    flags.DEFINE_bool("do_whole_word_mask", False,
                      "Mask all the WordPieces of a word together.", flag_values=fv)
    flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.", flag_values=fv)
    flags.DEFINE_integer("max_predictions_per_seq", 20,
                         "Maximum number of masked LM predictions per sequence.", flag_values=fv)
    flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation.", flag_values=fv)
    flags.DEFINE_integer("dupe_factor", 10,
                         "Number of times to duplicate the input data (with different masks).", flag_values=fv)
    flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.", flag_values=fv)
    flags.DEFINE_float("short_seq_prob", 0.1,
                       "Probability of creating sequences shorter than the maximum length.", flag_values=fv)
    flags.DEFINE_enum("input_format", "auto", list(wikipedia.INPUT_FORMATS),
                      "Input format; auto looks at each file's name and first line.", flag_values=fv)
    flags.DEFINE_integer("num_workers", 1,
                         "Processes that build instances (1: all in this process). The "
                         "output does not depend on it.", flag_values=fv)
    flags.DEFINE_integer("num_output_shards", 1,
                         "Shards to write when --output_file is a single name.", flag_values=fv)
    flags.DEFINE_bool("gzip", False, "Write GZIP-compressed TFRecords.", flag_values=fv)
    flags.DEFINE_integer("chunk_chars", 1_000_000,
                         "Characters of text per chunk: documents are shuffled and paired "
                         "within a chunk. Part of the seed: changing it changes the output.", flag_values=fv)
    flags.DEFINE_enum("masking", "static", list(pretraining_instances.MASKING_MODES),
                      "static: masks drawn here, one set per --dupe_factor copy (the "
                      "original). none: rows without masked_lm_* features, one copy "
                      "(--dupe_factor=1), for run_pretraining --dynamic_masking, which "
                      "draws new masks every epoch.", flag_values=fv)
    flags.DEFINE_bool("next_sentence", True,
                      "true: [CLS] A [SEP] B [SEP] pairs with next_sentence_labels (the "
                      "original). false: RoBERTa's full-sentence rows, [CLS] sentences "
                      "[SEP] filled to --max_seq_length across documents ([SEP] between "
                      "documents), segment ids 0, no next_sentence_labels; train with "
                      "run_pretraining --next_sentence=false.", flag_values=fv)
    flags.DEFINE_string("language", None,
                        "pysbd language code for sentence splitting of wiki text "
                        "(default: the dump's language, else en).", flag_values=fv)


def instance_options_from_flags(flag_values) -> pretraining_instances.InstanceOptions:
    """The required files and the instance options of parsed flags (this tool's and the
    Beam tool's, which extends these flags)."""
    FLAGS = flag_values  # pylint: disable=invalid-name
    for name in ("input_file", "output_file", "vocab_file"):
        if not getattr(FLAGS, name):
            raise app.UsageError(f"--{name} is required")
    return pretraining_instances.InstanceOptions(
        max_seq_length=FLAGS.max_seq_length,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        masked_lm_prob=FLAGS.masked_lm_prob,
        short_seq_prob=FLAGS.short_seq_prob,
        dupe_factor=FLAGS.dupe_factor,
        do_whole_word_mask=FLAGS.do_whole_word_mask,
        masking=FLAGS.masking, next_sentence=FLAGS.next_sentence)


def run(flag_values):
    """Runs the tool with parsed flags; returns the stats dict."""
    FLAGS = flag_values  # pylint: disable=invalid-name
    options = instance_options_from_flags(FLAGS)
    if FLAGS.num_workers < 1:
        raise app.UsageError(f"--num_workers={FLAGS.num_workers}: expected >= 1")
    input_files = wikipedia.resolve_input_files(FLAGS.input_file)
    output_files = pretraining_pipeline.resolve_output_files(
        FLAGS.output_file, FLAGS.num_output_shards)
    logging.info("*** Reading from %d input file(s) ***", len(input_files))
    try:
        tokenizer = cached_tokenizer.CachedTokenizer.from_vocab_file(
            FLAGS.vocab_file, FLAGS.do_lower_case)
        pretraining_instances.VocabIds.from_vocab(tokenizer.vocab, FLAGS.vocab_file)
    except (ValueError, OSError) as error:
        raise app.UsageError(f"--vocab_file: {error}") from error
    config = pretraining_pipeline.PipelineConfig(
        input_files=input_files, output_files=output_files,
        random_seed=FLAGS.random_seed, input_format=FLAGS.input_format,
        num_workers=FLAGS.num_workers, gzip=FLAGS.gzip, chunk_chars=FLAGS.chunk_chars,
        language=FLAGS.language,
        stats_file=FLAGS.output_file.split(",")[0].strip() + pretraining_pipeline.STATS_SUFFIX)
    return pretraining_pipeline.create_pretraining_data(tokenizer, options, config)


def run_main():
    define_flags()
    common.run_command(sys.modules[__name__], lambda: run(flags.FLAGS))


if __name__ == "__main__":
    run_main()
