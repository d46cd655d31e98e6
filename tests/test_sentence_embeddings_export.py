"""Sentence embeddings: encoding text files (bert-encode) and the exports of a sentence
encoder (SavedModel of raw text, LiteRT, sentence-transformers folder), each against the
Keras model on the same texts; sentence-transformers' own `encode` on the folders
(a subprocess of a Python that has it: torch and TensorFlow do not share one process);
the shared checkpoint (all-MiniLM-L6-v2's weights) against sentence-transformers on
STS-B sentences when ../shared/data is there.
"""

import importlib.util
import json
import logging
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.serving import export, huggingface, litert, tfhub
from bert_tf.runs import driver, export_checkpoint
from bert_tf.tasks.sentence_embeddings import encode, serving
from bert_tf.tasks.sentence_embeddings import sentence_transformers as st_folder
from bert_tf.tasks.sentence_embeddings.model import SentenceEncoder
from bert_tf.tasks.sentence_embeddings.task import SentenceEmbeddingTask
from bert_tf.text import tokenization, windows
from bert_tf.text.vocab import VocabFile
from bert_tf.text.preprocessor import Preprocessor
from harness import SPECIAL_TOKENS, tiny_config, tiny_model, write_released_checkpoint
from test_sentence_embeddings import WORDS as WORDS_OF_RUN
from test_sentence_embeddings import tiny_options, write_tiny_inputs

WORDS = ["the", "a", "cat", "dog", "sat", "on", "mat", "ran", "far", "away", "big", "small",
         "red", "blue", "house", "tree", "under", "over", "quick", "slow", ".", ","]
VOCAB_SIZE = 99  # tiny_config's
LENGTH = 12  # max_seq_length of the tests: texts below are longer and shorter than it
TEXTS = ["the cat sat on the mat .",
         "a dog",
         "the big red dog ran far away over the small blue house under the tree .",
         "quick",
         "the slow cat , the quick dog , the red tree and the blue mat sat under a house ."]
REFERENCE_PYTHON = os.environ.get("BERT_TF_REFERENCE_PYTHON", sys.executable)
SHARED_CHECKPOINT = (pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" /
                     "checkpoints" / "uncased_L-6_H-384_A-12")
STSB_DEV = SHARED_CHECKPOINT.parents[1] / "glue" / "STS-B" / "dev.tsv"


def randomized(seed, **settings):
    """A tiny SentenceEncoder whose weights are far from their initial values."""
    model = tiny_model(SentenceEncoder, tiny_config(), seed, **settings)
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        variable.assign(variable.numpy() + rng.normal(0, 0.2, variable.shape))
    return model


@pytest.fixture(scope="module")
def bert_folder(tmp_path_factory):
    """A released (google-research) folder of a tiny randomized encoder, and its model."""
    folder = tmp_path_factory.mktemp("bert")
    model = randomized(3)
    write_released_checkpoint(folder, model.encoder, SPECIAL_TOKENS + WORDS +
                              [f"unused{i}" for i in range(VOCAB_SIZE - 5 - len(WORDS))])
    return str(folder), model


@pytest.fixture(scope="module")
def tokenizer(bert_folder):
    return tokenization.FullTokenizer(VocabFile.read(os.path.join(bert_folder[0],
                                                                  "vocab.txt")), True)


def one_by_one(model, tokenizer, texts, length=LENGTH):
    """Each text alone through the Keras model, `[CLS] text [SEP]` cut to `length`."""
    return each_row(model, [ids[:length - 2] for ids in tokenizer.convert_texts_to_ids(texts)])


def each_row(model, id_rows):
    """The Keras model's vector of each `[CLS] ids [SEP]`, alone (no padding)."""
    vectors = []
    for ids in id_rows:
        row = [2] + list(ids) + [3]
        features = {"input_ids": tf.constant([row], tf.int32),
                    "input_mask": tf.ones([1, len(row)], tf.int32),
                    "segment_ids": tf.zeros([1, len(row)], tf.int32)}
        vectors.append(model(features, training=False)["embedding"].numpy()[0])
    return np.stack(vectors)


