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

from bert_tf.commands import command_line
from bert_tf.runs.feature_extraction_options import ExtractOptions

OPTIONS = ExtractOptions
REQUIRED = ("input_file", "output_file", "init_checkpoint")
run_main = command_line.command(__name__, OPTIONS, "bert_tf.runs.feature_extraction:run",
                                REQUIRED)

if __name__ == "__main__":
    run_main()
