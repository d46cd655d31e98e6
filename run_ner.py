"""Fine-tune BERT for named-entity recognition on CoNLL-2003 or any token-per-line file.

The command lives in `bert_tf.cli.run_ner`; this script runs it
(`python run_ner.py --help`).
"""

from bert_tf.cli.run_ner import run_main

if __name__ == "__main__":
    run_main()
