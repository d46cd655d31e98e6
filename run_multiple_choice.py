"""Fine-tune BERT for multiple choice: SWAG's CSV files or questions with choices in JSONL.

The command lives in `bert_tf.cli.run_multiple_choice`; this script runs it
(`python run_multiple_choice.py --help`).
"""

from bert_tf.cli.run_multiple_choice import run_main

if __name__ == "__main__":
    run_main()
