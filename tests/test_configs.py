import json

import pytest

from bert_tf import BertConfig
from harness import tiny_config_dict  # every field spelled out, none from the defaults


def test_json_round_trip(tmp_path):
    config = BertConfig.from_dict(tiny_config_dict())
    path = tmp_path / "bert_config.json"
    config.to_json_file(path)
    assert json.loads(path.read_text()) == tiny_config_dict()
    assert BertConfig.from_json_file(path) == config
    assert config.attention_head_size == 8


def test_defaults_are_bert_base():
    config = BertConfig(vocab_size=30522)
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads) == (768, 12, 12)
    assert config.intermediate_size == 3072 and config.hidden_act == "gelu"


@pytest.mark.parametrize("change, message", [
    ({"hidden_size": 30}, "divisible"),
    ({"hidden_act": "gelu_fast"}, "hidden_act"),
    ({"num_hidden_layers": 0}, "num_hidden_layers"),
    ({"vocab_size": -5}, "vocab_size"),
    ({"hidden_dropout_prob": 1.5}, "hidden_dropout_prob"),
    ({"intermediate_size": 3.5}, "intermediate_size"),
])
def test_invalid_values_are_rejected(change, message):
    with pytest.raises(ValueError, match=message):
        BertConfig.from_dict({**tiny_config_dict(), **change}, source="my_config.json")


def test_unknown_keys_are_reported():
    with pytest.raises(ValueError, match=r"my\.json.*unknown.*'num_hiden_layers'"):
        BertConfig.from_dict({**tiny_config_dict(), "num_hiden_layers": 2}, source="my.json")
    # The keys of google-research's Chinese / multilingual configs load (issue 38).
    assert BertConfig.from_dict({**tiny_config_dict(), "pooler_fc_size": 768}) == \
        BertConfig.from_dict(tiny_config_dict())


@pytest.mark.parametrize("key", ["vocab_size", "hidden_size", "num_hidden_layers",
                                 "num_attention_heads", "intermediate_size"])
def test_missing_shape_field_is_refused(key):
    # The original silently falls back to BERT-base's value (12 heads, ...): a model of
    # another shape than the checkpoint's.
    values = tiny_config_dict()
    del values[key]
    with pytest.raises(ValueError, match=f"missing required key.*`{key}`"):
        BertConfig.from_dict(values, source="my_config.json")


def test_file_errors_name_the_file(tmp_path):
    missing = tmp_path / "nope.json"
    with pytest.raises(FileNotFoundError, match="nope.json"):
        BertConfig.from_json_file(missing)
    broken = tmp_path / "broken.json"
    broken.write_text("{vocab_size: 3")
    with pytest.raises(ValueError, match=r"broken\.json.*not valid JSON"):
        BertConfig.from_json_file(broken)
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ValueError, match=r"binary\.json"):
        BertConfig.from_json_file(binary)


def test_shared_checkpoint_config_loads(shared_data_dir):
    config = BertConfig.from_json_file(
        shared_data_dir / "checkpoints/uncased_L-6_H-384_A-12/bert_config.json")
    assert (config.hidden_size, config.num_hidden_layers, config.vocab_size) == (384, 6, 30522)
