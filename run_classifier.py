"""Fine-tune BERT for sentence(-pair) classification: GLUE, XNLI or your own files.

The command lives in `bert_tf.cli.run_classifier`; this script runs it
(`python run_classifier.py --help`).
"""

from bert_tf.cli.run_classifier import run_main

if __name__ == "__main__":
    run_main()
