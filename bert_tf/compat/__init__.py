"""google-research/bert's Python modules over bert_tf: code written against the original
runs with its import line changed.

    from bert_tf.compat import tokenization, modeling, optimization
    from bert_tf.compat.run_classifier import DataProcessor, InputExample

`tokenization` is the original's API over `bert_tf.text`; `modeling` its `BertConfig`
and an eager `BertModel` over `bert_tf.models.BertEncoder`, loading google-research
checkpoints through `bert_tf.weights`; `optimization.create_optimizer` the original's
schedule and AdamW as a Keras optimizer (`bert_tf.train.optimization`);
`run_classifier` the `DataProcessor` base that `bert-run-classifier
--processor_module` runs. What cannot carry over (TF1 sessions, `tf.estimator`,
`TPUEstimator`) and what to write instead: docs/migrating_from_google_research.md.
"""
