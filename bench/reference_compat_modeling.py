"""The reference side of compat_modeling_check.py: Hugging Face transformers' `BertModel`
(PyTorch, CPU, float32, eval mode) on the transformers folder of the same checkpoint.

    /tmp/refhf/bin/python bench/reference_compat_modeling.py --work_dir=...

Reads `--work_dir/hf` (a transformers folder) and `--work_dir/inputs.npz` (`input_ids`,
`input_mask`, `segment_ids` [B, S]); writes `--work_dir/reference.npz`: the embedding
output, every layer's output, the last layer's and the pooled output.
"""

import argparse
import os

import numpy as np
import torch
import transformers


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work_dir", required=True)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    model = transformers.BertModel.from_pretrained(os.path.join(args.work_dir, "hf"),
                                                   attn_implementation="eager").eval()
    inputs = np.load(os.path.join(args.work_dir, "inputs.npz"))
    with torch.no_grad():
        out = model(input_ids=torch.from_numpy(inputs["input_ids"]).long(),
                    attention_mask=torch.from_numpy(inputs["input_mask"]).long(),
                    token_type_ids=torch.from_numpy(inputs["segment_ids"]).long(),
                    output_hidden_states=True)
    hidden = [h.numpy() for h in out.hidden_states]  # embeddings, then each layer
    np.savez(os.path.join(args.work_dir, "reference.npz"), embedding_output=hidden[0],
             all_layers=np.stack(hidden[1:]), sequence_output=out.last_hidden_state.numpy(),
             pooled_output=out.pooler_output.numpy())


if __name__ == "__main__":
    main()
