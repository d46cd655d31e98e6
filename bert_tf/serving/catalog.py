"""The model types and export formats that bert-export-model offers, by name, declared
without TensorFlow: its `--help` lists them with no model built and no writer loaded.

    catalog.MODEL_TYPES                # --model_type's names and aliases
    catalog.EXPORT_FORMATS["onnx"]     # what --export_format=onnx writes
    catalog.format_help()              # --export_format's help

The code of each stays where it was, and registers against these names: a model type's
record (`bert_tf.serving.registry.register(ModelType(name=...))`, in
`bert_tf.serving.model_types` and in the task folders) and a format's writer
(`bert_tf.serving.formats.register(ExportFormat(name, catalog.EXPORT_FORMATS[name],
...))`); tests/test_export_registry.py checks that what registers is what is declared
here. A project's own model type or format registers without being declared: it is
exported by its name all the same, and --help does not list it.
"""

# Every --model_type of the package, in registration order, then the aliases.
MODEL_TYPES = ("encoder", "pretrainer", "classifier", "token_classifier", "span_labeler",
               "electra", "multiple_choice", "sentence_encoder", "ner", "squad")

# Every --export_format of the package, in registration order, with what it writes.
EXPORT_FORMATS = {
    "saved_model": "a SavedModel for TF Serving (raw-text, token-id and tf.Example "
                   "signatures)",
    "huggingface": "a transformers folder (config.json, model.safetensors, vocab.txt, "
                   "tokenizer config; also model_type=pretrainer, the masked-LM and "
                   "next-sentence heads)",
    "keras_hub": "a keras-hub preset of an encoder or classifier (needs the keras-hub "
                 "extra)",
    "litert": "a .tflite of a classifier, token classifier, span labeler or encoder "
              "taking int32 token ids [1, max_seq_length], with vocab.txt and "
              "litert_config.json for the app's tokenizer",
    "onnx": "an ONNX model of the ids signature (int32 token ids [batch, sequence] in, "
            "any batch and length; needs the onnx extra) with vocab.txt and "
            "onnx_config.json",
    "peft": "the adapters of a LoRA run (--lora_rank) and its task head as a Hugging Face "
            "PEFT folder (adapter_config.json, adapter_model.safetensors) that "
            "PeftModel.from_pretrained loads onto the transformers model of the run's "
            "base (the huggingface export of its --init_checkpoint); every other format "
            "merges a LoRA run's adapters into the weights",
    "tfhub": "TF Hub's BERT preprocessor and encoder SavedModels "
             "(export_dir/preprocessor, export_dir/encoder) of an encoder",
    "sentence_transformers": "a sentence encoder as a sentence-transformers folder "
                             "(modules.json, 1_Pooling/, the transformers BertModel at "
                             "its root)",
}

# --quantize of the formats that quantize (litert, onnx).
QUANTIZATIONS = ("none", "int8")


def format_help() -> str:
    """`--export_format`'s help: each declared format's name and what it writes."""
    return "; ".join(f"{name}: {text}" for name, text in EXPORT_FORMATS.items()) + "."
