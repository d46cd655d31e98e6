"""ELECTRA pre-training: `bert-train --task=electra`, on the records of
create_pretraining_data, with every option of `bert-run-pretraining` (strategies, mixed
precision, XLA, accumulation, packing, dynamic and whole-word masking, resume, two
phases) and the objective's own (`ElectraObjective`).

`output_dir` receives, besides the training checkpoints (`ckpt-N`, the whole model) and
TensorBoard summaries:

- `bert_model.ckpt.*` + `bert_config.json` + `vocab.txt`: the discriminator, a BERT
  encoder in google-research names: `--init_checkpoint` of every runner and
  `bert-export-model`;
- `generator/`: the generator the same way, with its masked-LM head (`cls/predictions`);
- `electra_model.ckpt.*`: the whole model in google-research/electra's names
  (`electra/...`, `generator/...`, `generator_predictions/...`,
  `discriminator_predictions/...`), what that release's scripts read.
"""

import dataclasses
import os

import tensorflow as tf

from bert_tf.configs import BertConfig
from bert_tf.models import BertEncoder
from bert_tf.tasks.electra.model import (ElectraPretrainer, electra_losses,
                                         electra_metrics, generator_config,
                                         check_generator_config)
from bert_tf.tasks.electra import serving  # noqa: F401  (registers the model type)
from bert_tf.tasks.electra.options import ELECTRA_CHECKPOINT, GENERATOR_DIR
from bert_tf.tasks.pretraining.task import PretrainingTask, dataset_fn_for
from bert_tf.train import distribute, loop, step_hook
from bert_tf.weights import checkpoints


def resolve_generator_config(options, config) -> BertConfig:
    """The generator's config: --generator_config_file, else the fractions of `config`.

    Raises:
      ValueError: naming the setting, for a generator that cannot share the embeddings
        or is larger than the discriminator.
    """
    if options.generator_config_file:
        generator = BertConfig.from_json_file(options.generator_config_file)
        if generator.embedding_size is None and config.embedding_width != generator.hidden_size:
            generator = dataclasses.replace(generator, embedding_size=config.embedding_width)
        try:
            check_generator_config(generator, config)
        except ValueError as error:
            raise ValueError(f"--generator_config_file={options.generator_config_file}: "
                             f"{error}") from None
        return generator
    return generator_config(config, options.generator_hidden_size, options.generator_layers)


class ElectraTask(PretrainingTask):
    """ELECTRA: generator masked LM + `disc_weight` x replaced-token detection."""
    name = "electra"
    command = "electra"
    model_type = "electra"
    output_patterns = PretrainingTask.output_patterns + (f"{ELECTRA_CHECKPOINT}*",)

    def setup(self, context):
        super().setup(context)
        self.generator_config = resolve_generator_config(self.options, context.config)

    def build_model(self):
        return ElectraPretrainer(BertEncoder(self.context.config), self.generator_config,
                                 temperature=self.options.temperature)

    def loss(self, features, outputs):
        losses = electra_losses(features, outputs, self.options.disc_weight,
                                self.options.gen_weight)
        for name, (values, weights) in electra_metrics(features, outputs).items():
            if name not in losses:  # the batch's rates, for the progress log
                losses[name] = tf.reduce_sum(values * weights) / tf.maximum(
                    tf.reduce_sum(weights), 1e-5)
        return losses

    def hooks(self):
        if not distribute.is_chief(self.context.strategy):
            return []
        return [ElectraFoldersAtEnd(self.options.output_dir, self.context.vocab)]

    def evaluate(self, split, runner):
        dataset_fn = dataset_fn_for(self.options, False, self.mask_options)
        model = runner.ensure_model(dataset_fn)
        # A method, equal at every evaluation: the model's eval step is made once.
        results = loop.evaluate(self.context.strategy, model, dataset_fn,
                                self._eval_metrics, num_steps=self.options.max_eval_steps)
        results.pop("eval_steps")
        return results

    def _eval_metrics(self, features, outputs):
        return dict(electra_metrics(features, outputs), loss=electra_losses(
            features, outputs, self.options.disc_weight,
            self.options.gen_weight)["total_loss"])


class ElectraFoldersAtEnd(step_hook.StepHook):
    """Writes the discriminator and the generator as BERT folders, and the whole model in
    google-research/electra's names (see the module docstring)."""

    def __init__(self, output_dir: str, vocab):
        """`vocab`: the run's `VocabFile` (read once), or None."""
        self.output_dir = output_dir
        self.vocab = vocab

    def end(self, model) -> None:
        out = self.output_dir
        checkpoints.save_google_checkpoint(model.encoder, os.path.join(
            out, "bert_model.ckpt"), write_config=True)
        generator_dir = os.path.join(out, GENERATOR_DIR)
        checkpoints.save_google_checkpoint(model.generator, os.path.join(
            generator_dir, "bert_model.ckpt"), write_config=True)
        if self.vocab is not None:  # as the run's own folder gets it (run_context)
            self.vocab.write(os.path.join(generator_dir, "vocab.txt"))
        checkpoints.save_google_checkpoint(model, os.path.join(out, ELECTRA_CHECKPOINT),
                                           encoder_scope=checkpoints.ELECTRA_SCOPE)