def encode_options(folder, input_file, output_file, **changes):
    return encode.EncodeOptions(**{"init_checkpoint": folder, "input_file": str(input_file),
                                   "output_file": output_file, "max_seq_length": LENGTH,
                                   "batch_size": 2, **changes})


# ---------------------------------------------------------------------------- encode
def test_encode_writes_npy_and_jsonl_in_the_input_order(bert_folder, tokenizer, tmp_path):
    folder, model = bert_folder
    (tmp_path / "texts.txt").write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    npy, jsonl = tmp_path / "out.npy", tmp_path / "out.jsonl"
    summary = encode.run(encode_options(folder, tmp_path / "texts.txt", f"{npy},{jsonl}"))
    vectors = np.load(npy)
    assert vectors.dtype == np.float32 and vectors.shape == (len(TEXTS), 32)
    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert [line["id"] for line in lines] == list(range(len(TEXTS)))
    np.testing.assert_array_equal(np.asarray([line["embedding"] for line in lines],
                                             np.float32), vectors)  # 9 digits: exact
    # Sorted by length into batches of 2, then back in order: each equals the text alone.
    np.testing.assert_allclose(vectors, one_by_one(model, tokenizer, TEXTS), atol=1e-5)
    assert summary["texts"] == 5 and summary["truncated"] == 2
    assert summary["line"].startswith("Encoded 5 texts (2 truncated, max_seq_length 12) "
                                      "into 32-dimensional vectors (mean pooling)")


def test_encode_reads_a_tsv_column_and_a_jsonl_field_with_ids(bert_folder, tokenizer,
                                                               tmp_path):
    folder, model = bert_folder
    tsv = tmp_path / "texts.tsv"
    tsv.write_text("id\ttext\n" + "".join(f"t{i}\t{text}\n" for i, text in enumerate(TEXTS)))
    records = tmp_path / "texts.jsonl"
    records.write_text("".join(json.dumps({"_id": 10 + i, "body": text}) + "\n"
                               for i, text in enumerate(TEXTS)))
    want = one_by_one(randomized(3, pooling="max", normalize=True), tokenizer, TEXTS)
    for path, column, id_column, ids in ((tsv, "text", "id", [f"t{i}" for i in range(5)]),
                                         (records, "body", "_id", list(range(10, 15)))):
        out = tmp_path / f"{path.suffix[1:]}.jsonl"
        encode.run(encode_options(folder, path, str(out), text_column=column,
                                  id_column=id_column, pooling="max", normalize=True))
        lines = [json.loads(line) for line in out.read_text().splitlines()]
        assert [line["id"] for line in lines] == ids
        got = np.asarray([line["embedding"] for line in lines])
        np.testing.assert_allclose(got, want, atol=1e-5)
        np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize("normalize", [False, True])
def test_windows_average_the_windows_weighted_by_their_tokens(bert_folder, tokenizer,
                                                              normalize):
    model = randomized(3, normalize=normalize)
    stride = 4
    got, stats = encode.embed_texts(model, tokenizer, TEXTS, LENGTH, batch_size=3,
                                     long_text="windows", doc_stride=stride)
    unnormalized = randomized(3)  # the same weights: the windows' pooled vectors
    for ids, vector in zip(tokenizer.convert_texts_to_ids(TEXTS), got):
        pieces = [seg[0] for seg in windows.window_segments(ids, None, LENGTH, stride)]
        rows = each_row(unnormalized, pieces)
        weights = np.asarray([len(piece) + 2 for piece in pieces], np.float64)
        want = (rows * weights[:, None]).sum(0) / weights.sum()
        if normalize:
            want = want / np.linalg.norm(want)
        np.testing.assert_allclose(vector, want, atol=1e-5)
    assert stats["windowed"] == 2 and stats["rows"] > len(TEXTS)
    truncated, _ = encode.embed_texts(model, tokenizer, TEXTS, LENGTH)
    short = [len(ids) <= LENGTH - 2 for ids in tokenizer.convert_texts_to_ids(TEXTS)]
    np.testing.assert_allclose(got[short], truncated[short], atol=1e-5)  # one window
    assert np.abs(got[~np.asarray(short)] - truncated[~np.asarray(short)]).max() > 1e-3


