"""Raw text in, a BERT's inputs out: a model's vocab, case, length and pairing as one object.

    pre = Preprocessor.from_pretrained("uncased_L-12_H-768_A-12", max_seq_length=128)
    pre(["a text", "another one"])    # {"input_ids", "input_mask", "segment_ids"}: int32 [B, L]
    pre((["first text"], ["second"]))  # a tuple of two columns: sentence pairs
    dataset.batch(32).map(lambda a, b, y: (pre((a, b)), y))   # in tf.data: graph ops only

Rows are laid out as google-research's run_classifier lays them out (`[CLS] a [SEP] b
[SEP]`, pairs cut longest-first, `bert_tf.text.input_layout_graph`) with the same tokens
as `FullTokenizer` (`bert_tf.text.wordpiece_graph.BertTokenizerLayer`). A batch is cut to
its longest row (L <= max_seq_length): padding is masked out of attention, so the outputs
are those of rows padded to `max_seq_length`, at the cost of the batch's own tokens.

`save(folder)` writes `vocab.txt` and `preprocessor.json`; `from_pretrained(folder)` reads
them back, or the settings of any folder bert_tf reads (google-research, Hugging Face,
sentence-transformers, a run's output_dir): see `from_pretrained`.
"""

import json
import os

import keras
import numpy as np
import tensorflow as tf

from bert_tf.io import fileio
from bert_tf.text import input_layout_graph
from bert_tf.text import vocab as vocab_lib
from bert_tf.text.wordpiece_graph import BertTokenizerLayer

PREPROCESSOR_FILE = "preprocessor.json"
DEFAULT_MAX_SEQ_LENGTH = 128
# The model's inputs without any token: [CLS] [SEP], and [SEP] again for a pair.
_SPECIAL_TOKENS = {False: 2, True: 3}


