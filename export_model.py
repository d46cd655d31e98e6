"""Export a trained BERT model as a SavedModel for TensorFlow Serving.

The command lives in `bert_tf.cli.export_model`; this script runs it
(`python export_model.py --help`).
"""

from bert_tf.cli.export_model import run_main

if __name__ == "__main__":
    run_main()
