"""The options of ELECTRA pre-training (bert-train --task=electra), without TensorFlow:
a command's `--help` reads them alone; the task (`bert_tf.tasks.electra.task`) loads when
it runs.
"""

import dataclasses
import math
from typing import Optional

from bert_tf.options import OptionGroup, compose, option
from bert_tf.tasks.pretraining.options import PretrainingOptions

# Where the generator goes in output_dir, and the whole model in electra's names.
GENERATOR_DIR = "generator"
ELECTRA_CHECKPOINT = "electra_model.ckpt"


@dataclasses.dataclass(kw_only=True)
class ElectraObjective(OptionGroup):
    """The generator and the losses (google-research/electra's hparam names)."""
    generator_hidden_size: Optional[float] = option(
        None, "The generator's width as a fraction of the discriminator's hidden_size "
        "(heads of 64, intermediate 4x). Default: the paper's, 1/3 for a discriminator of "
        "hidden 768 (Base), else 1/4 (Small, Large).")
    generator_layers: float = option(
        1.0, "The generator's layers as a fraction of the discriminator's.")
    generator_config_file: Optional[str] = option(
        None, "bert_config.json of the generator, instead of --generator_hidden_size and "
        "--generator_layers; its vocab, positions, segments and embedding width must be "
        "the discriminator's (the embeddings are shared).")
    disc_weight: float = option(
        50.0, "Weight of the replaced-token-detection loss (the paper's lambda).")
    gen_weight: float = option(1.0, "Weight of the generator's masked-LM loss.")
    temperature: float = option(
        1.0, "Temperature of the generator's distribution the replacements are sampled "
        "from (1: as it is).")

    def check(self) -> None:
        for name in ("generator_hidden_size", "generator_layers"):
            value = getattr(self, name)
            if value is not None and not (is_number(value) and 0 < value <= 1):
                raise ValueError(f"--{name}={value}: expected a fraction of the "
                                 "discriminator's size in (0, 1]; a generator larger than "
                                 "the discriminator makes replacements it cannot learn to "
                                 "detect")
        for name in ("disc_weight", "gen_weight"):
            if not (is_number(getattr(self, name)) and getattr(self, name) >= 0):
                raise ValueError(f"--{name}={getattr(self, name)}: expected a number >= 0")
        if not (is_number(self.temperature) and self.temperature > 0):
            raise ValueError(f"--temperature={self.temperature}: expected a number > 0")
        if self.generator_config_file and self.generator_hidden_size is not None:
            raise ValueError("--generator_config_file and --generator_hidden_size both size "
                             "the generator: give one")


def is_number(value) -> bool:
    """A finite int or float (not a bool)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def check_no_next_sentence(options) -> None:
    """ELECTRA has no next-sentence task."""
    if options.next_sentence:
        raise ValueError("--next_sentence: ELECTRA has no next-sentence task; drop the flag "
                         "(records with next_sentence_labels are read all the same)")


ElectraOptions = compose(
    "ElectraOptions", PretrainingOptions, ElectraObjective,
    defaults={"next_sentence": False},
    helps={"next_sentence": "Must stay false: ELECTRA has no next-sentence task."},
    checks=(check_no_next_sentence,),
    doc="Everything ELECTRA pre-training needs: bert-run-pretraining's options and "
        "the objective's.")
