"""Extract per-token BERT activations, as google-research/bert's extract_features.py.

The command lives in `bert_tf.cli.extract_features`; this script runs it
(`python extract_features.py --help`).
"""

from bert_tf.cli.extract_features import run_main

if __name__ == "__main__":
    run_main()
