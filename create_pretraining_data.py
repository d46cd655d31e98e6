"""Create masked-LM / next-sentence pre-training TFRecords, as google-research/bert's
create_pretraining_data.py (its flags and record format).

The command lives in `data_prep.create_pretraining_data` (installed as
bert-create-pretraining-data); this script runs it
(`python create_pretraining_data.py --help`).
"""

from data_prep.create_pretraining_data import run_main

if __name__ == "__main__":
    run_main()