@pytest.mark.parametrize("content, changes, message", [
    ("a cat\n\nthe dog\n", {}, r"texts\.txt:2: empty text"),
    ("a cat\n", {"text_column": "text"}, r"read as plain text, one text a line"),
    ("a cat\n", {"output_file": "out.txt"}, r"--output_file .*out\.txt: expected a \.npy"),
    ("a cat\n", {"doc_stride": 3}, r"--doc_stride=3 spaces the windows of "
                                   r"--long_text=windows"),
    ("a cat\n", {"long_text": "windows", "doc_stride": 10},
     r"doc_stride=10 must be smaller than the window's capacity 10"),
    ("a cat\n", {"max_seq_length": 65}, r"max_seq_length=65 exceeds the model's "
                                        r"max_position_embeddings=64"),
])
def test_bad_input_is_refused_naming_it(bert_folder, tmp_path, content, changes, message):
    (tmp_path / "texts.txt").write_text(content)
    changes.setdefault("output_file", str(tmp_path / "out.npy"))
    with pytest.raises(ValueError, match=message):
        encode.run(encode_options(bert_folder[0], tmp_path / "texts.txt", **changes))
    assert not (tmp_path / "out.npy").exists()


def test_bad_columns_ids_and_folders_are_refused(bert_folder, tmp_path):
    folder = bert_folder[0]
    out = str(tmp_path / "out.npy")
    (tmp_path / "a.tsv").write_text("id\ttext\n1\ta cat\n")
    with pytest.raises(ValueError, match=r"a\.tsv:2: no column 'body' \(has 'id', 'text'\)"):
        encode.run(encode_options(folder, tmp_path / "a.tsv", out, text_column="body"))
    with pytest.raises(ValueError, match=r"a\.tsv is a \.tsv file: pass --text_column"):
        encode.run(encode_options(folder, tmp_path / "a.tsv", out))
    (tmp_path / "b.jsonl").write_text('{"text": "a cat", "id": 1}\n{"text": null}\n')
    with pytest.raises(ValueError, match=r"b\.jsonl:2: column 'text' is null, expected a "
                                         r"string"):
        encode.run(encode_options(folder, tmp_path / "b.jsonl", out, text_column="text"))
    (tmp_path / "c.jsonl").write_text('{"text": "a cat", "id": 1}\n{"text": "a", "id": 1}\n')
    with pytest.raises(ValueError, match=r"c\.jsonl:2: id 1 is also the id of .*c\.jsonl:1"):
        encode.run(encode_options(folder, tmp_path / "c.jsonl", out, text_column="text",
                                  id_column="id"))
    (tmp_path / "t.txt").write_text("a cat\n")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"empty: no bert_model\.ckpt\.index"):
        encode.run(encode_options(str(tmp_path / "empty"), tmp_path / "t.txt", out))
    assert not os.path.exists(out)


# ------------------------------------------------------------------------ exports
def test_saved_model_serves_raw_text_as_the_keras_model(bert_folder, tokenizer, tmp_path):
    folder, _ = bert_folder
    model = randomized(3, pooling="cls", normalize=True)
    path = serving.export_sentence_encoder(
        model, Preprocessor(os.path.join(folder, "vocab.txt"), True, LENGTH),
        tmp_path / "saved")
    loaded = tf.saved_model.load(path)
    assert sorted(loaded.signatures) == sorted(export.SIGNATURE_NAMES)
    got = loaded.signatures["serving_default"](text=tf.constant(TEXTS))["embedding"]
    want = one_by_one(model, tokenizer, TEXTS)
    np.testing.assert_allclose(got.numpy(), want, atol=1e-5)
    features = encode._pack([ids[:LENGTH - 2] for ids in tokenizer.convert_texts_to_ids(
        TEXTS)], 2, 3)
    padded = {name: tf.constant(np.pad(value, [(0, 0), (0, LENGTH - value.shape[1])]))
              for name, value in features.items()}
    ids_out = loaded.signatures["serve_ids"](**padded)["embedding"]
    np.testing.assert_allclose(ids_out.numpy(), want, atol=1e-5)


