"""`TextEncoder`: texts in, sentence vectors out, as `bert-encode`.

    encoder = TextEncoder.from_pretrained("all-MiniLM-L6-v2")   # or a sentence-embeddings run
    vectors = encoder.encode(["A cat sat.", "A dog ran."])     # float32 [2, H]

The model, its pooling, normalization, case and max_seq_length come from the folder as
`bert-encode` takes them (`bert_tf.tasks.sentence_embeddings.encode`), and `encode` is the
command's own encoding, so both give the same vectors.
"""

import keras
import numpy as np

from bert_tf.tasks.sentence_embeddings import encode as encode_lib
from bert_tf.text import tokenization
from bert_tf.text_models import inputs


@keras.saving.register_keras_serializable(package="bert_tf")
class TextEncoder(keras.Model):
    """A `SentenceEncoder` with its vocab and text settings; `call` takes token dicts and
    gives the sentence embeddings [B, H].

    Args:
      sentence_encoder: A `bert_tf.tasks.sentence_embeddings.model.SentenceEncoder`.
      vocab_file: Its vocab.txt.
      do_lower_case: Its case.
      max_seq_length: Tokens per row, [CLS] and [SEP] included.
      long_text: "truncate" or "windows" (a longer text: the mean of its windows).
      doc_stride: The windows' spacing (None: half a window).
    """

    def __init__(self, sentence_encoder, vocab_file, do_lower_case, max_seq_length,
                 long_text="truncate", doc_stride=None, **kwargs):
        kwargs.setdefault("name", "text_encoder")
        super().__init__(**kwargs)
        self.sentence_encoder = sentence_encoder
        self.vocab_file, self.do_lower_case = vocab_file, bool(do_lower_case)
        self.max_seq_length, self.long_text = int(max_seq_length), long_text
        self.doc_stride = doc_stride
        self.tokenizer = tokenization.FullTokenizer(vocab_file, self.do_lower_case)

    def call(self, inputs, training=None):
        return self.sentence_encoder(inputs, training=training)["embedding"]  # [B, H]

    @classmethod
    def from_pretrained(cls, path, pooling=None, normalize=None, max_seq_length=None,
                        long_text="truncate", doc_stride=None):
        """The encoder at `path`: a sentence-embeddings run, a sentence-transformers,
        google-research or Hugging Face folder, or any run's encoder. Arguments left
        None take the folder's values; one that contradicts it is refused."""
        options = encode_lib.EncodeOptions(
            init_checkpoint=str(path), pooling=pooling, normalize=normalize,
            max_seq_length=max_seq_length, long_text=long_text, doc_stride=doc_stride)
        options, found = encode_lib.resolve_options(options)
        model, tokenizer, options = encode_lib.load(options, found, max_seq_length)
        return cls(model, tokenizer.vocab_file, options.do_lower_case,
                   options.max_seq_length, options.long_text, options.doc_stride)

    def encode(self, texts, batch_size=32):
        """float32 [N, H] vectors of `texts` (a str, list, array or pandas column)."""
        [texts] = inputs.text_columns(texts, text_pair=False)
        vectors, _ = encode_lib.embed_texts(
            self.sentence_encoder, self.tokenizer, texts, self.max_seq_length,
            inputs.check_batch_size(batch_size), self.long_text, self.doc_stride)
        return np.asarray(vectors, np.float32)

    def get_config(self):
        config = super().get_config()
        config.update(
            sentence_encoder=keras.saving.serialize_keras_object(self.sentence_encoder),
            vocab_file=self.vocab_file, do_lower_case=self.do_lower_case,
            max_seq_length=self.max_seq_length, long_text=self.long_text,
            doc_stride=self.doc_stride)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["sentence_encoder"] = keras.saving.deserialize_keras_object(
            config["sentence_encoder"])
        return cls(**config)
