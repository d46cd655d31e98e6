"""Task models that take text, for Python and notebooks: load, `fit`, `predict`, `save`.

    from bert_tf import TextClassifier
    model = TextClassifier.from_pretrained("uncased_L-12_H-768_A-12", labels=["0", "1"])
    model.fit((texts_a, texts_b), labels, validation_data=((dev_a, dev_b), dev_labels))
    model.predict(("The cat sat.", "A cat was sitting."))   # {"labels", "probabilities"}
    model.save("mrpc_run")       # a run folder: bert-export-model --init_checkpoint=mrpc_run

`TextTagger` tags words (as bert-run-ner), `TextQuestionAnswerer` finds answers in
contexts (as bert-run-squad), `TextEncoder` gives sentence vectors (as bert-encode). Each
is a Keras model (`compile` / `fit` on token dicts still work) around a
task model of `bert_tf.models` and a `bert_tf.text.preprocessor.Preprocessor`; a folder it
saves is a run folder as the commands write them, and a command's run folder loads back.
"""

from bert_tf.text_models.classifier import TextClassifier
from bert_tf.text_models.encoder import TextEncoder
from bert_tf.text_models.question_answerer import TextQuestionAnswerer
from bert_tf.text_models.tagger import TextTagger

__all__ = ["TextClassifier", "TextEncoder", "TextQuestionAnswerer", "TextTagger"]
