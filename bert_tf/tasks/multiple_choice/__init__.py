"""Multiple choice (SWAG, and questions with choices in JSONL): bert-run-multiple-choice.

One folder: the model (`model.py`), its SavedModel signatures and model-type
registration (`serving.py`, imported by the task, so that loading the task registers
it), the options (`options.py`, without TensorFlow), the data (`data.py`) and the task
(`task.py`, registered in `bert_tf.runs.registry`).
"""
