r"""Turn a text file into sentence vectors with a sentence encoder.

Each text becomes one vector: the model's token outputs pooled (mean, max or [CLS]) and,
when the model normalizes, L2-normalized. Outputs: a .npy (float32 [N, H], in the input's
order) and / or a .jsonl ({"id": ..., "embedding": [...]} a line):

    bert-encode --init_checkpoint=all-MiniLM-L6-v2 --input_file=texts.txt \
      --output_file=vectors.npy,vectors.jsonl

    bert-encode --init_checkpoint=/tmp/stsb_run --input_file=corpus.jsonl \
      --text_column=text --id_column=_id --output_file=corpus.jsonl.npy \
      --long_text=windows --doc_stride=64

`--init_checkpoint`: a sentence-embeddings run (bert-train --task=sentence_embeddings),
any run's encoder, a google-research, Hugging Face or sentence-transformers folder. Its
run's config.json or its sentence-transformers files give the pooling, normalization,
max_seq_length and case; flags that contradict them are refused. The texts are batched
by length (each batch padded to its longest); progress is logged, and a one-line
summary printed at the end. Bad input (an empty text, a missing column or field, a
folder that holds no model) is refused before any work, naming file and line.
"""

from bert_tf.commands import command_line
from bert_tf.tasks.sentence_embeddings.options import EncodeOptions

OPTIONS = EncodeOptions
REQUIRED = ("input_file", "output_file", "init_checkpoint")
ENCODE = "bert_tf.tasks.sentence_embeddings.encode:run"


def encode(options):
    """Encodes the options' input file and prints the one-line summary (the encoding,
    which imports TensorFlow, loads now: `command_line.load`)."""
    print(command_line.load(ENCODE)(options)["line"])


run_main = command_line.command(__name__, OPTIONS, encode, REQUIRED)

if __name__ == "__main__":
    run_main()
