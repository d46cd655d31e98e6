"""extract_features: the original JSON layout, values equal to the encoder's layers."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.runs import feature_extraction
from bert_tf.models import BertEncoder
from bert_tf.weights import from_pretrained
from bert_tf.text.tokenization import FullTokenizer
from harness import tiny_config, tiny_model, write_released_checkpoint

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "##s", "the",
         ",", ".", "!", "cafe", "中", "国", "привет", "мир", "a", "b", "##c"]
SEQ = 8
LINES = ["Hello, worlds!", "the cafe ||| привет мир 中国", "", "a b " * 20,
         "x|||y ||| b"]


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """A released-checkpoint folder: bert_config.json, vocab.txt, bert_model.ckpt.*."""
    folder = tmp_path_factory.mktemp("released")
    config = tiny_config(vocab_size=len(VOCAB), num_hidden_layers=3, max_position_embeddings=16)
    encoder = write_released_checkpoint(folder, tiny_model(BertEncoder, config, 11), VOCAB)
    return folder, encoder


def expected_tokens(tokenizer, line):
    """[CLS] a [SEP] (b [SEP]) with the original's split and truncation rules."""
    if " ||| " in line:
        text_a, text_b = line.rsplit(" ||| ", 1)  # the original regex is greedy
        tokens_a, tokens_b = tokenizer.tokenize(text_a), tokenizer.tokenize(text_b)
        while len(tokens_a) + len(tokens_b) > SEQ - 3:
            (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()
        return (["[CLS]"] + tokens_a + ["[SEP]"] + tokens_b + ["[SEP]"],
                [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1))
    tokens = ["[CLS]"] + tokenizer.tokenize(line)[:SEQ - 2] + ["[SEP]"]
    return tokens, [0] * len(tokens)


def test_json_lines_match_encoder_layers(released, tmp_path):
    folder, original = released
    input_file, output_file = tmp_path / "input.txt", tmp_path / "features.jsonl"
    input_file.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    tokenizer = FullTokenizer(str(folder / "vocab.txt"), do_lower_case=True)
    encoder = from_pretrained(BertEncoder, str(folder))  # the released-folder path
    count = feature_extraction.extract_features(encoder, tokenizer, str(input_file),
                                                str(output_file), layers="-1,-3",
                                                max_seq_length=SEQ, batch_size=2)
    assert count == len(LINES)
    records = [json.loads(line) for line in output_file.read_text("utf-8").splitlines()]
    assert [record["linex_index"] for record in records] == list(range(len(LINES)))
    for record, line in zip(records, LINES):
        assert sorted(record) == ["features", "linex_index"]
        tokens, segments = expected_tokens(tokenizer, line)
        assert [feature["token"] for feature in record["features"]] == tokens
        ids = tokenizer.convert_tokens_to_ids(tokens)
        outputs = original({"input_ids": tf.constant([ids]),
                            "input_mask": tf.ones([1, len(ids)], tf.int32),
                            "segment_ids": tf.constant([segments])}, training=False)
        layers = outputs["encoder_outputs"]
        for position, feature in enumerate(record["features"]):
            assert [layer["index"] for layer in feature["layers"]] == [-1, -3]
            for layer in feature["layers"]:
                assert sorted(layer) == ["index", "values"]
                expected = layers[layer["index"]].numpy()[0, position]
                np.testing.assert_allclose(layer["values"], expected, atol=2e-6)
                assert all(round(value, 6) == value for value in layer["values"])


def test_bad_input_names_file_and_line(released, tmp_path):
    folder, encoder = released
    tokenizer = FullTokenizer(str(folder / "vocab.txt"))
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"hello\nworld \xff\xfe\n")
    output = tmp_path / "out.jsonl"
    with pytest.raises(ValueError, match=r"bad\.txt:2"):
        feature_extraction.extract_features(encoder, tokenizer, str(bad), str(output),
                                            layers="-1", max_seq_length=SEQ)
    good = tmp_path / "good.txt"
    good.write_text("hello\n", encoding="utf-8")
    for layers in ("-4", "3", "1,x", ""):
        with pytest.raises(ValueError, match="layers"):
            feature_extraction.extract_features(encoder, tokenizer, str(good), str(output),
                                                layers=layers, max_seq_length=SEQ)
    with pytest.raises(ValueError, match="max_seq_length"):
        feature_extraction.extract_features(encoder, tokenizer, str(good), str(output),
                                            layers="-1", max_seq_length=17)
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        feature_extraction.extract_features(encoder, tokenizer, str(tmp_path / "missing.txt"),
                                            str(output), layers="-1", max_seq_length=SEQ)
    assert sorted(os.listdir(tmp_path)) == ["bad.txt", "good.txt"]


@pytest.mark.slow
def test_cli_on_the_real_released_checkpoint(shared_data_dir, tmp_path):
    folder = shared_data_dir / "checkpoints" / "uncased_L-6_H-384_A-12"
    input_file, output_file = tmp_path / "input.txt", tmp_path / "out.jsonl"
    input_file.write_text("Who was Jim Henson? ||| Jim Henson was a puppeteer\n"
                          "The quick brown fox.\n", encoding="utf-8")
    command = [os.path.join(os.path.dirname(sys.executable), "bert-extract-features"),
               f"--input_file={input_file}", f"--output_file={output_file}",
               f"--init_checkpoint={folder}", "--layers=-1,-2,-3,-4",
               "--max_seq_length=32", "--batch_size=8"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    records = [json.loads(line) for line in output_file.read_text("utf-8").splitlines()]
    tokens = [feature["token"] for feature in records[0]["features"]]
    assert tokens == ["[CLS]", "who", "was", "jim", "henson", "?", "[SEP]", "jim", "henson",
                      "was", "a", "puppet", "##eer", "[SEP]"]
    values = records[1]["features"][0]["layers"][0]["values"]
    assert len(values) == 384 and np.isfinite(values).all()
    # A missing vocab is reported before any output is written.
    result = subprocess.run(command[:-3] + [f"--vocab_file={tmp_path / 'none.txt'}"],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode != 0 and "none.txt" in result.stderr