def test_a_run_of_options_exports_a_bert_folder_as_a_sentence_encoder(bert_folder,
                                                                      tokenizer, tmp_path):
    folder, model = bert_folder  # a BERT folder says no pooling: mean, not normalized
    path = export_checkpoint.export_from_checkpoint(export_checkpoint.ExportOptions(
        model_type="sentence_encoder", init_checkpoint=folder, max_seq_length=LENGTH,
        export_dir=str(tmp_path / "saved")))
    got = tf.saved_model.load(path).signatures["serving_default"](text=tf.constant(TEXTS))
    np.testing.assert_allclose(got["embedding"].numpy(), one_by_one(model, tokenizer, TEXTS),
                               atol=1e-5)


def test_sentence_transformers_folder_has_its_files_and_loads_back(bert_folder, tokenizer,
                                                                   tmp_path, caplog):
    folder, _ = bert_folder
    model = randomized(3, pooling="max", normalize=True)
    caplog.set_level(logging.INFO, logger="absl")
    path = st_folder.export_sentence_transformers(
        model, Preprocessor(os.path.join(folder, "vocab.txt"), True, LENGTH), tmp_path / "st")
    # The log names the export folder, never the temporary one it was written in.
    assert f"folder to {tmp_path / 'st'}" in caplog.text and ".tmp-" not in caplog.text
    modules = json.loads((tmp_path / "st" / "modules.json").read_text())
    assert [(m["path"], m["type"].rsplit(".", 1)[1]) for m in modules] == [
        ("", "Transformer"), ("1_Pooling", "Pooling"), ("2_Normalize", "Normalize")]
    pooling = json.loads((tmp_path / "st" / "1_Pooling" / "config.json").read_text())
    assert pooling["word_embedding_dimension"] == 32 and pooling["pooling_mode_max_tokens"]
    assert not pooling["pooling_mode_mean_tokens"]
    assert json.loads((tmp_path / "st" / "sentence_bert_config.json").read_text()) == {
        "max_seq_length": LENGTH, "do_lower_case": False}
    assert json.loads((tmp_path / "st" / "config.json").read_text())["architectures"] == [
        "BertModel"]
    read = st_folder.read_folder(path)
    assert (read.pooling, read.normalize, read.max_seq_length, read.do_lower_case) == (
        "max", True, LENGTH, True)
    back = serving.load_sentence_encoder(path)
    assert (back.pooling, back.normalize) == ("max", True)
    np.testing.assert_allclose(one_by_one(back, tokenizer, TEXTS),
                               one_by_one(model, tokenizer, TEXTS), atol=1e-6)
    # bert-encode takes pooling, normalization and max_seq_length from the folder ...
    (tmp_path / "t.txt").write_text("\n".join(TEXTS) + "\n")
    options = encode.EncodeOptions(init_checkpoint=path, input_file=str(tmp_path / "t.txt"),
                                   output_file=str(tmp_path / "o.npy"))
    encode.run(options)
    np.testing.assert_allclose(np.load(tmp_path / "o.npy"),
                               one_by_one(model, tokenizer, TEXTS), atol=1e-5)
    # ... and refuses a flag that contradicts it.
    with pytest.raises(ValueError, match=r"--pooling=mean contradicts .*modules\.json, "
                                         r"which says pooling=max"):
        encode.run(encode.EncodeOptions(init_checkpoint=path, pooling="mean",
                                        input_file=str(tmp_path / "t.txt"),
                                        output_file=str(tmp_path / "o.npy")))
    # bert-export-model takes the model type and max_seq_length from it too.
    saved = export_checkpoint.export_from_checkpoint(export_checkpoint.ExportOptions(
        init_checkpoint=path, export_dir=str(tmp_path / "saved")))
    serve_ids = tf.saved_model.load(saved).signatures["serve_ids"]
    assert serve_ids.structured_input_signature[1]["input_ids"].shape.as_list() == [
        None, LENGTH]
    got = tf.saved_model.load(saved).signatures["serving_default"](text=tf.constant(TEXTS))
    np.testing.assert_allclose(got["embedding"].numpy(), one_by_one(model, tokenizer, TEXTS),
                               atol=1e-5)
    with pytest.raises(ValueError, match=r"--do_lower_case=False contradicts the run in "
                                         r".*modules\.json, trained with do_lower_case=True"):
        export_checkpoint.export_from_checkpoint(export_checkpoint.ExportOptions(
            init_checkpoint=path, export_dir=str(tmp_path / "other"), do_lower_case=False))


