"""google-research/bert's `run_classifier` module: what a processor of your own needs.

    from bert_tf.compat import tokenization
    from bert_tf.compat.run_classifier import DataProcessor, InputExample

    class MyProcessor(DataProcessor):     # your class, unchanged
        ...

    processors = {"mytask": MyProcessor}  # the original's dict, in your module

    bert-run-classifier --processor_module=my_processors.py --task_name=mytask ...

`DataProcessor` (`get_train_examples(data_dir)`, `get_dev_examples`,
`get_test_examples`, `get_labels`, the `_read_tsv` classmethod) and `InputExample(guid,
text_a, text_b=None, label=None)` are bert_tf's own
(`bert_tf.tasks.classification.user_processors`, `bert_tf.runs.text_files`); from
Python, `register_processor("mytask", MyProcessor)` adds the name too. The original's
`main()`, `model_fn_builder` and `input_fn_builder` (tf.estimator) have no counterpart
here: `bert-run-classifier` (`bert_tf.tasks.classification.task.run`) is the whole
run. See docs/migrating_from_google_research.md.
"""

from bert_tf.tasks.classification.user_processors import (  # noqa: F401
    DataProcessor, register_processor, registered_names)
from bert_tf.runs.text_files import InputExample  # noqa: F401

__all__ = ["DataProcessor", "InputExample", "register_processor", "registered_names"]
