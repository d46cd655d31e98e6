"""`TextTagger`: a tag for every word (named entities, parts of speech), as `bert-run-ner`.

    model = TextTagger.from_pretrained("cased_L-12_H-768_A-12", labels=["O", "B-PER", "I-PER"])
    model.fit([["John", "lives", "here"]], [["B-PER", "O", "O"]], epochs=3)
    model.predict(["Mary lives in Paris", ["Jean", "Dupont"]])   # str: split on whitespace
    # {"words": [["Mary", "lives", "in", "Paris"], ...], "tags": [["B-PER", "O", "O", "O"], ...]}

Sentences are laid out by the runner's own code (`bert_tf.tasks.ner.data`: `[CLS]` word
pieces `[SEP]`, each word's tag on its first piece, long sentences in overlapping
windows), and the loss is its mean over the tagged pieces, so the same recipe trains
the same model as `bert-run-ner`.
"""

import keras
import numpy as np
import tensorflow as tf

from bert_tf.models import BertTokenClassifier
from bert_tf.runs import run_config
from bert_tf.tasks.ner import data as ner_data
from bert_tf.text import input_layout_graph
from bert_tf.text.preprocessor import Preprocessor
from bert_tf.text.tokenization import FullTokenizer
from bert_tf.text_models.training import TextModel, given

MODEL_TYPE = "token_classifier"
DOC_STRIDE = 64  # bert-run-ner's default --doc_stride


@keras.saving.register_keras_serializable(package="bert_tf")
def tagged_pieces_loss(targets, logits):
    """Cross-entropy averaged over the tagged pieces: `targets` [B, S, 2] holds each
    piece's tag id and weight (1 on a word's first piece, else 0)."""
    tag_ids, weights = targets[..., 0], tf.cast(targets[..., 1], tf.float32)  # [B, S]
    losses = keras.losses.sparse_categorical_crossentropy(
        tag_ids, tf.cast(logits, tf.float32), from_logits=True)  # [B, S]
    return tf.reduce_sum(losses * weights) / tf.maximum(tf.reduce_sum(weights), 1.0)


def _trimmed(features, targets):
    """A batch cut to its longest row, its targets [B, S, 2] with it."""
    features = input_layout_graph.trim_to_longest(features)
    return features, targets[:, :tf.shape(features["input_ids"])[1]]


