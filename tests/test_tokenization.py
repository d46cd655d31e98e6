"""Tokenizer tests: golden token lists written by hand, bad input, fast path agreement.

The golden lists follow the original google-research/bert rules by hand; the Wikipedia
tests compare against tests/reference_tokenizer.py, an independent implementation.
"""

import json
import re
import sys
import unicodedata

import pytest

from bert_tf.text import tokenization
from bert_tf.text.rules import convert_to_unicode, printable_text
from bert_tf.text.vocab import load_vocab
from bert_tf.text import vocab as vocab_files

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
import reference_tokenizer  # pylint: disable=wrong-import-position

VOCAB = """[PAD] [UNK] [CLS] [SEP] [MASK] the The quick brown fox un ##want ##ed runn ##ing
, . ! ? [ ] $ 5 mask sep hello world cafe Café naive naïve 中 国 人 ， ος σο
² ##² a ##a é ##é
istanbul i ##stanbul ##y x y ##x e ##e""".split()

GOLDEN = [  # (text, uncased tokens, cased tokens)
    ("", [], []),
    (" \t\n ", [], []),
    ("unwanted running", ["un", "##want", "##ed", "runn", "##ing"],
     ["un", "##want", "##ed", "runn", "##ing"]),
    ("Café NAÏVE naïve", ["cafe", "naive", "naive"], ["Café", "[UNK]", "naïve"]),
    ("The quick", ["the", "quick"], ["The", "quick"]),
    ("hello中国人world", ["hello", "中", "国", "人", "world"],
     ["hello", "中", "国", "人", "world"]),
    ("中，国", ["中", "，", "国"], ["中", "，", "国"]),  # fullwidth comma stays fullwidth
    ("hello 🙂 world", ["hello", "[UNK]", "world"], ["hello", "[UNK]", "world"]),
    ("hello🙂", ["[UNK]"], ["[UNK]"]),  # one word, unmatched rest: the whole word
    ("hel\x00lo\u200b wor\x07ld\ufffd", ["hello", "world"], ["hello", "world"]),
    ("hello\tworld\nfox\u3000the", ["hello", "world", "fox", "the"],
     ["hello", "world", "fox", "the"]),
    ("fox Привет", ["fox", "[UNK]"], ["fox", "[UNK]"]),
    ("foxy!?", ["fox", "##y", "!", "?"], ["fox", "##y", "!", "?"]),
    ("$5.", ["$", "5", "."], ["$", "5", "."]),
    ("hello [MASK] world", ["hello", "[", "mask", "]", "world"],
     ["hello", "[", "[UNK]", "]", "world"]),
    ("[SEP]", ["[", "sep", "]"], ["[", "[UNK]", "]"]),
    ("fox²", ["fox", "##²"], ["fox", "##²"]),  # not "2": no compatibility folding
    ("ΟΣ ΣΟ", ["ος", "σο"], ["[UNK]", "[UNK]"]),  # final sigma, as str.lower
    ("İstanbul", ["istanbul"], ["[UNK]"]),
    ("hello—world", ["hello", "[UNK]", "world"], ["hello", "[UNK]", "world"]),
    ("a" * 200, ["a"] + ["##a"] * 199, ["a"] + ["##a"] * 199),
    ("a" * 201, ["[UNK]"], ["[UNK]"]),
    ("é" * 150, ["e"] + ["##e"] * 149, ["é"] + ["##é"] * 149),  # 300 bytes, 150 characters
    ("x" + "é" * 201, ["[UNK]"], ["[UNK]"]),
    ("e\u0301" * 150, ["e"] + ["##e"] * 149, ["[UNK]"]),  # 150 characters once uncased
]


@pytest.fixture(scope="module")
def tokenizers(vocab_file):
    return {lower: tokenization.FullTokenizer(vocab_file, do_lower_case=lower)
            for lower in (True, False)}


@pytest.mark.parametrize("text,uncased,cased", GOLDEN)
def test_golden_tokens(tokenizers, text, uncased, cased):
    assert tokenizers[True].tokenize(text) == uncased
    assert tokenizers[False].tokenize(text) == cased
    assert reference_tokenizer.reference_tokenize(text, set(VOCAB), True) == uncased
    assert reference_tokenizer.reference_tokenize(text, set(VOCAB), False) == cased


def test_golden_tokens_batch(tokenizers):
    texts = [text for text, _, _ in GOLDEN]
    assert tokenizers[True].tokenize_batch(texts) == [u for _, u, _ in GOLDEN]
    assert tokenizers[False].tokenize_batch(texts) == [c for _, _, c in GOLDEN]


