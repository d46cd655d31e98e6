r"""Export a trained BERT model: a SavedModel for TensorFlow Serving, a Hugging Face
transformers folder, a keras-hub preset, TF Hub's preprocessor and encoder, or a LiteRT
model for phones (`--export_format`).

A bert_tf run folder (or one of its checkpoints) exports with nothing else: its
config.json gives the model type, labels, sentence pairs, long-document windows, the
multi-label threshold, max_seq_length and case. Flags that contradict what the run
trained are refused naming both values; serving choices (max_seq_length, doc_stride,
window_pooling, multi_label_threshold, max_query_length, max_answer_length) may differ:

    bert-export-model --init_checkpoint=/tmp/mrpc --export_dir=/models/mrpc --versioned

Other checkpoints (a google-research folder or prefix, a Hugging Face folder, a folder
of an earlier version without config.json) name what to export:

    bert-export-model --model_type=classifier --init_checkpoint=/tmp/mrpc \
      --bert_config_file=uncased_L-12_H-768_A-12/bert_config.json \
      --vocab_file=uncased_L-12_H-768_A-12/vocab.txt --label_names=0,1 --text_pair \
      --max_seq_length=128 --export_dir=/models/mrpc --versioned

`--export_dir` with `--versioned` (or an existing TF Serving model base path) gets a new
numeric version folder; an existing SavedModel is replaced only with `--overwrite`.

`--export_format=huggingface` writes config.json, model.safetensors and the tokenizer
files that transformers' `from_pretrained` reads (`--model_type=pretrainer` too: the
masked-LM and next-sentence heads); `--export_format=keras_hub` writes a keras-hub preset
of an encoder or classifier. Both refuse an `--export_dir` that is not empty unless
`--overwrite`:

    bert-export-model --export_format=huggingface --init_checkpoint=/tmp/mrpc \
      --export_dir=/models/mrpc_hf

`--export_format=tfhub` writes `--export_dir`/preprocessor and `--export_dir`/encoder with
TF Hub's BERT interface (`hub.KerasLayer` loads them); `--export_format=litert` writes
model.tflite (int32 token ids [1, --max_seq_length] in; `--quantize=int8` for
dynamic-range int8), vocab.txt and litert_config.json (the tokenizer settings):

    bert-export-model --export_format=litert --quantize=int8 --init_checkpoint=/tmp/mrpc \
      --export_dir=/models/mrpc_litert
"""

from bert_tf.commands import command_line
from bert_tf.runs.export_options import ExportOptions

OPTIONS = ExportOptions
REQUIRED = ("init_checkpoint", "export_dir")
EXPORT = "bert_tf.runs.export_checkpoint:export_from_checkpoint"


def export(options):
    """Exports the options' checkpoint and prints the folder written."""
    print(command_line.load(EXPORT)(options))


run_main = command_line.command(__name__, OPTIONS, export, REQUIRED)

if __name__ == "__main__":
    run_main()
