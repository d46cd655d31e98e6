"""The distillation losses as their reference implementations compute them, in PyTorch,
on the fixed tensors of `distillation_loss_check.py` (run by it with --reference_python).

    /tmp/refenv/bin/python bench/reference_distillation_losses.py tensors.npz

Prints one JSON object {loss name: value}. The formulas are copied from:

- transformers' examples/research_projects/distillation/distiller.py (DistilBERT):
  `nn.KLDivLoss(reduction="batchmean")(log_softmax(s / T), softmax(t / T)) * T**2`, and
  `nn.CosineEmbeddingLoss(reduction="mean")` with target 1 on the real tokens' hidden
  states of the last layer;
- TinyBERT (huawei-noah/Pretrained-Language-Model, task_distill.py): `MSELoss()` of the
  attention scores with the masked ones (<= -1e2) set to 0, and of the hidden states;
- MiniLM (Wang et al., 2020): KL of the last layer's attention distributions and of the
  value relation softmax(V V^T / sqrt(d)), `F.kl_div(..., reduction="sum")` over the
  batch, heads and queries, divided by their number.

This script imports torch and numpy only (no bert_tf).
"""

import json
import math
import sys

import numpy as np
import torch
from torch import nn
from torch.nn import functional


def main(path):
    arrays = {name: torch.tensor(value, dtype=torch.float64)
              for name, value in np.load(path).items()}
    temperature = float(arrays["temperature"])
    s_logits, t_logits = arrays["student_logits"], arrays["teacher_logits"]
    soft = nn.KLDivLoss(reduction="batchmean")(
        functional.log_softmax(s_logits / temperature, dim=-1),
        functional.softmax(t_logits / temperature, dim=-1)) * temperature ** 2
    s_hidden, t_hidden = arrays["student_hidden"], arrays["teacher_hidden"]
    mask = arrays["mask"].bool()  # [B, S]
    dim = s_hidden.size(-1)
    s_real = torch.masked_select(s_hidden, mask.unsqueeze(-1).expand_as(s_hidden)).view(-1, dim)
    t_real = torch.masked_select(t_hidden, mask.unsqueeze(-1).expand_as(t_hidden)).view(-1, dim)
    target = s_real.new(s_real.size(0)).fill_(1)
    cosine = nn.CosineEmbeddingLoss(reduction="mean")(s_real, t_real, target)
    hidden_mse = nn.MSELoss()(s_hidden, t_hidden)
    s_att, t_att = arrays["student_scores"], arrays["teacher_scores"]
    s_zeroed = torch.where(s_att <= -1e2, torch.zeros_like(s_att), s_att)
    t_zeroed = torch.where(t_att <= -1e2, torch.zeros_like(t_att), t_att)
    attention_mse = nn.MSELoss()(s_zeroed, t_zeroed)
    batch, heads, length, _ = s_att.shape
    rows = batch * heads * length

    def relation_kl(student, teacher):
        return functional.kl_div(functional.log_softmax(student, dim=-1),
                                 functional.softmax(teacher, dim=-1),
                                 reduction="sum") / rows

    bias = (1.0 - arrays["mask"])[:, None, None, :] * -10000.0

    def value_relation(values):
        return values @ values.transpose(-1, -2) / math.sqrt(values.size(-1)) + bias

    minilm_attention = relation_kl(s_att, t_att)
    minilm_values = relation_kl(value_relation(arrays["student_values"]),
                                value_relation(arrays["teacher_values"]))
    print(json.dumps({"soft_target": soft.item(), "hidden_cosine": cosine.item(),
                      "hidden_mse": hidden_mse.item(), "attention_mse": attention_mse.item(),
                      "minilm_attention_kl": minilm_attention.item(),
                      "minilm_value_kl": minilm_values.item()}))


if __name__ == "__main__":
    main(sys.argv[1])