def test_keep_special_tokens(vocab_file):
    text = "hello [MASK] world[SEP][CLS]fox [mask]"
    expected = ["hello", "[MASK]", "world", "[SEP]", "[CLS]", "fox", "[", "mask", "]"]
    assert tokenization.FullTokenizer(vocab_file, False, True).tokenize(text) == expected
    for lower in (True,):  # the batch path once: building a graph is slow on a busy CI box
        tokenizer = tokenization.FullTokenizer(vocab_file, lower, keep_special_tokens=True)
        assert tokenizer.tokenize(text) == expected
        assert tokenizer.tokenize_batch([text, "", "[MASK]"]) == [expected, [], ["[MASK]"]]
        tokens, starts, ends = tokenizer.tokenize_with_offsets(text)
        assert [text[s:e] for s, e in zip(starts, ends)][:6] == [
            "hello", "[MASK]", "world", "[SEP]", "[CLS]", "fox"]
        ids, batch_starts, batch_ends = tokenizer.tokenize_batch_with_offsets([text])
        assert ids[0] == tokenizer.convert_tokens_to_ids(tokens)
        assert (batch_starts[0], batch_ends[0]) == (starts, ends)


def test_offsets_golden(tokenizers):
    text = "Café naïve, 中国 unwanted"
    tokens, starts, ends = tokenizers[True].tokenize_with_offsets(text)
    assert tokens == ["cafe", "naive", ",", "中", "国", "un", "##want", "##ed"]
    assert starts == [0, 5, 10, 12, 13, 15, 17, 21]
    assert ends == [4, 10, 11, 13, 14, 17, 21, 23]
    ids, batch_starts, batch_ends = tokenizers[True].tokenize_batch_with_offsets([text, ""])
    assert ids == [tokenizers[True].convert_tokens_to_ids(tokens), []]
    assert batch_starts == [starts, []] and batch_ends == [ends, []]


def test_offsets_agree_with_tokens(tokenizers):
    texts = [text for text, _, _ in GOLDEN] + ["x\x00y\u0301z ΑΣ. 한국 ǅ e\u0301 ﬁ"]
    for tokenizer in tokenizers.values():
        ids, starts, ends = tokenizer.tokenize_batch_with_offsets(texts)
        for text, row_ids, row_starts, row_ends in zip(texts, ids, starts, ends):
            tokens, py_starts, py_ends = tokenizer.tokenize_with_offsets(text)
            assert tokens == tokenizer.tokenize(text)
            assert row_ids == tokenizer.convert_tokens_to_ids(tokens)
            assert (row_starts, row_ends) == (py_starts, py_ends), text
            assert all(0 <= s < e <= len(text) for s, e in zip(py_starts, py_ends))


def test_ids_round_trip(tokenizers):
    tokenizer = tokenizers[True]
    tokens = tokenizer.tokenize("unwanted running")
    ids = tokenizer.convert_tokens_to_ids(tokens)
    assert ids == [VOCAB.index(t) for t in tokens]
    assert tokenizer.convert_ids_to_tokens(ids) == tokens
    assert tokenizer.convert_texts_to_ids(["unwanted running", ""]) == [ids, []]
    assert tokenizer.do_lower_case and tokenizer.inv_vocab[ids[0]] == "un"
    assert list(tokenizer.vocab) == VOCAB


def test_load_vocab_strips_and_indexes(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_bytes(b"[PAD]\r\n[UNK]\n  hello \nworld")
    assert list(load_vocab(str(path)).items()) == [
        ("[PAD]", 0), ("[UNK]", 1), ("hello", 2), ("world", 3)]


@pytest.mark.parametrize("content,message", [
    (b"", "vocab file is empty: {path}"),
    (b"[PAD]\nhello\n", "vocab file {path} has no [UNK] token"),
    (b"[UNK]\nhello\nworld\nhello\n",
     "{path}:4: duplicate vocab entry 'hello', first seen on line 2"),
    (b"[UNK]\nhello\nworld\nhe\xffllo\n", "{path}:4: vocab line is not valid UTF-8"),
])
def test_bad_vocab(tmp_path, content, message):
    path = tmp_path / "vocab.txt"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=re.escape(message.format(path=path))):
        tokenization.FullTokenizer(str(path))
    with pytest.raises(ValueError, match=re.escape(str(path))):
        tokenization.BertTokenizerLayer(str(path))