def test_a_folder_of_another_pooling_or_module_is_refused(bert_folder, tmp_path):
    path = st_folder.export_sentence_transformers(
        randomized(3), Preprocessor(os.path.join(bert_folder[0], "vocab.txt"), True, LENGTH),
        tmp_path / "st")
    pooling_file = tmp_path / "st" / "1_Pooling" / "config.json"
    pooling = json.loads(pooling_file.read_text())
    pooling_file.write_text(json.dumps(dict(pooling, pooling_mode_mean_tokens=False,
                                            pooling_mode_weightedmean_tokens=True)))
    with pytest.raises(ValueError, match=r"1_Pooling/config\.json: expected exactly one of "
                                         r".* got pooling_mode_weightedmean_tokens"):
        st_folder.read_folder(path)
    pooling_file.write_text(json.dumps({"embedding_dimension": 32, "pooling_mode": "cls"}))
    assert st_folder.read_folder(path).pooling == "cls"  # sentence-transformers 5+ layout
    modules = json.loads((tmp_path / "st" / "modules.json").read_text())
    modules.append({"idx": 2, "name": "2", "path": "2_Dense",
                    "type": "sentence_transformers.models.Dense"})
    (tmp_path / "st" / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(ValueError, match=r"modules\.json: module "
                                         r"'sentence_transformers\.models\.Dense' has no equal"):
        serving.load_sentence_encoder(path)


def test_an_older_folder_with_its_transformer_in_0_transformer_encodes(bert_folder,
                                                                      tokenizer, tmp_path):
    model = randomized(3, pooling="cls")
    path = pathlib.Path(st_folder.export_sentence_transformers(
        model, Preprocessor(os.path.join(bert_folder[0], "vocab.txt"), True, LENGTH),
        tmp_path / "st"))
    (path / "0_Transformer").mkdir()
    for name in os.listdir(path):
        if (path / name).is_file() and name not in ("modules.json",
                                                    "config_sentence_transformers.json"):
            os.replace(path / name, path / "0_Transformer" / name)
    modules = json.loads((path / "modules.json").read_text())
    modules[0]["path"] = "0_Transformer"
    (path / "modules.json").write_text(json.dumps(modules))
    (tmp_path / "t.txt").write_text("\n".join(TEXTS) + "\n")
    summary = encode.run(encode.EncodeOptions(init_checkpoint=str(path),
                                              input_file=str(tmp_path / "t.txt"),
                                              output_file=str(tmp_path / "o.npy")))
    assert "(cls pooling)" in summary["line"] and "max_seq_length 12" in summary["line"]
    np.testing.assert_allclose(np.load(tmp_path / "o.npy"),
                               one_by_one(model, tokenizer, TEXTS), atol=1e-5)


def test_formats_a_sentence_encoder_has_not_are_refused_with_reasons():
    with pytest.raises(ValueError, match=r"a BertClassifier cannot be exported as a "
                                         r"sentence-transformers folder: .*"
                                         r"--model_type=sentence_encoder"):
        st_folder.check_model_class(export.keras_model_class("classifier"))
    with pytest.raises(ValueError, match=r"a SentenceEncoder has no Hugging Face export|"
                                         r"SentenceEncoder.*export_format=sentence_transformers"):
        huggingface.check_model_class(SentenceEncoder)


@pytest.mark.slow
def test_tfhub_encoder_serves_the_sentence_vector_as_pooled_output(bert_folder, tokenizer,
                                                                   tmp_path):
    folder, _ = bert_folder
    model = randomized(3, pooling="cls", normalize=True)
    path = export_checkpoint.export_from_checkpoint(export_checkpoint.ExportOptions(
        model_type="sentence_encoder", init_checkpoint=folder, export_format="tfhub",
        max_seq_length=LENGTH, export_dir=str(tmp_path / "hub")))
    # A BERT folder exports mean pooling, not normalized; the library takes this model.
    mean = tf.saved_model.load(os.path.join(path, tfhub.ENCODER))
    tfhub.export_tfhub(
        model, Preprocessor(os.path.join(folder, "vocab.txt"), True, LENGTH),
        tmp_path / "hub_cls")
    preprocessor = tf.saved_model.load(os.path.join(tmp_path / "hub_cls", tfhub.PREPROCESSOR))
    encoder = tf.saved_model.load(os.path.join(tmp_path / "hub_cls", tfhub.ENCODER))
    inputs = preprocessor(tf.constant(TEXTS))
    outputs = encoder(inputs, training=False)
    np.testing.assert_allclose(outputs["pooled_output"].numpy(),
                               one_by_one(model, tokenizer, TEXTS), atol=1e-5)
    np.testing.assert_allclose(outputs["default"].numpy(), outputs["pooled_output"].numpy())
    assert len(outputs["encoder_outputs"]) == 2
    np.testing.assert_allclose(mean(inputs, training=False)["pooled_output"].numpy(),
                               one_by_one(bert_folder[1], tokenizer, TEXTS), atol=1e-5)


@pytest.mark.extras("ai_edge_litert")
@pytest.mark.skipif(importlib.util.find_spec("ai_edge_litert") is None,
                    reason="ai-edge-litert is not installed (the litert-test extra)")
def test_litert_model_gives_the_embedding(bert_folder, tokenizer, tmp_path):
    from ai_edge_litert.interpreter import Interpreter  # pylint: disable=import-outside-toplevel
    folder, _ = bert_folder
    model = randomized(3, normalize=True)
    path = litert.export_litert(
        model, Preprocessor(os.path.join(folder, "vocab.txt"), True, LENGTH),
        tmp_path / "lite")
    config = json.loads((tmp_path / "lite" / litert.CONFIG_FILE).read_text())
    assert config["output_names"] == ["embedding"]
    runner = Interpreter(model_path=os.path.join(path, litert.MODEL_FILE)
                         ).get_signature_runner("serving_default")
    ids = tokenizer.convert_texts_to_ids(TEXTS[:1])[0]
    row = np.zeros([1, LENGTH], np.int32)
    row[0, :len(ids) + 2] = [2] + ids + [3]
    got = runner(input_ids=row, input_mask=(row > 0).astype(np.int32),
                 segment_ids=np.zeros_like(row))["embedding"]
    np.testing.assert_allclose(got[0], one_by_one(model, tokenizer, TEXTS[:1])[0], atol=1e-5)


# ------------------------------------------------------------ sentence-transformers
REFERENCE_SCRIPT = r"""
import json, sys
import numpy as np
from sentence_transformers import SentenceTransformer
request = json.load(open(sys.argv[1]))
out = {}
for name, path in request["models"].items():
    model = SentenceTransformer(path, device="cpu")
    out[name] = model.encode(request["texts"], batch_size=3, convert_to_numpy=True)
    if request.get("save"):  # the same model in the layout this version writes
        model.save(path + "_saved")
np.savez(sys.argv[2], **out)
"""


def sentence_transformers_or_skip():
    probe = ("import importlib.util, sys; sys.exit(importlib.util.find_spec("
             "'sentence_transformers') is None)")
    if subprocess.run([REFERENCE_PYTHON, "-c", probe], check=False).returncode != 0:
        pytest.skip(f"sentence-transformers is not installed for {REFERENCE_PYTHON}: pip "
                    "install sentence-transformers, or set BERT_TF_REFERENCE_PYTHON")
    return REFERENCE_PYTHON


def reference_vectors(models, texts, tmp_path, save=False):
    """{name: sentence-transformers' encode(texts)} of each folder in `models`."""
    python = sentence_transformers_or_skip()
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"models": models, "texts": texts, "save": save}))
    result = subprocess.run([python, "-c", REFERENCE_SCRIPT, str(request),
                             str(tmp_path / "out.npz")], capture_output=True, text=True,
                            timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return dict(np.load(tmp_path / "out.npz"))


def test_sentence_transformers_encodes_our_folders_as_we_do(bert_folder, tokenizer,
                                                            tmp_path):
    folder = bert_folder[0]
    models, ours = {}, {}
    for pooling, normalize in (("mean", True), ("cls", False), ("max", True)):
        name = f"{pooling}_{normalize}"
        model = randomized(5, pooling=pooling, normalize=normalize)
        models[name] = st_folder.export_sentence_transformers(
            model, Preprocessor(os.path.join(folder, "vocab.txt"), True, LENGTH),
            tmp_path / name)
        ours[name] = one_by_one(model, tokenizer, TEXTS)
    theirs = reference_vectors(models, TEXTS, tmp_path, save=True)
    for name, vectors in ours.items():
        np.testing.assert_allclose(theirs[name], vectors, atol=1e-5, err_msg=name)
        # What this sentence-transformers version saves again loads as our init.
        back = serving.load_sentence_encoder(models[name] + "_saved")
        assert (back.pooling, back.normalize) == tuple(name.split("_")[:1]) + (
            name.endswith("True"),)
        np.testing.assert_allclose(one_by_one(back, tokenizer, TEXTS), vectors, atol=1e-5)


@pytest.mark.skipif(not STSB_DEV.is_file(), reason="needs ../shared/data (the shared "
                    "checkpoint and GLUE STS-B)")
def test_shared_checkpoint_equals_sentence_transformers_on_stsb(tmp_path):
    sentence_transformers_or_skip()
    rows = [line.split("\t") for line in STSB_DEV.read_text(encoding="utf-8").splitlines()]
    texts = [row[7] for row in rows[1:9]] + [row[8] for row in rows[1:9]]
    model = serving.load_sentence_encoder(str(SHARED_CHECKPOINT), pooling="mean",
                                          normalize=True)
    vocab_file = str(SHARED_CHECKPOINT / "vocab.txt")
    path = st_folder.export_sentence_transformers(
        model, Preprocessor(vocab_file, True, 256), tmp_path / "minilm")
    ours, _ = encode.embed_texts(model, tokenization.FullTokenizer(
        VocabFile.read(vocab_file), True), texts, 256)
    theirs = reference_vectors({"minilm": path}, texts, tmp_path)["minilm"]
    np.testing.assert_allclose(theirs, ours, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


# ------------------------------------------------------------------- a run's folder
def test_a_run_folder_encodes_and_exports_with_its_pooling(tmp_path):
    # A short run of the task, pooling max and normalized, exporting when done.
    write_tiny_inputs(tmp_path)
    run = tiny_options(tmp_path, pooling="max", normalize=True,
                       export_dir=str(tmp_path / "exported"))
    driver.execute(SentenceEmbeddingTask(run))
    texts = [" ".join(WORDS_OF_RUN[i:i + 5]) for i in range(0, 20, 4)]
    (tmp_path / "t.txt").write_text("\n".join(texts) + "\n")
    summary = encode.run(encode.EncodeOptions(init_checkpoint=run.output_dir,
                                              input_file=str(tmp_path / "t.txt"),
                                              output_file=str(tmp_path / "o.npy")))
    assert "normalized vectors (max pooling)" in summary["line"]
    assert "max_seq_length 8" in summary["line"]
    ours = np.load(tmp_path / "o.npy")
    served = tf.saved_model.load(str(tmp_path / "exported")).signatures["serving_default"]
    np.testing.assert_allclose(served(text=tf.constant(texts))["embedding"].numpy(), ours,
                               atol=1e-5)
    # bert-export-model takes the model type and the pooling from the run's config.json.
    path = export_checkpoint.export_from_checkpoint(export_checkpoint.ExportOptions(
        init_checkpoint=run.output_dir, export_format="sentence_transformers",
        export_dir=str(tmp_path / "st")))
    read = st_folder.read_folder(path)
    assert (read.pooling, read.normalize, read.max_seq_length) == ("max", True, 8)
    back, _ = encode.embed_texts(serving.load_sentence_encoder(path), tokenization.FullTokenizer(
        VocabFile.read(os.path.join(path, "vocab.txt")), True), texts, 8)
    np.testing.assert_allclose(back, ours, atol=1e-5)
    with pytest.raises(ValueError, match=r"--normalize=False contradicts .*config\.json, "
                                         r"which says normalize=True"):
        encode.run(encode.EncodeOptions(init_checkpoint=run.output_dir, normalize=False,
                                        input_file=str(tmp_path / "t.txt"),
                                        output_file=str(tmp_path / "o.npy")))


def test_bert_encode_command_prints_its_summary_or_one_line_error(bert_folder, tmp_path):
    (tmp_path / "t.txt").write_text("a cat\nthe dog ran\n")
    (tmp_path / "bad.txt").write_text("a cat\n\n")
    command = [sys.executable, "-m", "bert_tf.cli.encode", f"--init_checkpoint={bert_folder[0]}",
               "--pooling=max", f"--output_file={tmp_path / 'o.npy'},{tmp_path / 'o.jsonl'}"]
    root = pathlib.Path(__file__).resolve().parents[1]
    done = subprocess.run([*command, f"--input_file={tmp_path / 't.txt'}"], cwd=root,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().startswith(  # 128 tokens, cut to the model's 64 positions
        "Encoded 2 texts (0 truncated, max_seq_length 64) into 32-dimensional vectors "
        "(max pooling)")
    assert np.load(tmp_path / "o.npy").shape == (2, 32)
    bad = subprocess.run([*command, f"--input_file={tmp_path / 'bad.txt'}"], cwd=root,
                         capture_output=True, text=True, timeout=300, check=False)
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines()[-1].endswith("bad.txt:2: empty text; every row "
                                                        "needs a text to encode")


def test_a_run_from_a_sentence_transformers_folder_keeps_its_pooling(tmp_path):
    # A max-pooled, normalizing folder as init: the run trains, saves and exports that
    # model unless the flags choose otherwise (fine-tuning may change the pooling).
    write_tiny_inputs(tmp_path)
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS_OF_RUN
    (tmp_path / "vocab.txt").write_text("\n".join(
        words + [f"unused{i}" for i in range(VOCAB_SIZE - len(words))]) + "\n")
    source = st_folder.export_sentence_transformers(
        randomized(4, pooling="max", normalize=True),
        Preprocessor(str(tmp_path / "vocab.txt"), True, 8), tmp_path / "st")
    init = dict(init_checkpoint=source, allow_random_encoder=False, vocab_file=None,
                bert_config_file=None)
    task = SentenceEmbeddingTask(tiny_options(tmp_path, **init,
                                              export_dir=str(tmp_path / "exported")))
    assert (task.options.pooling, task.options.normalize) == ("max", True)
    driver.execute(task)
    saved = json.loads((tmp_path / "out" / "config.json").read_text())["options"]
    assert (saved["pooling"], saved["normalize"]) == ("max", True)
    served = tf.saved_model.load(str(tmp_path / "exported")).signatures["serving_default"]
    vectors = served(text=tf.constant(["the cat", "a dog ran"]))["embedding"].numpy()
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # The run in output_dir says more than the folder; a flag says more than either.
    again = SentenceEmbeddingTask(tiny_options(tmp_path, **dict(init, init_checkpoint=None)))
    assert (again.options.pooling, again.options.normalize) == ("max", True)
    chosen = SentenceEmbeddingTask(tiny_options(tmp_path / "other", **init, pooling="cls",
                                                normalize=False))
    assert (chosen.options.pooling, chosen.options.normalize) == ("cls", False)


@pytest.mark.parametrize("target", ["input", "model"])
def test_encode_never_writes_over_what_it_reads(bert_folder, tmp_path, target):
    # The input file itself, or a file inside the model folder it reads.
    folder, _ = bert_folder
    (tmp_path / "t.jsonl").write_text('{"text": "a cat"}\n')
    output = {"input": str(tmp_path / "t.jsonl"),
              "model": os.path.join(folder, "vectors.npy")}[target]
    before = sorted(os.listdir(folder)), (tmp_path / "t.jsonl").read_bytes()
    with pytest.raises(ValueError, match="an output never replaces an input"):
        encode.run(encode.EncodeOptions(init_checkpoint=folder, output_file=output,
                                        input_file=str(tmp_path / "t.jsonl"),
                                        text_column="text"))
    assert (sorted(os.listdir(folder)), (tmp_path / "t.jsonl").read_bytes()) == before
