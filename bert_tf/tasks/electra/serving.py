"""The ELECTRA model type (`ElectraPretrainer`): how exports see an ELECTRA run.

    bert-export-model --init_checkpoint=<ELECTRA output_dir> --export_dir=X \\
        --export_format=huggingface

writes X as transformers' `ElectraForPreTraining` (the discriminator and its head) and
X/generator as its `ElectraForMaskedLM` (`bert_tf.serving.huggingface`). The model
loads itself (`load_electra`): from a run's output_dir (its latest or best training
checkpoint; the generator's config from output_dir/generator/bert_config.json), from
its `electra_model.ckpt` (google-research/electra's names), or from such a Hugging
Face folder pair. The other formats serve the discriminator alone, a BERT encoder:
`bert-export-model --model_type=encoder` (every format) and every fine-tuning runner
take the run folder's `bert_model.ckpt`.
"""

import os

from bert_tf.io import fileio
from bert_tf.models import BertEncoder
from bert_tf.serving import formats, registry
from bert_tf.serving.registry import ModelType
from bert_tf.tasks.electra.model import ElectraPretrainer
from bert_tf.tasks.electra.options import GENERATOR_DIR
from bert_tf.train import warm_start
from bert_tf.weights import checkpoints
from bert_tf.weights.load_report import name_list

_USE_ENCODER = ("an ELECTRA run's discriminator is a BERT encoder: export it with "
                "--model_type=encoder (or fine-tune it first)")
# The config files of a generator folder: a run's, a Hugging Face export's.
_CONFIG_FILES = ("bert_config.json", "config.json")


def generator_config_file(init_checkpoint):
    """The generator's config of the ELECTRA model at `init_checkpoint`: in the
    `generator/` folder of its run (or Hugging Face export).

    Raises:
      FileNotFoundError: naming the folder looked in.
    """
    folder = os.path.join(fileio.run_folder_of(init_checkpoint), GENERATOR_DIR)
    for name in _CONFIG_FILES:
        path = fileio.file_in_folder(folder, name)
        if path:
            return path
    raise FileNotFoundError(
        f"{init_checkpoint}: no {' or '.join(_CONFIG_FILES)} in {folder}; an ELECTRA "
        "model is an ELECTRA run's output_dir (its generator in generator/) or a Hugging "
        "Face export of one (ElectraForPreTraining, its ElectraForMaskedLM in generator/)")


def load_electra(init_checkpoint, config):
    """The `ElectraPretrainer` of `init_checkpoint`, every weight loaded.

    Args:
      init_checkpoint: An ELECTRA run's output_dir or checkpoint prefix, its
        `electra_model.ckpt`, or a Hugging Face ElectraForPreTraining folder with its
        generator in `generator/` (see `bert_tf.train.warm_start.start_from`).
      config: The discriminator's `BertConfig`.

    Raises:
      FileNotFoundError: without the generator's config.
      ValueError: when the generator or the discriminator's head is not in it (a BERT
        or a fine-tuned checkpoint), naming what would start random.
    """
    generator = checkpoints.load_config(generator_config_file(init_checkpoint))
    model = ElectraPretrainer(BertEncoder(config), generator)
    model.build()
    report = warm_start.start_from(model, None, init_checkpoint)
    fresh = [name for name in report.newly_initialized if "/pooler/" not in name]
    if fresh:
        raise ValueError(f"{init_checkpoint} holds no whole ELECTRA model "
                         f"({name_list(fresh)} would start random): --model_type=electra "
                         "exports an ELECTRA run's generator and discriminator; pass "
                         "--model_type=encoder for its discriminator alone")
    return model


registry.register(ModelType(
    name="electra", model_class=ElectraPretrainer, formats=("huggingface",),
    refused={name: _USE_ENCODER for name in formats.names() if name != "huggingface"},
    outputs=("masked_lm_logits", "discriminator_logits"),
    hf_architecture="ElectraForPreTraining", load=load_electra))