def test_missing_vocab(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        tokenization.FullTokenizer(str(tmp_path / "nope.txt"))


def test_non_utf8_text(tokenizers):
    with pytest.raises(ValueError, match="not valid UTF-8"):
        tokenizers[True].tokenize(b"caf\xe9")
    assert tokenizers[True].tokenize("café".encode("utf-8")) == ["cafe"]
    with pytest.raises(ValueError, match="text 1 of the batch"):
        tokenizers[True].tokenize_batch(["fine", b"caf\xe9"])
    assert printable_text(b"caf\xc3\xa9") == "café"
    assert convert_to_unicode(b"x") == "x"


def test_code_point_sample_agrees(tokenizers):
    """Every code point in a sample, between letters and alone: fast path == original."""
    code_points = [cp for cp in list(range(0x3000)) + list(range(0x3000, 0x110000, 211))
                   if unicodedata.category(chr(cp)) != "Cs"]
    texts = [f"x{chr(cp)}y {chr(cp)}" for cp in code_points]
    for tokenizer in tokenizers.values():
        expected = [tokenizer.tokenize(text) for text in texts]
        assert tokenizer.tokenize_batch(texts) == expected  # routed: mostly the fast path
        exact_ids, _, _ = tokenizer.tokenize_batch_with_offsets(texts)  # code-point path
        assert exact_ids == [tokenizer.convert_tokens_to_ids(tokens) for tokens in expected]


def test_layer_in_saved_model(vocab_file, tokenizers, tmp_path):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    texts = [text for text, _, _ in GOLDEN]
    layer = tokenization.BertTokenizerLayer(vocab_file, do_lower_case=True)
    module = tf.Module()
    module.tokenizer = layer
    module.tokenize = tf.function(lambda t: layer(t),
                                  input_signature=[tf.TensorSpec([None], tf.string)])
    tf.saved_model.save(module, str(tmp_path / "model"))
    asset = tmp_path / "model" / "assets" / "vocab.txt"
    assert asset.read_text(encoding="utf-8").split() == VOCAB
    loaded = tf.saved_model.load(str(tmp_path / "model"))
    expected = [tokenizers[True].convert_tokens_to_ids(u) for _, u, _ in GOLDEN]
    assert layer(tf.constant(texts)).to_list() == expected
    assert loaded.tokenize(tf.constant(texts)).to_list() == expected
    # Bytes that are not UTF-8 are dropped, as the original's errors="ignore" decoding does.
    hello = VOCAB.index("hello")
    assert loaded.tokenize(tf.constant([b"hel\xfflo", b"\xe4\xb8"])).to_list() == [[hello], []]
    config = layer.get_config()
    assert (config["vocab_file"], config["do_lower_case"], config["keep_special_tokens"]) == (
        vocab_file, True, False)
    assert tokenization.BertTokenizerLayer.from_config(config).get_config() == config


REAL_VOCAB = "checkpoints/uncased_L-6_H-384_A-12/vocab.txt"


def wikipedia_lines(data_dir, max_bytes=None):
    """Paragraphs of the WikiExtractor samples: English (tags stripped) and Chinese (JSON)."""
    english = (data_dir / "wiki" / "enwiki_wikiextractor_wiki_00").read_text(encoding="utf-8")
    chinese = [json.loads(line)["text"] for line in
               (data_dir / "wiki" / "zhwiki_wikiextractor_json_wiki_00").open(encoding="utf-8")]
    lines = []
    for text in (re.sub(r"</?doc[^>]*>", "", english), "\n".join(chinese)):
        text = text[:max_bytes] if max_bytes else text
        lines.extend(line for line in text.split("\n") if line.strip())
    return lines


def _real_tokenizer(data_dir, lower):
    vocab_file = data_dir / REAL_VOCAB
    if not vocab_file.is_file():
        pytest.skip(f"{vocab_file} not found")
    return tokenization.FullTokenizer(str(vocab_file), do_lower_case=lower)


def _check_agreement(tokenizer, lines):
    vocab = set(tokenizer.vocab)
    expected = [reference_tokenizer.reference_tokenize(line, vocab, tokenizer.do_lower_case)
                for line in lines]
    assert sum(map(len, expected)) > 10 * len(lines)
    fast = tokenizer.tokenize_batch(lines)  # the routed fast path
    mismatched = [i for i, (a, b) in enumerate(zip(fast, expected)) if a != b]
    assert not mismatched, (lines[mismatched[0]][:200], fast[mismatched[0]][:50])
    ids, _, _ = tokenizer.tokenize_batch_with_offsets(lines)  # the exact code-point path
    assert ids == [tokenizer.convert_tokens_to_ids(tokens) for tokens in expected]


@pytest.mark.parametrize("lower", [True, False])
def test_wikipedia_sample_agrees_with_reference(shared_data_dir, lower):
    tokenizer = _real_tokenizer(shared_data_dir, lower)
    _check_agreement(tokenizer, wikipedia_lines(shared_data_dir, max_bytes=30_000))


@pytest.mark.slow
@pytest.mark.parametrize("lower", [True, False])
def test_wikipedia_full_agrees_with_reference(shared_data_dir, lower):
    mwparserfromhell = pytest.importorskip("mwparserfromhell")
    import bz2  # pylint: disable=import-outside-toplevel
    import xml.etree.ElementTree as ElementTree  # pylint: disable=import-outside-toplevel
    tokenizer = _real_tokenizer(shared_data_dir, lower)
    lines = wikipedia_lines(shared_data_dir)
    for name in ("enwiki-sample-pages-articles.xml.bz2", "bgwiki-sample-pages-articles.xml.bz2"):
        with bz2.open(shared_data_dir / "wiki" / name) as stream:
            for _, element in ElementTree.iterparse(stream):
                if element.tag.endswith("}text") and element.text:
                    plain = mwparserfromhell.parse(element.text).strip_code()
                    lines.extend(line for line in plain.split("\n") if line.strip())
    _check_agreement(tokenizer, lines)


@pytest.mark.slow
def test_every_code_point_agrees(tokenizers):
    """All 1,112,064 code points, between letters and alone: fast path == original."""
    code_points = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
    for tokenizer in tokenizers.values():
        for start in range(0, len(code_points), 100_000):
            texts = [f"x{chr(cp)}y {chr(cp)}" for cp in code_points[start:start + 100_000]]
            assert tokenizer.tokenize_batch(texts) == [tokenizer.tokenize(t) for t in texts]


def test_random_mixtures_agree(tokenizers):
    """Seeded random strings of tricky characters: every path gives the same answer."""
    import random  # pylint: disable=import-outside-toplevel
    alphabet = list("axyéfoxhello ΣσςΑΟ.'\u00ad\u0301\u0316\u200b\x00\x07\t\n\u3000"
                    "\u2028İ가中，…²ﬁǅ-#[]\U0001d165\U0001d16d\u1b44🙂\ufffd\u0345")
    alphabet += ["[MASK]", " the "]
    rng = random.Random(1234)
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
             for _ in range(600)]
    for tokenizer in tokenizers.values():
        expected = [reference_tokenizer.reference_tokenize(t, set(VOCAB), tokenizer.do_lower_case)
                    for t in texts]
        assert [tokenizer.tokenize(t) for t in texts] == expected
        assert tokenizer.tokenize_batch(texts) == expected
        ids, starts, ends = tokenizer.tokenize_batch_with_offsets(texts)
        with_offsets = [tokenizer.tokenize_with_offsets(t) for t in texts]
        assert [tokens for tokens, _, _ in with_offsets] == expected
        assert ids == [tokenizer.convert_tokens_to_ids(tokens) for tokens in expected]
        assert starts == [s for _, s, _ in with_offsets]
        assert ends == [e for _, _, e in with_offsets]


