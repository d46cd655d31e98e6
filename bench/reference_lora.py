"""The reference side of lora_reference_check.py: Hugging Face PEFT (PyTorch, CPU,
float32) on the same weights and inputs.

    /tmp/refenv/bin/python bench/reference_lora.py --work_dir=...

(a) `--work_dir/layer.npz` (x, g, W [out, in], b, A [r, in], B [out, r], r, alpha, lr,
weight_decay, epsilon, clipnorm): PEFT's `LoraLayer` (a `peft.tuners.lora.Linear`
around `torch.nn.Linear`) computes y = layer(x); the loss sum(y * g) is backpropagated,
its gradients clipped to a global norm (`torch.nn.utils.clip_grad_norm_`) and one
`torch.optim.AdamW` step taken on lora_A and lora_B: writes `layer_reference.npz`
(y, the gradients, A and B after the step).
(b) `--work_dir/base` (a transformers BertModel folder), `--work_dir/adapter` (a PEFT
folder) and `--work_dir/inputs.npz`: `AutoModelForSequenceClassification` of the base
with `PeftModel.from_pretrained` of the adapter: writes `model_reference.npz` (logits).
"""

import argparse
import os

import numpy as np
import peft
import torch
import transformers


class _One(torch.nn.Module):
    """A module holding one Linear, for PEFT to adapt."""

    def __init__(self, width_in, width_out):
        super().__init__()
        self.proj = torch.nn.Linear(width_in, width_out)

    def forward(self, x):
        return self.proj(x)


def layer_step(work_dir):
    """(a): the LoRA layer's output and one optimizer step."""
    data = dict(np.load(os.path.join(work_dir, "layer.npz")))
    rank, width_out, width_in = int(data["r"]), *data["W"].shape
    model = peft.get_peft_model(_One(width_in, width_out), peft.LoraConfig(
        r=rank, lora_alpha=float(data["alpha"]), lora_dropout=0.0, target_modules=["proj"]))
    layer = model.base_model.model.proj
    assert isinstance(layer, peft.tuners.lora.LoraLayer), type(layer)
    with torch.no_grad():
        layer.base_layer.weight.copy_(torch.from_numpy(data["W"]))
        layer.base_layer.bias.copy_(torch.from_numpy(data["b"]))
        layer.lora_A["default"].weight.copy_(torch.from_numpy(data["A"]))
        layer.lora_B["default"].weight.copy_(torch.from_numpy(data["B"]))
    params = [layer.lora_A["default"].weight, layer.lora_B["default"].weight]
    assert [p for p in model.parameters() if p.requires_grad] == params
    optimizer = torch.optim.AdamW(params, lr=float(data["lr"]), betas=(0.9, 0.999),
                                  eps=float(data["epsilon"]),
                                  weight_decay=float(data["weight_decay"]))
    y = model(torch.from_numpy(data["x"]))
    (y * torch.from_numpy(data["g"])).sum().backward()
    grads = [p.grad.detach().clone().numpy() for p in params]
    torch.nn.utils.clip_grad_norm_(params, float(data["clipnorm"]))
    optimizer.step()
    np.savez(os.path.join(work_dir, "layer_reference.npz"), y=y.detach().numpy(),
             grad_A=grads[0], grad_B=grads[1], A=params[0].detach().numpy(),
             B=params[1].detach().numpy())


def model_logits(work_dir):
    """(b): PEFT's adapter folder on the transformers export of the base."""
    inputs = np.load(os.path.join(work_dir, "inputs.npz"))
    base = transformers.AutoModelForSequenceClassification.from_pretrained(
        os.path.join(work_dir, "base"), num_labels=int(inputs["num_labels"]),
        attn_implementation="eager")
    model = peft.PeftModel.from_pretrained(base, os.path.join(work_dir, "adapter")).eval()
    with torch.no_grad():
        logits = model(input_ids=torch.from_numpy(inputs["input_ids"]).long(),
                       attention_mask=torch.from_numpy(inputs["input_mask"]).long(),
                       token_type_ids=torch.from_numpy(inputs["segment_ids"]).long()).logits
    np.savez(os.path.join(work_dir, "model_reference.npz"), logits=logits.numpy(),
             peft_version=np.array(peft.__version__),
             torch_version=np.array(torch.__version__))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work_dir", required=True)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    layer_step(args.work_dir)
    model_logits(args.work_dir)


if __name__ == "__main__":
    main()
