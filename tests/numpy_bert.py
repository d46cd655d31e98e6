"""An independent numpy (float64) forward pass of BERT, written from the paper's equations.

Weights come as a dict keyed by google-research checkpoint names, in the checkpoint
layout (kernels [in, out]; `cls/seq_relationship/output_weights` [2, H]).
"""

import numpy as np
from scipy.special import erf


def gelu(x):
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


def layer_norm(x, gamma, beta, epsilon=1e-12):
    mean = x.mean(axis=-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta


def softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def _dense(w, scope, x):
    return x @ w[f"{scope}/kernel"] + w[f"{scope}/bias"]


def encoder_forward(w, num_layers, num_heads, input_ids, input_mask, segment_ids):
    """Returns (sequence_output [B, S, H], pooled_output [B, H], per-layer outputs)."""
    w = {k: np.asarray(v, np.float64) for k, v in w.items()}
    batch, seq = input_ids.shape
    x = (w["bert/embeddings/word_embeddings"][input_ids]
         + w["bert/embeddings/token_type_embeddings"][segment_ids]
         + w["bert/embeddings/position_embeddings"][:seq][None])
    x = layer_norm(x, w["bert/embeddings/LayerNorm/gamma"], w["bert/embeddings/LayerNorm/beta"])
    hidden = x.shape[-1]
    head = hidden // num_heads
    bias = (1.0 - input_mask[:, None, None, :].astype(np.float64)) * -10000.0
    layers = []
    for n in range(num_layers):
        p = f"bert/encoder/layer_{n}"

        def split(t):  # [B, S, H] -> [B, A, S, d]
            return t.reshape(batch, seq, num_heads, head).transpose(0, 2, 1, 3)

        q = split(_dense(w, f"{p}/attention/self/query", x))
        k = split(_dense(w, f"{p}/attention/self/key", x))
        v = split(_dense(w, f"{p}/attention/self/value", x))
        probs = softmax(q @ k.transpose(0, 1, 3, 2) / np.sqrt(head) + bias)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, hidden)
        attended = layer_norm(x + _dense(w, f"{p}/attention/output/dense", context),
                              w[f"{p}/attention/output/LayerNorm/gamma"],
                              w[f"{p}/attention/output/LayerNorm/beta"])
        inner = gelu(_dense(w, f"{p}/intermediate/dense", attended))
        x = layer_norm(attended + _dense(w, f"{p}/output/dense", inner),
                       w[f"{p}/output/LayerNorm/gamma"], w[f"{p}/output/LayerNorm/beta"])
        layers.append(x)
    pooled = np.tanh(_dense(w, "bert/pooler/dense", x[:, 0]))
    return x, pooled, layers


def pretraining_heads(w, sequence_output, pooled_output, positions):
    """Returns (masked-LM logits [B, P, V], next-sentence logits [B, 2])."""
    w = {k: np.asarray(v, np.float64) for k, v in w.items()}
    gathered = np.take_along_axis(sequence_output, positions[..., None], axis=1)  # [B, P, H]
    h = gelu(_dense(w, "cls/predictions/transform/dense", gathered))
    h = layer_norm(h, w["cls/predictions/transform/LayerNorm/gamma"],
                   w["cls/predictions/transform/LayerNorm/beta"])
    mlm = h @ w["bert/embeddings/word_embeddings"].T + w["cls/predictions/output_bias"]
    nsp = pooled_output @ w["cls/seq_relationship/output_weights"].T + w[
        "cls/seq_relationship/output_bias"]
    return mlm, nsp
