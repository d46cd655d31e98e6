r"""Export a trained BERT model as a SavedModel for TensorFlow Serving.

Loads weights from a fine-tuning `--output_dir` (the latest `ckpt-<step>` of
run_classifier / run_squad / run_ner), a google-research checkpoint (folder or prefix)
or a Hugging Face folder, and writes the signatures of `bert_tf.serving.export`:
`serving_default` (raw text), `serve_ids` and `serve_examples`. Example:

    bert-export-model --model_type=classifier --init_checkpoint=/tmp/mrpc \
      --bert_config_file=uncased_L-12_H-768_A-12/bert_config.json \
      --vocab_file=uncased_L-12_H-768_A-12/vocab.txt --label_names=0,1 --text_pair \
      --max_seq_length=128 --export_dir=/models/mrpc --versioned

`--export_dir` with `--versioned` (or an existing TF Serving model base path) gets a new
numeric version folder; an existing SavedModel is replaced only with `--overwrite`.
"""

import sys

from absl import flags

from bert_tf.cli import common

from bert_tf.serving import export_checkpoint

FLAGS = flags.FLAGS
flags.DEFINE_enum("model_type", None, ["classifier", "span_labeler", "squad",
                                       "token_classifier", "ner", "encoder"],
                  "What to export (squad = span_labeler, ner = token_classifier).")
flags.DEFINE_string("init_checkpoint", None,
                    "Fine-tuning output_dir / training checkpoint, google-research "
                    "checkpoint (folder or prefix) or Hugging Face folder.")
flags.DEFINE_string("bert_config_file", None,
                    "bert_config.json (default: the one in or beside init_checkpoint).")
flags.DEFINE_string("vocab_file", None,
                    "vocab.txt the model was trained with (default: in init_checkpoint).")
flags.DEFINE_bool("do_lower_case", True, "Uncased model: lowercase and strip accents.")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length of the signatures.")
flags.DEFINE_list("label_names", None, "Class / tag names in label-id order.")
flags.DEFINE_string("labels_file", None, "Class / tag names, one per line, in id order.")
flags.DEFINE_bool("is_regression", False, "classifier: one output `score`.")
flags.DEFINE_bool("text_pair", False, "classifier: serving_default takes text_a and text_b.")
flags.DEFINE_integer("max_query_length", 64, "squad: question tokens kept.")
flags.DEFINE_integer("max_answer_length", 30, "squad: longest answer in tokens.")
flags.DEFINE_string("export_dir", None, "SavedModel folder or TF Serving model base path.")
flags.DEFINE_bool("overwrite", False, "Replace an existing SavedModel at export_dir.")
flags.DEFINE_bool("versioned", False, "Write export_dir/<next version number>.")
flags.DEFINE_bool("allow_case_mismatch", False,
                  "Export even when do_lower_case does not fit the vocab or the released "
                  "folder name (uncased / cased).")


def export():
    """Exports the flags' checkpoint and prints the SavedModel path."""
    path = export_checkpoint.export_from_checkpoint(
        FLAGS.model_type, FLAGS.init_checkpoint, FLAGS.export_dir,
        bert_config_file=FLAGS.bert_config_file, vocab_file=FLAGS.vocab_file,
        do_lower_case=FLAGS.do_lower_case, max_seq_length=FLAGS.max_seq_length,
        label_names=export_checkpoint.read_label_names(FLAGS.label_names, FLAGS.labels_file),
        is_regression=FLAGS.is_regression, text_pair=FLAGS.text_pair,
        max_query_length=FLAGS.max_query_length,
        max_answer_length=FLAGS.max_answer_length, overwrite=FLAGS.overwrite,
        versioned=FLAGS.versioned, allow_case_mismatch=FLAGS.allow_case_mismatch)
    print(path)


def run_main():
    common.run_command(sys.modules[__name__], export,
                       required=("model_type", "init_checkpoint", "export_dir"))


if __name__ == "__main__":
    run_main()
