"""create_pretraining_data output pinned: the same input, flags and seed give the same records.

The digests were computed with the tool as it was before its speed-up (TensorFlow
tokenizer and TFRecord writer, commit 5cd73c0); any change that alters one instance, its
order, or a byte of the TFRecord framing fails here. Two corpora: a synthetic one over the
tiny test vocab (word pieces, whole-word masking) and real English and Chinese Wikipedia
text with the real uncased vocab plus lines of characters the tokenizer treats specially.
"""

import gzip
import hashlib
import json
import re
import subprocess
import sys

import pytest

from test_create_pretraining_data import VOCAB, run_tool, write_corpus  # noqa: F401

# Characters the BERT rules treat specially: controls and U+0000/U+FFFD (dropped),
# Zs/Zl spaces, CJK (isolated), accents (stripped when uncased), final sigma, a word
# over 200 characters, special tokens typed in text, fullwidth and Hangul.
TRICKY_LINES = [
    "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00c5ngstr\u00f6m \u0130stanbul stra\u00dfe.",
    "ab\x00cd ef\x01gh ij\ufffdkl mn\u200bop qr\u00adst uv\x7fwx.",
    "tab\there\u00a0nbsp\u2003em\u2028line\u2029para\x0bvt\x0cff\x1cfs\x85nel end.",
    "\u4e2d\u6587\u5b57abc\u4e2d def\u3400\U00020000 \uf900 mixed\u6587text.",
    "\u039f\u0394\u03a5\u03a3\u03a3\u0395\u03a5\u03a3 \u03a3 \u0391\u03a3. \u1f08\u03b8\u03ae\u03bd\u03b1\u03b9.",
    "x" * 201 + " " + "y" * 200 + " short.",
    "[MASK] [CLS]text [SEP] [UNK]x [PAD].",
    "\uff21\uff22\uff23\uff0c\uff11\uff12\uff13 \ud55c\uad6d\uc5b4 \u0e20\u0e32\u0e29\u0e32 \U0001f600 \u2460\u00b2.",
    "don't (it's) \"quoted\" --dash-- e.g. U.S.A. 3.14 $5 100% a/b c\\d #tag @me.",
]


def _text_corpus(path, shared_data_dir):
    """Wikipedia paragraphs (English and Chinese) as one-sentence-per-line text."""
    wiki = shared_data_dir / "wiki"
    documents = []
    english = (wiki / "enwiki_wikiextractor_wiki_00").read_text(encoding="utf-8")
    for block in re.findall(r"<doc [^>]*>\n(.*?)</doc>", english, re.S)[:40]:
        lines = [line for line in block.split("\n")[1:] if line.strip()]
        sentences = [s for line in lines for s in re.split(r"(?<=\.) ", line)]
        if sentences:
            documents.append(sentences)
    with open(wiki / "zhwiki_wikiextractor_json_wiki_00", encoding="utf-8") as reader:
        for line, _ in zip(reader, range(30)):
            text = json.loads(line)["text"]
            sentences = [s for s in re.split(r"(?<=\u3002)|\n", text) if s.strip()]
            if sentences:
                documents.append(sentences)
    documents.insert(len(documents) // 2, TRICKY_LINES)
    path.write_text("\n\n".join("\n".join(d) for d in documents) + "\n", encoding="utf-8")
    return str(path)


def _digest(paths, compressed=False):
    hasher = hashlib.sha256()
    for path in paths:
        with (gzip.open if compressed else open)(path, "rb") as reader:
            hasher.update(reader.read())
    return hasher.hexdigest()


def test_synthetic_corpus_output_is_pinned(tmp_path, vocab_file):
    corpus = write_corpus(tmp_path / "corpus.txt", 80, seed=11, pieces=True)
    digests = []
    for whole_word in (False, True):
        paths, stats = run_tool(tmp_path, vocab_file, corpus, name=f"w{whole_word}.tfrecord",
                                shards=2, chunk_chars=4000, whole_word_masking=whole_word)
        digests.append((stats["instances"], _digest(paths)))
    gzipped, _ = run_tool(tmp_path, vocab_file, corpus, name="gz.tfrecord", shards=2,
                          chunk_chars=4000, gzip=True)
    assert _digest(gzipped, compressed=True) == digests[0][1]
    assert digests == [
        (PINNED_SYNTHETIC[0][0], PINNED_SYNTHETIC[0][1]),
        (PINNED_SYNTHETIC[1][0], PINNED_SYNTHETIC[1][1])]


def test_command_with_workers_gives_the_pinned_output(tmp_path, vocab_file):
    """The command (no TensorFlow loaded: forked workers) writes the same records."""
    corpus = write_corpus(tmp_path / "corpus.txt", 80, seed=11, pieces=True)
    output = tmp_path / "cli.tfrecord"
    subprocess.run(
        [sys.executable, "-m", "data_prep.create_pretraining_data", f"--input_file={corpus}",
         f"--output_file={output}", f"--vocab_file={vocab_file}", "--num_output_shards=2",
         "--max_seq_length=64", "--max_predictions_per_seq=10", "--dupe_factor=2",
         "--random_seed=7", "--chunk_chars=4000", "--num_workers=2"],
        check=True, capture_output=True)
    shards = [f"{output}-0000{i}-of-00002" for i in range(2)]
    assert _digest(shards) == PINNED_SYNTHETIC[0][1]


def test_real_text_output_is_pinned(tmp_path, shared_data_dir):
    vocab = str(shared_data_dir / "checkpoints" / "uncased_L-6_H-384_A-12" / "vocab.txt")
    corpus = _text_corpus(tmp_path / "wiki.txt", shared_data_dir)
    paths, stats = run_tool(tmp_path, vocab, corpus, name="real.tfrecord", shards=3,
                            chunk_chars=60_000, max_seq_length=128,
                            max_predictions_per_seq=20, dupe_factor=2)
    assert (stats["instances"], stats["input_tokens"], _digest(paths)) == PINNED_REAL


PINNED_SYNTHETIC = [
    (526, "fceb4bb5e6aa0baf934596bc2e7c0fdce461f796aced592c35c2d7f3ed18ee40"),
    (526, "e79237931aa22a22969f779c48026bf7699e21b9bc8c9a57a6a9930f2fd7b80b")]
PINNED_REAL = (3515, 172444,
               "b75e3ad52f630a6f499d0af910835028318b954cb4c33a8b86c6012a6420f3b8")
