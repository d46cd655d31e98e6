"""The built-in model types, each registered once (`bert_tf.serving.registry`).

A registry's first lookup runs this module (`bert_tf.serving.formats.load_built_ins`);
the names it registers are declared in `bert_tf.serving.catalog`. The google-research
and Hugging Face names of each head are its model class's (`google_head_entries`,
`hf_head_names`); the pre-training model loads itself (`ModelType.load`: the heads its
checkpoint holds).
"""

from bert_tf.models import (BertClassifier, BertEncoder, BertPretrainer,
                            BertSpanLabeler, BertTokenClassifier)
# The writers of the built-in formats register them before any model type names them.
from bert_tf.serving import (export, huggingface, keras_hub, litert,  # noqa: F401
                             onnx_export, peft, registry, tfhub)
from bert_tf.serving.registry import ModelType
from bert_tf.train import warm_start
from bert_tf.weights import checkpoints
from bert_tf.weights.load_report import name_list


def _pretrainer_with_heads(config, init_checkpoint, next_sentence):
    """(BertPretrainer loaded from `init_checkpoint`, its head weights left random)."""
    model = checkpoints.build_model(BertPretrainer, config, next_sentence=next_sentence)
    report = warm_start.start_from(model, None, init_checkpoint)
    return model, [name for name in report.newly_initialized if name.startswith("cls/")]


def _load_pretrainer(init_checkpoint, config):
    """The pre-training model of `init_checkpoint` (a pre-training run, a released or
    Hugging Face folder) with the heads it holds: without a next-sentence head when it
    has none (a --next_sentence=false run, a masked-LM checkpoint).

    Args:
      init_checkpoint: See `bert_tf.train.warm_start.start_from`.
      config: The `BertConfig` of its encoder.

    Raises:
      ValueError: when it holds no masked-LM head (a fine-tuned model), naming it.
    """
    model, fresh = _pretrainer_with_heads(config, init_checkpoint, next_sentence=True)
    if fresh and all(name.startswith("cls/seq_relationship/") for name in fresh):
        model, fresh = _pretrainer_with_heads(config, init_checkpoint, next_sentence=False)
    if fresh:
        raise ValueError(f"{init_checkpoint} holds no masked-LM head ({name_list(fresh)} "
                         "would start random): --model_type=pretrainer exports a "
                         "pre-trained model's heads; pass --model_type=encoder for its "
                         "encoder")
    return model


def _pretraining_architecture(model):
    """transformers' class of a BertPretrainer: BertForMaskedLM without its
    next-sentence head."""
    return "BertForPreTraining" if model.next_sentence is not None else "BertForMaskedLM"


registry.register(ModelType(
    name="encoder", model_class=BertEncoder,
    formats=("saved_model", "huggingface", "keras_hub", "tfhub", "litert"),
    saved_model=export.export_encoder, outputs=("pooled_output", "sequence_output"),
    sequence_outputs=("sequence_output",),
    hf_architecture="BertModel", litert_layout="[CLS] text_a [SEP] (text_b [SEP])"))

registry.register(ModelType(
    name="pretrainer", model_class=BertPretrainer, formats=("huggingface",),
    refused={
        "saved_model": "--model_type=pretrainer exports with --export_format=huggingface "
                       "(BertForPreTraining); a SavedModel serves the encoder and the "
                       "fine-tuned heads",
        "peft": "LoRA adapters are a fine-tuning run's (--lora_rank); a pre-training run "
                "has none",
        "keras_hub": "keras-hub's BertMaskedLM has no next-sentence head and normalises "
                     "its masked-LM head with LayerNorm epsilon 1e-5 (this one 1e-12); "
                     "export the encoder (model_type=encoder) and start a keras-hub "
                     "BertMaskedLM from its BertBackbone"},
    outputs=("masked_lm_logits", "next_sentence_logits"),
    hf_architecture=_pretraining_architecture, load=_load_pretrainer))

registry.register(ModelType(
    name="classifier", model_class=BertClassifier,
    formats=("saved_model", "huggingface", "keras_hub", "litert"),
    saved_model=export.export_classifier,
    signature_options=("is_regression", "doc_stride", "window_pooling"),
    labelled=True, hf_architecture="BertForSequenceClassification", hf_problem_type=True,
    litert_layout="[CLS] text_a [SEP] (text_b [SEP] with text_pair), segment_ids 0 on "
                  "text_a and its [SEP], 1 on text_b and its [SEP]"))

registry.register(ModelType(
    name="token_classifier", model_class=BertTokenClassifier, aliases=("ner",),
    formats=("saved_model", "huggingface", "litert"),
    refused={"keras_hub": "keras-hub has no BERT token-classification task"},
    saved_model=export.export_token_classifier, labelled=True, sequence_outputs=("logits",),
    hf_architecture="BertForTokenClassification",
    litert_layout="[CLS] the words' pieces [SEP]; a word's tag is read at its first piece"))

registry.register(ModelType(
    name="span_labeler", model_class=BertSpanLabeler, aliases=("squad",),
    formats=("saved_model", "huggingface", "litert"),
    refused={"keras_hub": "keras-hub has no BERT question-answering task"},
    saved_model=export.export_span_labeler,
    signature_options=("max_query_length", "max_answer_length"),
    outputs=("start_logits", "end_logits"), sequence_outputs=("start_logits", "end_logits"),
    hf_architecture="BertForQuestionAnswering",
    litert_layout="[CLS] question [SEP] context [SEP] (question cut to max_query_length "
                  "pieces), segment_ids 1 on the context; an answer is the best start <= "
                  "end span of context positions"))