def test_case_mismatch_is_refused_by_vocab_and_by_released_folder_name():
    uncased = [f"piece{i}" for i in range(1000)]
    cased = uncased[:980] + [f"Piece{i}" for i in range(20)]  # 2% capitalised
    assert vocab_files.vocab_case(uncased) == "uncased"
    assert vocab_files.vocab_case(cased) == "cased"
    assert vocab_files.vocab_case(uncased[:999]) is None  # too small to tell
    assert vocab_files.vocab_case(uncased[:995] + ["Paris"] * 5) is None  # mixed: no verdict
    with pytest.raises(ValueError, match="do_lower_case=false does not fit vocab_file v.txt: "
                                         "it is uncased; pass --do_lower_case=true"):
        vocab_files.check_case_matches(False, uncased, "v.txt")
    with pytest.raises(ValueError, match="do_lower_case=true does not fit vocab_file v.txt: "
                                         "it is cased"):
        vocab_files.check_case_matches(True, cased, "v.txt")
    vocab_files.check_case_matches(True, uncased, "v.txt", "/m/uncased_L-12_H-768_A-12")
    with pytest.raises(ValueError, match="does not fit init_checkpoint "
                                         "/m/cased_L-12_H-768_A-12/bert_model.ckpt: it is cased"):
        vocab_files.check_case_matches(True, uncased[:10], "v.txt",
                                       "/m/cased_L-12_H-768_A-12/bert_model.ckpt")
