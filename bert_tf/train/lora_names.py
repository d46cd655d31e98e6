"""The names of LoRA's options and their parsing, without TensorFlow: the command
line's `--help` and the options' checks (`bert_tf.runs.options.Lora`) read them;
`bert_tf.train.lora` builds the adapters.
"""

# --lora_targets: the projections of a layer (google-research names in the help).
TARGETS = ("query", "key", "value", "attention_output", "intermediate", "output")
DEFAULT_TARGETS = ("query", "value")  # as PEFT and keras-hub
TRAIN_PARTS = ("layer_norm", "bias")  # --lora_train: what else of the encoder trains
FLAGS = ("lora_rank", "lora_alpha", "lora_dropout", "lora_targets", "lora_train")



def parse_targets(value) -> tuple:
    """--lora_targets (a list, or a comma-separated string) as a tuple of TARGETS.

    Raises:
      ValueError: naming the flag, for an unknown or repeated name or an empty list.
    """
    names = value.split(",") if isinstance(value, str) else list(value or ())
    names = [name.strip() for name in names if name.strip()]
    unknown = [name for name in names if name not in TARGETS]
    if unknown or not names or len(set(names)) != len(names):
        raise ValueError(f"--lora_targets={','.join(names)}: expected a comma-separated "
                         f"list of distinct names out of {', '.join(TARGETS)}"
                         + (f"; unknown: {', '.join(unknown)}" if unknown else ""))
    return tuple(names)


def parse_train(value) -> tuple:
    """--lora_train ("none", "layer_norm", "bias" or "layer_norm,bias") as a tuple of
    TRAIN_PARTS (empty for none).

    Raises:
      ValueError: naming the flag, for any other value.
    """
    names = value.split(",") if isinstance(value, str) else list(value or ())
    names = [name.strip() for name in names if name.strip()]
    if names == ["none"]:
        return ()
    if not names or any(name not in TRAIN_PARTS for name in names) or \
            len(set(names)) != len(names):
        raise ValueError(f"--lora_train={value}: expected none, layer_norm, bias or "
                         "layer_norm,bias (what of the encoder trains besides the adapters)")
    return tuple(name for name in TRAIN_PARTS if name in names)
