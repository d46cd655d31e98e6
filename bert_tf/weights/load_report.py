"""What a weights load did, and the rule that an encoder must load whole.

Every loader (google-research, Hugging Face, a bert_tf training checkpoint) returns a
`LoadReport`. `check_encoder` is the one rule every tool applies to it: an encoder
whose weights did not come from the checkpoint, or a checkpoint whose encoder tensors
found no place in the model, is refused unless the caller allows a random encoder.
"""

import dataclasses
import re

from absl import logging

# Names shown in a message before "and N more": a list of 200 names helps nobody.
_NAMES_SHOWN = 5
# Hugging Face names of encoder weights (any model prefix: bert., roberta., ...);
# task heads (classifier., qa_outputs., cls.) may be dropped.
_HF_ENCODER_NAME = re.compile(r"(^|\.)(embeddings|encoder|pooler)\.")


def name_list(names, shown=_NAMES_SHOWN):
    """`a, b, c and 7 more`: the first `shown` names and a count of the rest."""
    names = list(names)
    text = ", ".join(names[:shown])
    return text + (f" and {len(names) - shown} more" if len(names) > shown else "")


@dataclasses.dataclass
class LoadReport:
    """What a load did. Every model variable is in `loaded` or `newly_initialized`.

    Attributes:
        source: The checkpoint path.
        loaded: google-research names assigned from the checkpoint.
        newly_initialized: google-research names of model variables not in the
            checkpoint (they keep their fresh initial values).
        unmatched: checkpoint names that match no model variable.
        skipped: checkpoint names deliberately ignored (optimizer slots, step counters).
    """

    source: str
    loaded: list = dataclasses.field(default_factory=list)
    newly_initialized: list = dataclasses.field(default_factory=list)
    unmatched: list = dataclasses.field(default_factory=list)
    skipped: list = dataclasses.field(default_factory=list)

    def summary(self):
        lines = [f"{self.source}: loaded {len(self.loaded)} variables, "
                 f"{len(self.newly_initialized)} newly initialised, "
                 f"{len(self.unmatched)} checkpoint variables unmatched, "
                 f"{len(self.skipped)} skipped (optimizer state)."]
        if self.newly_initialized:
            lines.append("  newly initialised: " + name_list(self.newly_initialized, 20))
        if self.unmatched:
            lines.append("  unmatched in checkpoint: " + name_list(self.unmatched, 20))
        return "\n".join(lines)

    __str__ = summary

    def fresh_encoder(self):
        """Encoder variables (`bert/...`) left at their initial values, pooler aside."""
        return [name for name in self.newly_initialized
                if name.startswith("bert/") and not name.startswith("bert/pooler/")]

    def dropped_encoder(self):
        """Checkpoint tensors that look like encoder weights but fit no model variable
        (more layers than the config says, or another model's names)."""
        return [name for name in self.unmatched
                if name.startswith("bert/") or _HF_ENCODER_NAME.search(name)]


def check_encoder(report, allow_random_encoder=False):
    """Refuses a load whose encoder is partly or wholly random, or that dropped tensors.

    A missing pooler is only logged (Hugging Face masked-LM checkpoints have none).

    Args:
        report: The LoadReport of the load.
        allow_random_encoder: Log the problem instead of raising.

    Raises:
        ValueError: naming the checkpoint, the counts and a few names of each side.
    """
    fresh, dropped = report.fresh_encoder(), report.dropped_encoder()
    pooler = [name for name in report.newly_initialized if name.startswith("bert/pooler/")]
    if pooler and not fresh:
        logging.warning("%s has no pooler weights; %s start random (as Hugging Face's "
                        "masked-LM checkpoints)", report.source, name_list(pooler))
    if not fresh and not dropped:
        return
    problems = []
    if fresh:
        total = len([n for n in report.loaded + report.newly_initialized
                     if n.startswith("bert/")])
        problems.append(f"{len(fresh)} of the model's {total} encoder variables are not in "
                        f"it and would start random ({name_list(fresh)})")
    if dropped:
        problems.append(f"{len(dropped)} of its tensors fit no variable of the model and "
                        f"would be dropped ({name_list(dropped)})")
    message = (f"{report.source} is not a checkpoint of this BERT: " + "; ".join(problems)
               + ". Pass a BERT checkpoint of this config (bert_config.json / config.json "
               "num_hidden_layers, hidden_size), or allow_random_encoder "
               "(--allow_random_encoder) to use these weights anyway")
    if not allow_random_encoder:
        raise ValueError(message)
    logging.warning("%s (allowed by allow_random_encoder)", message)
