"""google-research checkpoint entries: what a model class says about its own variables.

An entry maps a google-research (TF1, name-based) checkpoint name to `(variable,
transposed)`; `transposed` means the checkpoint stores the kernel as [out, in] (the
`output_weights` of run_classifier / run_squad heads and `cls/seq_relationship`).
`bert_tf.weights.checkpoints.google_variable_map` joins the encoder's entries and the
head's (`EncoderHeadModel.google_head_entries`); every checkpoint format goes through it.
"""


def dense_entries(prefix, projection):
    """`{prefix}/kernel` and `{prefix}/bias` of a `Projection`, in the Keras layout."""
    return {f"{prefix}/kernel": (projection.kernel, False),
            f"{prefix}/bias": (projection.bias, False)}


def layer_norm_entries(prefix, layer_norm):
    """`{prefix}/gamma` and `{prefix}/beta` of a LayerNormalization."""
    return {f"{prefix}/gamma": (layer_norm.gamma, False),
            f"{prefix}/beta": (layer_norm.beta, False)}


def output_layer_entries(scope, projection):
    """`{scope}/output_weights` ([out, in], transposed) and `{scope}/output_bias` of a
    `Projection`: how google-research names its output layers (run_classifier's own at
    the top level: `scope=""` gives `output_weights`, `output_bias`)."""
    prefix = f"{scope}/" if scope else ""
    return {f"{prefix}output_weights": (projection.kernel, True),
            f"{prefix}output_bias": (projection.bias, False)}
