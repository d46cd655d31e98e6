"""The reference side of electra_reference_check.py (and of the transformers tests of
tests/test_electra_huggingface.py): Hugging Face transformers' Electra classes
(PyTorch, CPU) on folders that `bert_tf.serving.huggingface` exported.

Run with a Python that has `torch` and `transformers` (an optional bench dependency,
never a package one), e.g. a separate virtual environment:

    python bench/reference_electra.py request.json [result.json]

The request (JSON) asks for any of:

- "models": {name: [transformers auto class, folder]} run on "inputs" (`input_ids`,
  `attention_mask`, `token_type_ids`): the result holds `name/class` (the class
  transformers built) and every tensor output as `name/<key>` (nested lists);
- "pretraining": {"folder": an ElectraForPreTraining export with its generator in
  folder/generator, "batch": create_pretraining_data's features (`input_ids` masked,
  `input_mask`, `segment_ids`, `masked_lm_positions`, `masked_lm_ids`,
  `masked_lm_weights`), "replacements": the sampled ids [B, P], "gen_weight",
  "disc_weight", "learning_rate", "optimizer" ("sgd" or "adam", no weight decay),
  "watch": Hugging Face names to report after the step (the generator's as
  `generator/<name>`)}: the generator (ElectraForMaskedLM, labels = masked_lm_ids at the
  masked positions, -100 elsewhere) and the discriminator (ElectraForPreTraining on the
  ids with the replacements, labels = replaced, attention_mask = input_mask), sharing
  the discriminator's embeddings as ELECTRA trains them; their losses, logits, and the
  watched tensors after one optimizer step on gen_weight * mlm + disc_weight * rtd.

The result is printed as one JSON line, and written to the second argument if given.
"""

import json
import sys

import numpy as np
import torch
import transformers


def run_models(request):
    """{name/class, name/<output>} of each model of the request on its inputs."""
    inputs = {key: torch.tensor(value) for key, value in request["inputs"].items()}
    result = {}
    for name, (auto_class, folder) in request["models"].items():
        model = getattr(transformers, auto_class).from_pretrained(folder).eval()
        result[f"{name}/class"] = type(model).__name__
        with torch.no_grad():
            outputs = model(**inputs)
        for key, value in outputs.items():
            if isinstance(value, torch.Tensor):
                result[f"{name}/{key}"] = value.numpy().tolist()
    return result


def corrupt(batch, replacements):
    """(discriminator input ids, replaced labels, generator MLM labels), as numpy."""
    ids = np.array(batch["input_ids"], np.int64)
    positions = np.array(batch["masked_lm_positions"], np.int64)
    targets = np.array(batch["masked_lm_ids"], np.int64)
    weights = np.array(batch["masked_lm_weights"], np.float32)
    replacements = np.array(replacements, np.int64)
    original, corrupted = ids.copy(), ids.copy()
    labels = np.full_like(ids, -100)
    for row, slot in zip(*np.nonzero(weights > 0)):
        position = positions[row, slot]
        original[row, position] = targets[row, slot]
        corrupted[row, position] = replacements[row, slot]
        labels[row, position] = targets[row, slot]
    return corrupted, (corrupted != original).astype(np.int64), labels


def shared_pair(folder):
    """(discriminator, generator) of an export, the generator's embeddings (and its
    tied decoder) being the discriminator's, as ELECTRA trains them."""
    discriminator = transformers.ElectraForPreTraining.from_pretrained(folder)
    generator = transformers.ElectraForMaskedLM.from_pretrained(f"{folder}/generator")
    generator.electra.embeddings = discriminator.electra.embeddings
    embeddings = discriminator.electra.embeddings
    generator.generator_lm_head.weight = embeddings.word_embeddings.weight
    return discriminator, generator


def run_pretraining(spec):
    """Losses, logits and the watched tensors after one step (see the module docstring)."""
    torch.manual_seed(0)
    discriminator, generator = shared_pair(spec["folder"])
    discriminator.train()
    generator.train()
    batch = spec["batch"]
    corrupted, replaced, mlm_labels = corrupt(batch, spec["replacements"])
    mask = torch.tensor(batch["input_mask"], dtype=torch.long)
    segments = torch.tensor(batch["segment_ids"], dtype=torch.long)
    gen_out = generator(input_ids=torch.tensor(batch["input_ids"], dtype=torch.long),
                        attention_mask=mask, token_type_ids=segments,
                        labels=torch.tensor(mlm_labels))
    disc_out = discriminator(input_ids=torch.tensor(corrupted), attention_mask=mask,
                             token_type_ids=segments, labels=torch.tensor(replaced))
    total = spec["gen_weight"] * gen_out.loss + spec["disc_weight"] * disc_out.loss
    parameters = {id(p): p for model in (discriminator, generator)
                  for p in model.parameters()}  # the shared ones once
    optimizer_class = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam}[spec["optimizer"]]
    optimizer = optimizer_class(list(parameters.values()), lr=spec["learning_rate"])
    optimizer.zero_grad()
    total.backward()
    optimizer.step()
    states = {"": discriminator.state_dict(), "generator/": generator.state_dict()}
    after = {}
    for name in spec["watch"]:
        prefix = "generator/" if name.startswith("generator/") else ""
        after[name] = states[prefix][name[len(prefix):]].detach().numpy().tolist()
    positions = torch.tensor(batch["masked_lm_positions"], dtype=torch.long)
    masked_logits = torch.take_along_dim(gen_out.logits, positions[..., None], 1)
    return {"masked_lm_loss": float(gen_out.loss),
            "discriminator_loss": float(disc_out.loss), "total_loss": float(total), "replaced": replaced.tolist(),
            "masked_lm_logits": masked_logits.detach().numpy().tolist(),
            "discriminator_logits": disc_out.logits.detach().numpy().tolist(),
            "after": after, "transformers": transformers.__version__,
            "torch": torch.__version__}


def main(argv):
    if len(argv) not in (2, 3):
        raise SystemExit(f"usage: {argv[0]} request.json [result.json]")
    with open(argv[1], encoding="utf-8") as file:
        request = json.load(file)
    result = {}
    if request.get("models"):
        result.update(run_models(request))
    if request.get("pretraining"):
        result["pretraining"] = run_pretraining(request["pretraining"])
    text = json.dumps(result)
    if len(argv) == 3:
        with open(argv[2], "w", encoding="utf-8") as file:
            file.write(text)
    else:
        print(text)


if __name__ == "__main__":
    main(sys.argv)
