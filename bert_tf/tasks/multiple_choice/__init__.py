"""Multiple choice (SWAG, and questions with choices in JSONL): bert-run-multiple-choice.

One folder: the model (`model.py`), its SavedModel signatures and model-type
registration (`serving.py`, imported here so that importing any part registers it), the
data (`data.py`) and the task (`task.py`, registered in `bert_tf.tasks.registry`).
"""

from bert_tf.tasks.multiple_choice import serving  # noqa: F401  (registers the model type)
