"""Hyperparameter search of any registered task on Optuna (`bert-search`; the `search`
extra): `space` reads the search space file, `study` runs the trials, `trial` reports
their dev scores to the pruner, `report` writes the table and marks the best trial.
Nothing in the library below `bert_tf.tasks` imports this package."""