@keras.saving.register_keras_serializable(package="bert_tf")
class Preprocessor(keras.layers.Layer):
    """Texts or text pairs -> dict of int32 [B, L] `input_ids`, `input_mask`, `segment_ids`.

    Args:
      vocab_file: vocab.txt path (must hold `[UNK]`, `[CLS]`, `[SEP]`), or a
        `bert_tf.text.vocab.VocabFile` already read.
      do_lower_case: uncased rules (an uncased model's).
      max_seq_length: Longest row, special tokens included.
      text_pair: True: every call gives pairs; False: single texts; None: either.
      trim: Cut each batch to its longest row (False: pad to `max_seq_length`, the static
        shape that XLA and exported signatures want).
      **kwargs: Keras layer arguments (`name`, ...).
    """

    def __init__(self, vocab_file, do_lower_case=True, max_seq_length=DEFAULT_MAX_SEQ_LENGTH,
                 text_pair=None, trim=True, **kwargs):
        kwargs.setdefault("name", "preprocessor")
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        if text_pair not in (None, True, False):
            raise ValueError(f"text_pair={text_pair!r}: expected True, False or None")
        least = _SPECIAL_TOKENS[bool(text_pair)] + 1
        if (isinstance(max_seq_length, bool) or not isinstance(max_seq_length, (int, np.integer))
                or max_seq_length < least):
            raise ValueError(f"max_seq_length={max_seq_length!r}: expected an integer of at "
                             f"least {least} (the special tokens and one text token)")
        self.vocab = (vocab_file if isinstance(vocab_file, vocab_lib.VocabFile)
                      else vocab_lib.VocabFile.read(vocab_file))
        vocab_lib.check_vocab_has_unk(self.vocab.tokens, self.vocab.path)
        missing = [token for token in ("[CLS]", "[SEP]") if token not in self.vocab.tokens]
        if missing:
            raise ValueError(f"vocab_file {self.vocab.path} has no {' or '.join(missing)}: "
                             "expected a BERT vocab")
        self.vocab_file = self.vocab.path
        self.do_lower_case = bool(do_lower_case)
        self.max_seq_length = int(max_seq_length)
        self.text_pair = text_pair
        self.trim = bool(trim)
        self.tokenizer = BertTokenizerLayer(self.vocab_file, self.do_lower_case,
                                            name="tokenizer")
        self.cls_id, self.sep_id = (self.vocab.tokens[t] for t in ("[CLS]", "[SEP]"))

    # ------------------------------------------------------------------ the layer
    def __call__(self, inputs, **kwargs):
        # Keras layers take tensors only: Python texts become tf.string columns first.
        columns = self.columns(inputs)
        if tf.executing_eagerly() and not kwargs:
            return self._traced_call(len(columns))(*columns)
        return super().__call__(tuple(columns) if len(columns) == 2 else columns[0],
                                **kwargs)

    def _traced_call(self, num_columns):
        """`call` as a tf.function of 1 or 2 [B] string columns, traced once each: run
        op by op, the tokenizer's ragged ops cost about 100x their traced time (200 ms
        against 2 ms a call)."""
        # Kept out of Keras's attribute tracking: nothing to save, rebuilt on demand.
        traced = self.__dict__.setdefault("_traced_calls", {})
        if num_columns not in traced:
            traced[num_columns] = tf.function(
                lambda *columns: self.call(columns if num_columns == 2 else columns[0]),
                input_signature=[tf.TensorSpec([None], tf.string)] * num_columns)
        return traced[num_columns]

    def call(self, inputs):
        # [B] texts, or a pair of [B] columns (Keras may hand a tuple back as a list).
        columns = list(inputs) if isinstance(inputs, (tuple, list)) else [inputs]
        ids = [self.tokenizer(column) for column in columns]  # ragged int64 [B, (T)]
        segments = input_layout_graph.truncate_ragged_segments(
            ids[0], ids[1] if len(ids) == 2 else None, self.max_seq_length)
        features = input_layout_graph.pack_inputs(segments, self.cls_id, self.sep_id,
                                                  self.max_seq_length)
        return input_layout_graph.trim_to_longest(features) if self.trim else features

    def columns(self, inputs):
        """`inputs` as 1 or 2 tf.string [B] columns, checked against `text_pair`.

        A str or a list / array / Series / tensor of texts is one column; a tuple of two
        of them (or of two str: one pair) is a pair of columns.
        """
        pair = isinstance(inputs, tuple)
        if pair and len(inputs) != 2:
            raise ValueError(f"a tuple of {len(inputs)} items: expected 2 (text_a, text_b "
                             "of sentence pairs)")
        columns = [_column(item, name) for item, name in
                   (zip(inputs, ("text_a", "text_b")) if pair else [(inputs, "texts")])]
        if self.text_pair is not None and pair != self.text_pair:
            raise ValueError(
                "got sentence pairs (a tuple of two columns), but this model takes single "
                "texts" if pair else "got single texts, but this model takes sentence "
                "pairs: pass a tuple (texts_a, texts_b)")
        if pair:
            _check_same_length(*columns)
        return columns

    def get_config(self):
        config = super().get_config()
        config.update(vocab_file=self.vocab_file, do_lower_case=self.do_lower_case,
                      max_seq_length=self.max_seq_length, text_pair=self.text_pair,
                      trim=self.trim)
        return config

    # ------------------------------------------------------------------ folders
    def save(self, folder):
        """Writes `folder/vocab.txt` and `folder/preprocessor.json` (atomically)."""
        folder = fileio.path_argument(folder, "folder", "a folder")
        os.makedirs(folder, exist_ok=True)
        target = os.path.join(folder, "vocab.txt")
        if os.path.abspath(target) != os.path.abspath(self.vocab_file):
            self.vocab.write(target)
        settings = {"do_lower_case": self.do_lower_case,
                    "max_seq_length": self.max_seq_length, "text_pair": self.text_pair}
        fileio.write_text_atomic(os.path.join(folder, PREPROCESSOR_FILE),
                                 json.dumps(settings, indent=1, sort_keys=True) + "\n")

    @classmethod
    def from_pretrained(cls, path, **overrides):
        """The preprocessor of a model folder; `overrides` (any constructor argument)
        win over what the folder says.

        Args:
          path: A folder this class saved; a run's output_dir (its config.json); a
            google-research folder (case from its name, else from the vocab); a Hugging
            Face folder (tokenizer_config.json); a sentence-transformers folder
            (sentence_bert_config.json's max_seq_length).

        Raises:
          FileNotFoundError: no vocab.txt in the folder.
        """
        settings = folder_settings(path)
        settings.update(overrides)
        return cls(**settings)


