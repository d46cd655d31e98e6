"""Issue 38, invariant 5: the library checks its arguments.

The names docs/library.md imports are called with values of the wrong kind (a string
where a list of texts is expected, a number or a list where a path is, a folder where a
file is, a list where a config is); each raises TypeError or ValueError (a folder:
IsADirectoryError, an OSError that names it) with a message naming the parameter,
instead of a result read one character a text or an error deep inside. The table must
hold every name the page imports: a new one fails `test_every_documented_name_is_called`.
"""

import pathlib
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import harness

REPO = pathlib.Path(__file__).resolve().parents[1]
FAST = settings(max_examples=20, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def _vocab(tmp_path):
    return harness.write_vocab(tmp_path / "vocab.txt",
                               harness.SPECIAL_TOKENS + ["hello", "##s"])


def _calls(tmp_path):
    """name -> list of (call of a wrong value, the words its message must hold)."""
    from bert_tf import BertConfig  # pylint: disable=import-outside-toplevel
    from bert_tf.models import BertEncoder  # pylint: disable=import-outside-toplevel
    from bert_tf.text.cached_tokenizer import CachedTokenizer  # noqa
    from bert_tf.text.tokenization import FullTokenizer  # noqa
    from bert_tf.runs import run_config  # pylint: disable=import-outside-toplevel
    from data_prep import wikipedia  # pylint: disable=import-outside-toplevel
    vocab = _vocab(tmp_path)
    folder = tmp_path / "folder"
    folder.mkdir(exist_ok=True)
    return {
        "BertConfig": [
            (lambda: BertConfig.from_json_file(str(folder)), "is a folder"),
            (lambda: BertConfig.from_json_file(7), "must be a file path"),
            (lambda: BertConfig.from_dict(["vocab_size"]), "expected a JSON object"),
            (lambda: BertConfig(vocab_size="10"), "vocab_size"),
            (lambda: BertConfig(vocab_size=10, hidden_dropout_prob="0.1"),
             "hidden_dropout_prob")],
        "FullTokenizer": [
            (lambda: FullTokenizer(str(folder)), "is a folder"),
            (lambda: FullTokenizer(["vocab.txt"]), "must be a file path"),
            (lambda: FullTokenizer(vocab).convert_texts_to_ids("hello"),
             "texts must be a list of texts"),
            (lambda: FullTokenizer(vocab).convert_texts_to_ids(["hello", 3]),
             "texts must hold texts"),
            (lambda: FullTokenizer(vocab).tokenize(["hello"]), "expected str or bytes")],
        "CachedTokenizer": [
            (lambda: CachedTokenizer(str(folder), True), "is a folder"),
            (lambda: CachedTokenizer(7, True), "vocab must be"),
            (lambda: CachedTokenizer(vocab, True).convert_texts_to_ids("hello"),
             "texts must be a list of texts")],
        "BertEncoder": [(lambda: BertEncoder(["config"]), "config")],
        "run_config.read": [(lambda: run_config.read(7), "path must be")],
        **_model_calls(tmp_path, vocab, folder),
        "wikipedia.iter_documents": [
            (lambda: list(wikipedia.iter_documents(str(folder))), "is a folder"),
            (lambda: list(wikipedia.iter_documents([7])), "must be paths")],
    }


def _model_calls(tmp_path, vocab, folder):
    """The models, losses, checkpoints and registries of docs/library.md."""
    # pylint: disable=import-outside-toplevel
    from bert_tf.models import (BertClassifier, BertPretrainer, BertSpanLabeler,
                                BertTokenClassifier, pretraining_losses)
    from bert_tf.models import BertEncoder
    from bert_tf.serving import registry as model_types
    from bert_tf.serving.registry import ModelType
    from bert_tf.runs import registry as tasks
    from bert_tf.text.tokenization import BertTokenizerLayer
    from bert_tf.weights import checkpoints, from_pretrained
    encoder = BertEncoder(harness.tiny_config())
    return {
        "BertTokenizerLayer": [(lambda: BertTokenizerLayer(str(folder)), "is a folder"),
                               (lambda: BertTokenizerLayer(["vocab.txt"]),
                                "vocab_file must be a file path")],
        **{cls.__name__: [(lambda cls=cls, more=more: cls(harness.tiny_config(), *more),
                           "encoder must be a BertEncoder")]
           for cls, more in ((BertPretrainer, ()), (BertSpanLabeler, ()),
                             (BertTokenClassifier, (3,)))},
        "BertClassifier": [(lambda: BertClassifier(encoder, "3"), "num_classes"),
                           (lambda: BertClassifier({"encoder": 1}, 3),
                            "encoder must be a BertEncoder")],
        "pretraining_losses": [(lambda: pretraining_losses([1], {}), "features must be"),
                               (lambda: pretraining_losses({"masked_lm_ids": 0, "masked_lm_weights": 0}, {}),
                                "masked_lm_logits")],
        "from_pretrained": [(lambda: from_pretrained("BertEncoder", str(folder)),
                             "model_cls must be a model class"),
                            (lambda: from_pretrained(BertEncoder, 5), "path must be")],
        "checkpoints": [(lambda: checkpoints.save_google_checkpoint(encoder, 5),
                         "prefix must be"),
                        (lambda: checkpoints.load_google_checkpoint("model", "x"),
                         "expected a BERT model"),
                        (lambda: checkpoints.load_google_checkpoint(encoder, ["x"]),
                         "ckpt_prefix must be")],
        "registry": [(lambda: model_types.register("scorer"),
                      "model_type must be a ModelType"),
                     (lambda: tasks.register({"name": "x"}), "entry must be a TaskEntry")],
        "ModelType": [(lambda: ModelType(name="x", model_class=BertEncoder,
                                         formats="saved_model"), "formats must be a tuple"),
                      (lambda: ModelType(name="x", model_class="BertEncoder"),
                       "model_class must be"),
                      (lambda: ModelType(name="", model_class=BertEncoder), "name must be")],
    }


def test_every_documented_name_is_called(tmp_path):
    """Each name docs/library.md imports is in the table."""
    page = (REPO / "docs" / "library.md").read_text(encoding="utf-8")
    imported = set()
    for names in re.findall(r"^from bert_tf[\w.]* import \(?([\w, \n]+?)\)?$", page,
                            flags=re.M):
        imported |= {name.strip() for name in names.replace("\n", " ").split(",")
                     if name.strip()}
    not_yet = set()
    covered = set(_calls(tmp_path))
    missing = imported - covered - not_yet
    assert not missing, f"call these with wrong kinds in _calls (invariant 5): {missing}"


def test_wrong_kinds_are_refused_naming_the_parameter(tmp_path):
    for name, calls in _calls(tmp_path).items():
        for call, words in calls:
            with pytest.raises((TypeError, ValueError, IsADirectoryError),
                               match=re.escape(words)):
                call()


@FAST
@given(value=st.one_of(st.integers(), st.floats(), st.binary(max_size=8),
                       st.lists(st.integers(), max_size=2), st.none()))
def test_a_path_parameter_given_another_kind_names_it(tmp_path, value):
    from bert_tf.io import fileio  # pylint: disable=import-outside-toplevel
    from bert_tf.io import input_paths  # pylint: disable=import-outside-toplevel
    with pytest.raises(TypeError, match="vocab_file must be a file path"):
        fileio.existing_file(value, "vocab_file")
    if value is not None and not isinstance(value, list):
        with pytest.raises(TypeError, match="input_file must be paths or patterns"):
            input_paths.expand_input_paths([value], "input_file")
