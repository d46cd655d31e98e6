"""Named-entity recognition: CoNLL data, features, conlleval, the task."""