def folder_settings(path) -> dict:
    """The constructor arguments a model folder gives (see `from_pretrained`)."""
    # A checkpoint prefix: its folder (a run's, for a prefix in its best/).
    path = fileio.run_folder_of(fileio.path_argument(path, "path", "a model folder"))
    modules = fileio.read_json_if_present(
        os.path.join(path, "modules.json"), "a sentence-transformers folder lists its modules")
    if isinstance(modules, list) and modules:  # sentence-transformers: its first module
        path = os.path.join(path, modules[0].get("path", ""))
    vocab_file = os.path.join(path, "vocab.txt")
    if not os.path.isfile(vocab_file):
        raise FileNotFoundError(f"{path}: no vocab.txt; expected a BERT model folder "
                                "(google-research, Hugging Face, sentence-transformers or "
                                "a bert_tf run), or pass vocab_file")
    settings = {"vocab_file": vocab_file}
    saved = fileio.read_json_if_present(os.path.join(path, PREPROCESSOR_FILE),
                                        "a saved preprocessor")
    if saved:
        return {**settings, **saved}
    run = fileio.read_json_if_present(os.path.join(path, "config.json"),
                                      "the model's config")
    if "options" in run or "vocab" in run:  # a bert_tf run (bert_tf.runs.run_config)
        lower = (run.get("vocab") or {}).get("do_lower_case")
        length = (run.get("options") or {}).get("max_seq_length")
    else:
        lower = fileio.read_json_if_present(
            os.path.join(path, "tokenizer_config.json"),
            "the tokenizer's settings").get("do_lower_case")
        length = fileio.read_json_if_present(
            os.path.join(path, "sentence_bert_config.json"),
            "the Transformer module's settings").get("max_seq_length")
    if lower is None:
        lower = _folder_case(path, vocab_file)
    settings["do_lower_case"] = bool(lower)
    if length:
        settings["max_seq_length"] = int(length)
    return settings


def _folder_case(path, vocab_file) -> bool:
    """Lower-casing by a released folder's name, else by the vocab (uncased when it
    cannot tell, as google-research's default)."""
    case = vocab_lib.released_model_case(path) or vocab_lib.vocab_case(
        vocab_lib.VocabFile.read(vocab_file).tokens)
    return case != "cased"


def _column(texts, name):
    """`texts` as a tf.string [B] (a tensor passes as it is: tf.data, graphs)."""
    if isinstance(texts, (tf.Tensor, tf.RaggedTensor)):
        if texts.dtype != tf.string:
            raise TypeError(f"{name}: a {texts.dtype.name} tensor; expected tf.string texts")
        return tf.reshape(texts, [-1])
    if isinstance(texts, (str, bytes)):
        texts = [texts]
    texts = np.asarray(texts, dtype=object).reshape(-1)  # lists, arrays, pandas columns
    bad = [index for index, text in enumerate(texts) if not isinstance(text, (str, bytes))]
    if bad:
        raise TypeError(f"{name}[{bad[0]}] is {type(texts[bad[0]]).__name__} "
                        f"{texts[bad[0]]!r:.60}: expected a str (text)")
    return tf.constant(texts.tolist(), tf.string)


def _check_same_length(first, second):
    """Refuses pair columns of different lengths (eagerly, else as a graph assertion)."""
    if first.shape[0] is not None and second.shape[0] is not None:
        if first.shape[0] != second.shape[0]:
            raise ValueError(f"text_a has {first.shape[0]} texts but text_b has "
                             f"{second.shape[0]}: expected one text_b per text_a")
        return
    tf.debugging.assert_equal(tf.size(first), tf.size(second),
                              message="text_a and text_b differ in length")

