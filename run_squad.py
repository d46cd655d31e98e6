"""Fine-tune BERT on SQuAD v1.1 / v2.0 and predict answers, with the official metrics.

The command lives in `bert_tf.cli.run_squad`; this script runs it
(`python run_squad.py --help`).
"""

from bert_tf.cli.run_squad import run_main

if __name__ == "__main__":
    run_main()
