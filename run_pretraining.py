"""Pre-trains BERT (masked LM + next-sentence prediction) on TFRecords.

The command lives in `bert_tf.cli.run_pretraining`; this script runs it
(`python run_pretraining.py --help`).
"""

from bert_tf.cli.run_pretraining import run_main

if __name__ == "__main__":
    run_main()
