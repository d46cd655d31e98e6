r"""Extract per-token BERT activations, as google-research/bert's extract_features.py.

Each input line is a text, or a pair written `text_a ||| text_b`. Each output line is
the JSON of the original tool:

    {"linex_index": 0, "features": [{"token": "[CLS]", "layers": [
        {"index": -1, "values": [0.123456, ...]}, ...]}, ...]}

one entry per token of `[CLS] a [SEP] (b [SEP])` (padding excluded), the chosen
`--layers` (-1 = last Transformer block) with values rounded to 6 decimals. Example:

    bert-extract-features --input_file=input.txt --output_file=output.jsonl \
      --init_checkpoint=uncased_L-12_H-768_A-12 --layers=-1,-2,-3,-4 \
      --max_seq_length=128 --batch_size=8

`--init_checkpoint` may be a released checkpoint folder (bert_config.json and vocab.txt
are then found in it), a checkpoint prefix or a Hugging Face folder.
"""

import sys

from absl import flags

from bert_tf import fileio
from bert_tf.cli import common

from bert_tf.tasks import feature_extraction
from bert_tf.text import tokenization
from bert_tf.models import BertEncoder
from bert_tf.weights import from_pretrained

FLAGS = flags.FLAGS

flags.DEFINE_string("input_file", None, "Text file: one text or `text_a ||| text_b` a line.")
flags.DEFINE_string("output_file", None, "JSON lines output.")
flags.DEFINE_string("layers", "-1,-2,-3,-4", "Comma-separated Transformer block indexes.")
flags.DEFINE_string("bert_config_file", None,
                    "bert_config.json (default: the one in init_checkpoint).")
flags.DEFINE_string("init_checkpoint", None,
                    "Released checkpoint folder, checkpoint prefix or Hugging Face folder.")
flags.DEFINE_string("vocab_file", None, "vocab.txt (default: the one in init_checkpoint).")
flags.DEFINE_bool("do_lower_case", True, "Uncased model: lowercase and strip accents.")
flags.DEFINE_integer("max_seq_length", 128, "Tokens per sequence ([CLS] and [SEP] included).")
flags.DEFINE_integer("batch_size", 32, "Sequences per model call.")

def extract():
    """Writes the features of the flags' input file."""
    vocab_file = FLAGS.vocab_file or fileio.file_in_folder(FLAGS.init_checkpoint, "vocab.txt")
    if not vocab_file:
        raise FileNotFoundError(f"no vocab.txt in {FLAGS.init_checkpoint}; pass --vocab_file")
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=FLAGS.do_lower_case)
    encoder = from_pretrained(BertEncoder, FLAGS.init_checkpoint, config=FLAGS.bert_config_file)
    tokenization.check_vocab_matches(len(tokenizer.vocab), vocab_file, encoder.config.vocab_size)
    feature_extraction.extract_features(
        encoder, tokenizer, FLAGS.input_file, FLAGS.output_file, FLAGS.layers,
        FLAGS.max_seq_length, FLAGS.batch_size)


def run_main():
    common.run_command(sys.modules[__name__], extract,
                       required=("input_file", "output_file", "init_checkpoint"))


if __name__ == "__main__":
    run_main()