@keras.saving.register_keras_serializable(package="bert_tf")
class TextTagger(TextModel):
    """A `BertTokenClassifier` and its `Preprocessor`; `call` gives logits [B, S, C].

    Args:
      tagger: A `bert_tf.models.BertTokenClassifier`.
      preprocessor: A `Preprocessor` (vocab, case, max_seq_length).
      labels: Tag names in id order.
      doc_stride: Pieces between the starts of a long sentence's windows.
      trained_from: A fine-tuned run folder, "fit", or None (a new head).
    """

    model_type = MODEL_TYPE
    task_model_argument = "tagger"

    def __init__(self, tagger, preprocessor, labels, doc_stride=DOC_STRIDE, trained_from=None,
                 **kwargs):
        kwargs.setdefault("name", "text_tagger")
        super().__init__(tagger, preprocessor, trained_from=trained_from, **kwargs)
        self.labels = [str(label) for label in labels]
        if tagger.num_classes != len(self.labels):
            raise ValueError(f"labels {self.labels} name {len(self.labels)} tags but the "
                             f"tagger has {tagger.num_classes}")
        self.doc_stride = int(doc_stride)
        self.tokenizer = FullTokenizer(preprocessor.vocab_file, preprocessor.do_lower_case)

    def call(self, inputs, training=None):
        return self.task_model(inputs, training=training)["logits"]  # [B, S, C]

    def get_config(self):
        config = super().get_config()
        config.update(labels=self.labels, doc_stride=self.doc_stride)
        return config

    @classmethod
    def from_pretrained(cls, path, labels=None, max_seq_length=None, do_lower_case=None,
                        dropout_rate=0.1, seed=None):
        """A tagger from a released BERT (a new head: pass `labels`) or a `bert-run-ner`
        run (its head and tags). Arguments as `TextClassifier.from_pretrained`."""
        saved = run_config.read(path)
        trained = saved.get("model_type") == MODEL_TYPE
        if trained:
            if labels is not None and list(labels) != saved.get("labels"):
                raise ValueError(f"{path} is a tagger run with tags {saved.get('labels')}: "
                                 "load it without labels")
            labels = saved.get("labels")
        elif labels is None or len(set(map(str, labels))) < 2:
            raise ValueError("a new tagger head needs its tags: pass labels=[...] (two or "
                             f"more distinct tag names, e.g. ['O', 'B-PER', 'I-PER']); got "
                             f"{labels!r}")
        preprocessor = Preprocessor.from_pretrained(
            path, text_pair=False,
            **given(max_seq_length=max_seq_length, do_lower_case=do_lower_case))
        head = {"num_classes": len(labels), "dropout_rate": dropout_rate}
        model = cls.build_task_model(BertTokenClassifier, path, saved if trained else None,
                                     seed, head)
        stride = (saved.get("options") or {}).get("doc_stride") if trained else None
        return cls(model, preprocessor, labels, doc_stride=stride or DOC_STRIDE,
                   trained_from=saved.get("path") if trained else None)

    # ------------------------------------------------------------------ text
    def training_batches(self, x, y, batch_size, shuffle_seed=None):
        sentences = self._sentences(x, y)
        features = self._features(sentences)
        targets = np.stack([features.label_ids, features.label_weights], axis=-1)
        dataset = tf.data.Dataset.from_tensor_slices((features.model_inputs(), targets))
        if shuffle_seed is not None:
            dataset = dataset.shuffle(len(targets), seed=None if shuffle_seed is True
                                      else int(shuffle_seed))
        return dataset.batch(batch_size).map(_trimmed).prefetch(tf.data.AUTOTUNE), len(targets)

    def predictions(self, x, batch_size, **kwargs):
        sentences = self._sentences(x, None)
        features = self._features(sentences)
        logits = keras.Model.predict(self, features.model_inputs(), batch_size=batch_size,
                                     **kwargs)  # [N, S, C], padded to max_seq_length
        tags = ner_data.decode_predictions(features, logits.argmax(axis=-1), sentences,
                                           self.labels)
        return {"words": [s.words for s in sentences], "tags": tags}

    def _features(self, sentences):
        return ner_data.convert_sentences_to_features(
            sentences, self.labels, self.preprocessor.max_seq_length, self.tokenizer,
            self.doc_stride)

    def _sentences(self, x, y):
        """`x` (sentences: lists of words, or str split on whitespace) and `y` (a tag
        list per sentence) as ner_data.Sentence; checked, naming the row."""
        if isinstance(x, str) or not isinstance(x, (list, tuple)) or not x:
            raise TypeError(f"x is {type(x).__name__}: expected a non-empty list of "
                            "sentences (each a list of words, or a str)")
        if y is not None and (not isinstance(y, (list, tuple)) or len(y) != len(x)):
            raise ValueError(f"y has {len(y) if isinstance(y, (list, tuple)) else y!r} tag "
                             f"lists but x has {len(x)} sentences: expected one per sentence")
        sentences = []
        for row, sentence in enumerate(x):
            words = sentence.split() if isinstance(sentence, str) else list(sentence)
            if not words or not all(isinstance(w, str) and w.strip() for w in words):
                raise ValueError(f"x[{row}] is {sentence!r:.80}: expected a sentence of "
                                 "non-empty words")
            tags = None if y is None else [str(tag) for tag in y[row]]
            if tags is not None and len(tags) != len(words):
                raise ValueError(f"y[{row}] has {len(tags)} tags but x[{row}] has "
                                 f"{len(words)} words: expected a tag per word")
            self._check_tags(tags or (), row)
            sentences.append(ner_data.Sentence(words, tags, "x", [row] * len(words)))
        return sentences

    def _check_tags(self, tags, row):
        """Each tag of y[row], as the runner trains it (IOB2), is one of the labels."""
        unknown = [tag for tag in tags if tag not in self.labels]
        if unknown:
            raise ValueError(f"y[{row}] holds {unknown[0]!r}, not one of the tags "
                             f"{self.labels}")
        # IOB1 (CoNLL-2003's files) starts a chunk with I-; the tagger learns IOB2, as
        # bert-run-ner does, so the B- form must be a label too or it would be left out.
        missing = [tag for tag in ner_data.to_iob2(tags) if tag not in self.labels]
        if missing:
            raise ValueError(
                f"y[{row}] starts a chunk with I-{missing[0][2:]} (IOB1): the tagger learns "
                f"IOB2, as bert-run-ner, where it is {missing[0]!r}, not one of the tags "
                f"{self.labels}; load the model with labels=TextTagger.labels_of(y) (the "
                "IOB2 tags of your data)")

    @staticmethod
    def labels_of(y):
        """The tag list bert-run-ner builds from training tags `y` (IOB1 or IOB2): the
        IOB2 tags, "O" first, then sorted."""
        return ner_data.build_label_list([ner_data.Sentence(list(tags), list(tags), "y", [])
                                          for tags in y])

    def default_loss_and_metrics(self):
        return tagged_pieces_loss, []

    def run_description(self):
        return {"task": "ner/python", "labels": self.labels,
                "export": {"label_names": self.labels},
                "options": {"doc_stride": self.doc_stride}}
