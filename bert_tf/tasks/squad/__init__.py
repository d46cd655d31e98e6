"""SQuAD: data, features, the official evaluation, answer post-processing, the task."""
