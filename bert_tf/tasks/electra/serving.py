"""The ELECTRA model type (`ElectraPretrainer`): how exports see an ELECTRA run.

The discriminator alone is a BERT encoder: `bert-export-model --model_type=encoder`
(every format) and every fine-tuning runner take the run folder's `bert_model.ckpt`.
"""

from bert_tf.serving import registry
from bert_tf.serving.registry import ModelType
from bert_tf.tasks.electra.model import ElectraPretrainer

_USE_ENCODER = ("an ELECTRA run's discriminator is a BERT encoder: export it with "
                "--model_type=encoder (or fine-tune it first)")

registry.register(ModelType(
    name="electra", model_class=ElectraPretrainer, formats=(),
    refused={name: _USE_ENCODER for name in registry.FORMATS},
    outputs=("masked_lm_logits", "discriminator_logits")))
