"""A LoRA run folder: its checkpoints hold the adapters, the task head (and what
--lora_train trains) and their optimizer moments alone (`lora.checkpointed`); the
frozen encoder is the base checkpoint that its config.json names ("lora_base": path and
digest, `bert_tf.weights.digest`). Evaluation, prediction, a resumed run, a
`--config` rerun and `bert-export-model` load the base, add the adapters, then restore
the checkpoint:

    base = lora_run.check_base(options.output_dir, saved, options.init_checkpoint)
    model = lora_run.load(model_class, prefix, config_file, settings, saved)

A base whose digest is not the recorded one (changed, or another checkpoint) is refused,
naming both digests and the path.
"""

from typing import Optional

from absl import logging

from bert_tf.train import lora, loop
from bert_tf.weights import checkpoints, digest


def check_base(run: str, saved: dict, path: Optional[str] = None) -> str:
    """The base checkpoint of the LoRA run in `run` (its config `saved`), checked.

    Args:
      run: The run folder or checkpoint (for messages).
      saved: Its config (`run_config.read`).
      path: Where the base lies now (an --init_checkpoint given again, e.g. after the
        base moved); None: where config.json says it lies.

    Returns:
      The base's path, its digest equal to the recorded one.
    Raises:
      ValueError: naming the path and both digests when they differ, or config.json when
        it names no base.
    """
    recorded = saved.get("lora_base") or {}
    if not recorded.get("sha256"):
        raise ValueError(
            f"{saved.get('path', run)} names no base checkpoint (\"lora_base\") of the LoRA "
            f"run in {run}: its checkpoints hold the adapters and head alone, and cannot "
            "be loaded without the base they were trained on")
    path = path or recorded["path"]
    try:
        found = digest.weights_digest(path)["sha256"]
    except FileNotFoundError as error:
        raise ValueError(f"the base checkpoint {path} of the LoRA run in {run} is not "
                         f"there ({error}): pass --init_checkpoint=<where it lies now>"
                         ) from None
    if found != recorded["sha256"]:
        raise ValueError(
            f"the base checkpoint {path} of the LoRA run in {run} has digest {found}, "
            f"the run was trained on digest {recorded['sha256']} ({recorded['path']}; "
            f"{digest.RULE}): the base changed since, and the adapters would load onto "
            "other weights. Pass --init_checkpoint=<the base it was trained on>")
    return path


def load(model_class, prefix, config_file, settings, saved, head_kwargs=None, merge=True):
    """A `model_class` model from the LoRA run checkpoint `prefix`: the base (checked,
    `check_base`) loaded, the adapters and head restored, then, with `merge`, merged
    (`lora.merge_adapters`): an ordinary model. The encoder alone
    (`model_class` BertEncoder) reads the adapters of the run's encoder only.

    Raises:
      ValueError / FileNotFoundError: naming the base, the config or the checkpoint.
    """
    base = check_base(prefix, saved)
    model = checkpoints.build_model(model_class, checkpoints.load_config(config_file),
                                    **(head_kwargs or {}))
    checkpoints.load_pretrained_weights(
        model, base, log_report=False,
        allow_random_encoder=(saved.get("options") or {}).get("allow_random_encoder", False))
    lora.apply_lora(model, settings)
    loop.restore_model(model, prefix)
    if merge:
        lora.merge_adapters(model)
    logging.info("Loaded %s from LoRA run checkpoint %s onto its base %s, adapters %s "
                 "(rank %d, scale %g)", model_class.__name__, prefix, base,
                 "merged" if merge else "kept", settings.rank, settings.scale)
    return model
