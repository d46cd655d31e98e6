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


def encoder_entries(encoder, scope="bert", embeddings=True):
    """The entries of a `BertEncoder`: `{scope}/embeddings/*`, `{scope}/embeddings_project/*`
    (with a config's `embedding_size`), `{scope}/encoder/layer_N/*`, `{scope}/pooler/*`.

    Args:
      encoder: A built `BertEncoder`.
      scope: "bert"; another for a second encoder of one model (ELECTRA's "generator").
      embeddings: False for an encoder whose embedding tables are another's (named there).
    """
    entries = {}
    if embeddings:
        layer = encoder.embeddings
        for name in ("word_embeddings", "token_type_embeddings", "position_embeddings"):
            entries[f"{scope}/embeddings/{name}"] = (getattr(layer, name).embeddings, False)
        entries.update(layer_norm_entries(f"{scope}/embeddings/LayerNorm", layer.layer_norm))
    if encoder.embeddings_project is not None:
        entries.update(dense_entries(f"{scope}/embeddings_project",
                                     encoder.embeddings_project))
    for index, block in enumerate(encoder.transformer_layers):
        prefix = f"{scope}/encoder/layer_{index}"
        attention = block.self_attention
        for name in ("query", "key", "value"):
            entries.update(dense_entries(f"{prefix}/attention/self/{name}",
                                         getattr(attention, name)))
        entries.update(dense_entries(f"{prefix}/attention/output/dense",
                                     block.attention_output))
        entries.update(layer_norm_entries(f"{prefix}/attention/output/LayerNorm",
                                          block.attention_layer_norm))
        entries.update(dense_entries(f"{prefix}/intermediate/dense", block.intermediate))
        entries.update(dense_entries(f"{prefix}/output/dense", block.output_dense))
        entries.update(layer_norm_entries(f"{prefix}/output/LayerNorm",
                                          block.output_layer_norm))
    entries.update(dense_entries(f"{scope}/pooler/dense", encoder.pooler.dense))
    return entries
