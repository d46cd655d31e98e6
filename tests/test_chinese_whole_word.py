"""Whole-word masking of Chinese (issue 27): the characters of a segmented word are
masked together, by create_pretraining_data (static masks) and by dynamic masking (the
records' `word_starts`), with words from a reference file (Hugging Face
run_chinese_ref.py's format; always tested) or from jieba (the `chinese` extra; skipped
without it). The masked share stays 15% +- 1 of the non-special tokens.
"""

import collections
import json
import random
import sys

import numpy as np
import pytest
import tensorflow as tf
from absl import app
from absl import flags

from bert_tf import extras
from bert_tf.text import cached_tokenizer
from bert_tf.text import rules
from bert_tf.train import masking
from bert_tf.train import records
from data_prep import create_pretraining_data
from data_prep import pretraining_instances as pi
from data_prep import pretraining_pipeline as pp
from data_prep import wikipedia
from data_prep import word_segmentation as ws

SEQ, PRED = 128, 20  # 19 of 125 non-special tokens of a full row: 15.2%
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
CJK = [chr(code) for code in range(0x4E00, 0x4E00 + 120)]


def joins(token):
    """The tests' trivial segmentation: a CJK character of even code point continues the
    word of the CJK character before it, so words have 1 to several characters (2 on
    average) and can be read back from the tokens of any instance."""
    return is_cjk_token(token) and ord(token) % 2 == 0


# ---------------------------------------------------------------- corpus, vocab, refs
def is_cjk_token(token):
    return len(token) == 1 and rules.is_chinese_char(ord(token))


def chinese_documents(seed, num_documents):
    """Documents of sentences of CJK characters, a few Latin words (## pieces in the
    char vocab) and commas, each ending in "。"."""
    rng = random.Random(seed)
    documents = []
    for _ in range(num_documents):
        sentences = []
        for _ in range(rng.randint(2, 8)):
            parts = []
            for _ in range(rng.randint(6, 40)):
                roll = rng.random()
                parts.append(" wiki " if roll < 0.04 else "，" if roll < 0.08
                             else rng.choice(CJK))
            sentences.append("".join(parts).strip() + "。")
        documents.append(sentences)
    return documents


def write_text(path, documents):
    """One sentence a line, a blank line between documents; returns the path."""
    path.write_text("\n\n".join("\n".join(d) for d in documents) + "\n", encoding="utf-8")
    return str(path)


def char_vocab(sentences):
    """[PAD] [UNK] [CLS] [SEP] [MASK], every first character of a word and the ##
    form of every other character (the tokenizer's words of `sentences`)."""
    basic = rules.BasicTokenizer(do_lower_case=True)
    firsts, pieces = set(), set()
    for sentence in sentences:
        for word in basic.tokenize(sentence):
            firsts.add(word[0])
            pieces.update("##" + char for char in word[1:])
    tokens = SPECIALS + sorted(firsts) + sorted(pieces)
    return {token: index for index, token in enumerate(tokens)}


def write_vocab(path, vocab):
    path.write_text("".join(token + "\n" for token in sorted(vocab, key=vocab.get)),
                    encoding="utf-8")
    return str(path)




def reference_lines(sentences, tokenizer, vocab):
    """run_chinese_ref.py's lines for the `joins` segmentation: per line the positions
    (in [CLS] tokens [SEP]) of the CJK characters that continue a word."""
    tokens_of = {index: token for token, index in vocab.items()}
    lines = []
    for ids in tokenizer.convert_texts_to_ids(sentences):
        tokens = [tokens_of[i] for i in ids]
        lines.append([position + 1 for position in range(1, len(tokens))
                      if joins(tokens[position]) and is_cjk_token(tokens[position - 1])])
    return lines


def write_reference(path, lines):
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return str(path)


class Corpus:
    """A Chinese corpus, its char vocab and its reference file, in `folder`."""

    def __init__(self, folder, documents):
        self.documents = documents
        self.sentences = [s for d in documents for s in d]
        self.vocab = char_vocab(self.sentences)
        self.vocab_file = write_vocab(folder / "vocab.txt", self.vocab)
        self.tokenizer = cached_tokenizer.CachedTokenizer(self.vocab, True)
        self.text = write_text(folder / "corpus.txt", documents)
        self.reference = write_reference(
            folder / "ref.txt", reference_lines(self.sentences, self.tokenizer, self.vocab))
        tokens_of = {index: token for token, index in self.vocab.items()}
        size = max(self.vocab.values()) + 1
        self.joining = np.zeros([size], bool)
        self.cjk = np.zeros([size], bool)
        self.piece = np.zeros([size], bool)
        for index, token in tokens_of.items():
            self.joining[index] = joins(token)
            self.cjk[index] = is_cjk_token(token)
            self.piece[index] = token.startswith("##")

    def word_starts(self, ids, valid):
        """bool [N, S]: candidates that start a word (`joins` and ## rules)."""
        special = np.isin(ids, [self.vocab["[CLS]"], self.vocab["[SEP]"]])
        candidate = valid & ~special
        previous = np.zeros_like(candidate)
        previous[:, 1:] = candidate[:, :-1]
        previous_cjk = np.zeros_like(candidate)
        previous_cjk[:, 1:] = self.cjk[ids[:, :-1]] & candidate[:, :-1]
        continues = candidate & ((self.joining[ids] & previous_cjk)
                                 | (self.piece[ids] & previous))
        return candidate & ~continues, candidate


def run_tool(tmp_path, corpus, name, input_file=None, num_workers=1, **overrides):
    """create_pretraining_data on the corpus' text (or `input_file`); returns the stats."""
    options = dict(max_seq_length=SEQ, max_predictions_per_seq=PRED, dupe_factor=2,
                   whole_word_masking=True)
    options.update(overrides)
    config = pp.PipelineConfig(
        input_files=[input_file or corpus.text], output_files=[str(tmp_path / name)],
        random_seed=5, chunk_chars=20_000, num_workers=num_workers)
    return pp.create_pretraining_data(corpus.tokenizer, pi.InstanceOptions(**options),
                                      config)


def read_features(path, spec):
    dataset = tf.data.TFRecordDataset([path]).map(lambda r: tf.io.parse_single_example(r, spec))
    return {k: v.numpy() for k, v in next(iter(dataset.batch(1_000_000))).items()}


def masked_positions(features):
    masked = np.zeros(features["input_ids"].shape, bool)
    rows, slots = np.nonzero(features["masked_lm_weights"])
    masked[rows, features["masked_lm_positions"][rows, slots]] = True
    return masked


def partly_masked(starts, candidate, masked):
    """(share of the words of 2+ tokens touched by a mask that are partly masked, their
    count, masked share of the candidates)."""
    num_rows, length = starts.shape
    word = np.cumsum(starts, axis=1) - 1
    key = (np.arange(num_rows)[:, None] * (length + 1) + word)[candidate]
    size = np.bincount(key, minlength=num_rows * (length + 1))
    hit = np.bincount(key, weights=masked[candidate], minlength=num_rows * (length + 1))
    touched = (size >= 2) & (hit > 0)
    partly = touched & (hit < size)
    return (partly.sum() / max(touched.sum(), 1), int(touched.sum()),
            masked[candidate].sum() / candidate.sum())


def static_figures(corpus, path, next_sentence=True):
    """partly_masked figures of the static masks of the records at `path`, by the
    corpus' words (read back from the original tokens of each instance)."""
    features = read_features(path, records.pretraining_features(
        SEQ, PRED, next_sentence=next_sentence))
    ids = features["input_ids"].copy()
    rows, slots = np.nonzero(features["masked_lm_weights"])
    ids[rows, features["masked_lm_positions"][rows, slots]] = features["masked_lm_ids"][rows, slots]
    starts, candidate = corpus.word_starts(ids, features["input_mask"] > 0)
    return partly_masked(starts, candidate, masked_positions(features))


# ---------------------------------------------------------------- the format and the hook
def test_reference_positions_count_cls_as_zero():
    """Hugging Face's example: 我喜欢你 -> [我, 喜, ##欢, 你], ref line [3]."""
    vocab = {token: index for index, token in enumerate(SPECIALS + list("我喜欢你"))}
    tokenizer = cached_tokenizer.CachedTokenizer(vocab, True)
    flat, _, _ = pp.tokenize_chunk(tokenizer, [["我喜欢你"]], collections.Counter(),
                                   boundaries=[ws.LineBoundaries("ref:1", (3,))])
    ids, marks = ws.split_marks(flat)
    assert ids.tolist() == [5, 6, 7, 8] and marks.tolist() == [False, False, True, False]


def test_segmenter_marks_keep_the_tokenizer_ids():
    """Text cut around CJK characters tokenizes as the whole sentence; a character is
    marked when the one before is of the same word."""
    sentence = "我喜欢 Wiki2019 的数据，café 很好。"
    words = ["我", "喜欢", " ", "Wiki2019", " ", "的", "数据", "，", "caf", "é", " ", "很好", "。"]
    vocab = char_vocab([sentence])
    tokenizer = cached_tokenizer.CachedTokenizer(vocab, True)
    plain, lengths, _ = pp.tokenize_chunk(tokenizer, [[sentence]], collections.Counter())
    flat, marked_lengths, _ = pp.tokenize_chunk(tokenizer, [[sentence]], collections.Counter(),
                                                segment=lambda text: words)
    ids, marks = ws.split_marks(flat)
    np.testing.assert_array_equal(ids, plain)
    np.testing.assert_array_equal(marked_lengths, lengths)
    tokens_of = {index: token for token, index in vocab.items()}
    assert [tokens_of[i] for i in ids[marks]] == ["欢", "据", "好"]
    with pytest.raises(ValueError, match="changed the text"):
        pp.tokenize_chunk(tokenizer, [[sentence]], collections.Counter(),
                          segment=lambda text: words[:-1])


# ---------------------------------------------------------------- static masks
def test_reference_file_masks_whole_words_at_15_percent(tmp_path):
    corpus = Corpus(tmp_path, chinese_documents(1, 150))
    figures = {}
    for with_reference in (False, True):
        name = f"static{with_reference}.tfrecord"
        run_tool(tmp_path, corpus, name,
                 word_boundaries_file=corpus.reference if with_reference else None)
        figures[with_reference] = static_figures(corpus, str(tmp_path / name))
    share, touched, masked_share = figures[True]
    assert share == 0.0 and touched > 500
    assert masked_share == pytest.approx(0.15, abs=0.01)
    assert figures[False][0] > 0.5  # ## pieces only: most words are cut
    assert figures[False][2] == pytest.approx(0.15, abs=0.01)


# ---------------------------------------------------------------- dynamic masks
def dynamic_figures(path, vocab, whole_word_features=True):
    """Dynamic whole-word masks over the records of `path`: partly_masked figures by
    the records' word_starts (with or without giving them to the masking)."""
    spec = records.pretraining_features(SEQ, PRED, masked=False, word_starts=True)
    raw = read_features(path, spec)
    options = masking.MaskingOptions.from_vocab(
        vocab, max_predictions_per_seq=PRED, whole_word_masking=True)
    features = {name: tf.constant(value) for name, value in raw.items()
                if whole_word_features or name != "word_starts"}
    out = masking.mask_features(features, options, tf.constant([3, 4], tf.int64))
    assert "word_starts" not in out
    out = {name: value.numpy() for name, value in out.items()}
    valid = raw["input_mask"] > 0
    special = np.isin(raw["input_ids"], [vocab["[CLS]"], vocab["[SEP]"]])
    candidate = valid & ~special
    starts = (raw["word_starts"] > 0) & candidate
    return partly_masked(starts, candidate, masked_positions(out)), raw


def test_masking_none_records_carry_word_starts_for_dynamic_masking(tmp_path):
    corpus = Corpus(tmp_path, chinese_documents(2, 150))
    run_tool(tmp_path, corpus, "plain.tfrecord", masking="none", dupe_factor=1)
    run_tool(tmp_path, corpus, "words.tfrecord", masking="none", dupe_factor=1,
             whole_word_masking=False, word_boundaries_file=corpus.reference)
    plain, words = str(tmp_path / "plain.tfrecord"), str(tmp_path / "words.tfrecord")
    assert not records.records_carry_word_starts(plain)
    assert records.records_carry_word_starts(words)
    example = tf.train.Example.FromString(next(iter(tf.data.TFRecordDataset(words))).numpy())
    assert sorted(example.features.feature) == ["input_ids", "input_mask",
                                                "next_sentence_labels", "segment_ids",
                                                "word_starts"]
    (share, touched, masked_share), raw = dynamic_figures(words, corpus.vocab)
    expected, candidate = corpus.word_starts(raw["input_ids"], raw["input_mask"] > 0)
    np.testing.assert_array_equal(raw["word_starts"] > 0,
                                  expected | ((raw["input_mask"] > 0) & ~candidate))
    assert share == 0.0 and touched > 500
    assert masked_share == pytest.approx(0.15, abs=0.01)
    (before, _, before_masked), _ = dynamic_figures(words, corpus.vocab, False)
    assert before > 0.5 and before_masked == pytest.approx(0.15, abs=0.01)
    # Records without the feature read as before (all word starts: ## pieces only).
    spec = records.pretraining_features(SEQ, PRED, masked=False, word_starts=True)
    assert (read_features(plain, spec)["word_starts"] == 1).all()
    options = masking.MaskingOptions.from_vocab(corpus.vocab, max_predictions_per_seq=PRED,
                                                whole_word_masking=True)
    batch = next(iter(records.pretraining_dataset(
        plain, SEQ, PRED, 8, False, masking_options=options, drop_remainder=False)))
    assert "word_starts" not in batch and batch["masked_lm_weights"].shape == (8, PRED)


def test_pretraining_dataset_reads_word_starts_with_whole_word_masking(tmp_path):
    corpus = Corpus(tmp_path, chinese_documents(3, 60))
    run_tool(tmp_path, corpus, "words.tfrecord", masking="none", dupe_factor=1,
             word_boundaries_file=corpus.reference)
    path = str(tmp_path / "words.tfrecord")
    raw = read_features(path, records.pretraining_features(SEQ, PRED, masked=False,
                                                           word_starts=True))
    options = masking.MaskingOptions.from_vocab(corpus.vocab, max_predictions_per_seq=PRED,
                                                whole_word_masking=True)
    dataset = records.pretraining_dataset(path, SEQ, PRED, 1000, False,
                                          masking_options=options, drop_remainder=False)
    out = {k: v.numpy() for k, v in next(iter(dataset)).items()}
    assert "word_starts" not in out
    valid = raw["input_mask"] > 0
    candidate = valid & ~np.isin(raw["input_ids"], [corpus.vocab["[CLS]"], corpus.vocab["[SEP]"]])
    share, touched, masked_share = partly_masked((raw["word_starts"] > 0) & candidate,
                                                 candidate, masked_positions(out))
    assert share == 0.0 and touched > 100
    assert masked_share == pytest.approx(0.15, abs=0.02)


# ---------------------------------------------------------------- bad input
def _cli(flag_list):
    flag_values = flags.FlagValues()
    create_pretraining_data.define_flags(flag_values)
    flag_values(["prog"] + flag_list)
    return create_pretraining_data.run(flag_values)


def test_bad_reference_files_are_refused_naming_file_and_line(tmp_path):
    corpus = Corpus(tmp_path, chinese_documents(4, 4))
    lines = open(corpus.reference, encoding="utf-8").read().splitlines()

    def refused(reference_lines, match, **overrides):
        path = tmp_path / "bad_ref.txt"
        path.write_text("".join(line + "\n" for line in reference_lines), encoding="utf-8")
        with pytest.raises(ValueError, match=match):
            run_tool(tmp_path, corpus, "bad.tfrecord", word_boundaries_file=str(path),
                     **overrides)
        assert not list(tmp_path.glob("bad.tfrecord*"))

    refused(["[1, 2"] + lines[1:], r"bad_ref.txt:1: expected a JSON list of token positions")
    refused(lines[:2] + ["[0]"] + lines[3:], r"bad_ref.txt:3: expected a JSON list")
    refused(lines[:1] + ["[999]"] + lines[2:], r"bad_ref.txt:2: position 999 is past the line")
    refused(lines[:-1], r"bad_ref.txt: fewer lines than the non-blank lines of .*corpus.txt")
    refused(lines + ["[]"], rf"bad_ref.txt:{len(lines) + 1}: more lines than the "
                            rf"{len(lines)} non-blank lines")
    refused(lines, r"finds words for whole-word masking, which is off: add "
                   r"--do_whole_word_mask", whole_word_masking=False)
    with pytest.raises(ValueError, match="give one source of word boundaries"):
        pi.InstanceOptions(whole_word_masking=True, word_segmenter="jieba",
                           word_boundaries_file=corpus.reference)
    with pytest.raises(ValueError, match="names 2 file.s. for 1 input file"):
        ws.boundaries_files(f"{corpus.reference},{corpus.reference}", [corpus.text])
    with pytest.raises(FileNotFoundError, match="word_boundaries_file .*nothing.txt not found"):
        ws.boundaries_files(str(tmp_path / "nothing.txt"), [corpus.text])
    # A skipped non-UTF-8 line would shift the pairing; wiki input has no lines to pair.
    broken = tmp_path / "broken.txt"
    broken.write_bytes("我喜欢你。\n".encode() + b"\xff\xfe\n")
    (tmp_path / "broken_ref.txt").write_text("[3]\n[]\n", encoding="utf-8")
    wiki = tmp_path / "wiki.json"
    wiki.write_text(json.dumps({"id": "1", "title": "t", "text": "t\n\n我喜欢你。"}) + "\n",
                    encoding="utf-8")
    output = tmp_path / "out.tfrecord"
    common = [f"--output_file={output}", f"--vocab_file={corpus.vocab_file}",
              "--do_whole_word_mask", "--dupe_factor=1"]
    with pytest.raises(ValueError, match="broken.txt: a line that is not UTF-8 was skipped"):
        _cli([f"--input_file={broken}", f"--word_boundaries_file={tmp_path / 'broken_ref.txt'}"]
             + common)
    with pytest.raises(ValueError, match="wiki.json is not one-sentence-per-line text"):
        _cli([f"--input_file={wiki}", f"--word_boundaries_file={corpus.reference}"] + common)
    with pytest.raises(ValueError, match="names 1 file.s. for 2 input file"):
        _cli([f"--input_file={corpus.text},{wiki}",
              f"--word_boundaries_file={corpus.reference}"] + common)
    assert not list(tmp_path.glob("out.tfrecord*"))


def test_a_segmenter_that_is_not_installed_names_the_extra(tmp_path, monkeypatch):
    corpus = Corpus(tmp_path, chinese_documents(5, 2))
    monkeypatch.setitem(sys.modules, "jieba", None)  # import jieba fails
    monkeypatch.setattr(ws, "_LOADED", {})
    with pytest.raises(extras.MissingExtra,
                       match=r"--word_segmenter=jieba needs jieba, which is not installed: "
                             r"install the chinese extra \(`pip install bert_tf\[chinese\]`"):
        _cli([f"--input_file={corpus.text}", f"--output_file={tmp_path / 'out.tfrecord'}",
              f"--vocab_file={corpus.vocab_file}", "--word_segmenter=jieba",
              "--do_whole_word_mask"])
    assert not list(tmp_path.glob("out.tfrecord*"))


@pytest.mark.extras("apache_beam")
def test_beam_refuses_a_reference_file(tmp_path):
    beam_pipeline = pytest.importorskip("data_prep.beam_pipeline")
    if beam_pipeline.beam is None:
        pytest.skip("apache-beam is not installed")
    corpus = Corpus(tmp_path, chinese_documents(6, 2))
    options = beam_pipeline.CreatePretrainingDataBeamOptions(
        input_file=corpus.text, output_file=str(tmp_path / "beam.tfrecord"),
        vocab_file=corpus.vocab_file, whole_word_masking=True,
        word_boundaries_file=corpus.reference)
    with pytest.raises(app.UsageError, match="--word_boundaries_file=.*use "
                                             "--word_segmenter=jieba here"):
        beam_pipeline.settings_from_options(options)


def test_full_sentence_rows_mask_whole_words_too(tmp_path):
    corpus = Corpus(tmp_path, chinese_documents(7, 100))
    run_tool(tmp_path, corpus, "full.tfrecord", next_sentence=False,
             word_boundaries_file=corpus.reference)
    share, touched, masked_share = static_figures(corpus, str(tmp_path / "full.tfrecord"),
                                                  next_sentence=False)
    assert share == 0.0 and touched > 500
    assert masked_share == pytest.approx(0.15, abs=0.01)


# ---------------------------------------------------------------- jieba
@pytest.mark.extras("jieba", "apache_beam")
def test_beam_with_jieba_makes_the_local_instances(tmp_path):
    pytest.importorskip("jieba")
    beam_pipeline = pytest.importorskip("data_prep.beam_pipeline")
    if beam_pipeline.beam is None:
        pytest.skip("apache-beam is not installed")
    corpus = Corpus(tmp_path, chinese_documents(8, 40))
    run_tool(tmp_path, corpus, "local.tfrecord", masking="none", dupe_factor=1,
             word_segmenter="jieba")
    options = beam_pipeline.CreatePretrainingDataBeamOptions(
        input_file=corpus.text, output_file=str(tmp_path / "beam.tfrecord"),
        vocab_file=corpus.vocab_file, max_seq_length=SEQ, max_predictions_per_seq=PRED,
        masking="none", dupe_factor=1, random_seed=5, chunk_chars=20_000,
        word_segmenter="jieba")
    beam_pipeline.run_pipeline(beam_pipeline.settings_from_options(options),
                               beam_pipeline.PipelineOptions([]))
    read = lambda path: collections.Counter(r.numpy() for r in tf.data.TFRecordDataset(path))
    local = read(str(tmp_path / "local.tfrecord"))
    assert sum(local.values()) > 20 and local == read(str(tmp_path / "beam.tfrecord"))


@pytest.mark.extras("jieba")
def test_jieba_marks_the_characters_of_its_words():
    jieba = pytest.importorskip("jieba")
    sentence = "数学是利用符号语言研究数量、结构、变化以及空间等概念的一门学科。"
    vocab = char_vocab([sentence])
    tokenizer = cached_tokenizer.CachedTokenizer(vocab, True)
    flat, _, _ = pp.tokenize_chunk(tokenizer, [[sentence]], collections.Counter(),
                                   segment=ws.load_segmenter("jieba"))
    ids, marks = ws.split_marks(flat)
    tokens_of = {index: token for token, index in vocab.items()}
    words, word = [], ""
    for token, mark in zip((tokens_of[i] for i in ids), marks):
        if not mark and word:
            words.append(word)
            word = ""
        word += token
    words.append(word)
    assert words == jieba.lcut(sentence)  # one CJK word a word, punctuation alone


@pytest.mark.extras("jieba")
def test_jieba_whole_words_static_and_in_records(tmp_path):
    pytest.importorskip("jieba")
    corpus = Corpus(tmp_path, [["数学是利用符号语言研究数量、结构、变化以及空间等概念的一门学科。",
                                "数学家们拓展这些概念，为了公式化新的猜想。"]] * 40)
    stats = run_tool(tmp_path, corpus, "jieba.tfrecord", masking="none", dupe_factor=1,
                     word_segmenter="jieba")
    assert stats["options"]["word_segmenter"] == "jieba"
    (share, touched, masked_share), _ = dynamic_figures(str(tmp_path / "jieba.tfrecord"),
                                                         corpus.vocab)
    assert share == 0.0 and touched > 50
    assert masked_share == pytest.approx(0.15, abs=0.02)


# ---------------------------------------------------------------- the zhwiki slice
def zhwiki_corpus(shared_data_dir, folder):
    """The WikiExtractor zhwiki slice as text (each line ending in a non-CJK character,
    so that a word never spans two lines), with its char vocab and reference file."""
    path = shared_data_dir / "wiki" / "zhwiki_wikiextractor_json_wiki_00"
    if not path.exists():
        pytest.skip(f"{path} not found")
    documents = [[s if not rules.is_chinese_char(ord(s[-1])) else s + "。" for s in d]
                 for d in wikipedia.iter_documents(str(path))]
    corpus = Corpus(folder, documents)
    corpus.input_file = str(path)
    return corpus


@pytest.mark.slow
def test_zhwiki_reference_file_static_and_dynamic(tmp_path, shared_data_dir):
    corpus = zhwiki_corpus(shared_data_dir, tmp_path)
    for with_reference in (False, True):
        name = f"static{with_reference}.tfrecord"
        run_tool(tmp_path, corpus, name, dupe_factor=1,
                 word_boundaries_file=corpus.reference if with_reference else None)
        share, touched, masked_share = static_figures(corpus, str(tmp_path / name))
        print(f"zhwiki, reference file, static, {with_reference=}: partly masked "
              f"{share:.4f} of {touched} words, masked share {masked_share:.4f}")
        assert masked_share == pytest.approx(0.15, abs=0.01)
        assert share == 0.0 if with_reference else share > 0.5
    run_tool(tmp_path, corpus, "dynamic.tfrecord", masking="none", dupe_factor=1,
             word_boundaries_file=corpus.reference)
    (share, touched, masked_share), _ = dynamic_figures(str(tmp_path / "dynamic.tfrecord"),
                                                         corpus.vocab)
    print(f"zhwiki, reference file, dynamic: partly masked {share:.4f} of {touched} words, "
          f"masked share {masked_share:.4f}")
    assert share == 0.0 and masked_share == pytest.approx(0.15, abs=0.01)


@pytest.mark.extras("jieba")
@pytest.mark.slow
def test_zhwiki_jieba_static_and_dynamic(tmp_path, shared_data_dir):
    """Jieba on the WikiExtractor slice itself (sentences split in the workers). The
    figures of docs/data_prep.md: the share of jieba's multi-character words touched by
    a mask that are partly masked, with ## pieces only and with jieba's words."""
    pytest.importorskip("jieba")
    corpus = zhwiki_corpus(shared_data_dir, tmp_path)
    segment = ws.load_segmenter("jieba")
    tokenized = pp.tokenize_chunk(corpus.tokenizer, corpus.documents, collections.Counter(),
                                  segment)
    chunk = pp.corpus_from_tokenized(*tokenized)
    vocab_ids = pi.VocabIds.from_vocab(corpus.vocab)
    options = pi.InstanceOptions(max_seq_length=SEQ, max_predictions_per_seq=PRED,
                                 dupe_factor=1, whole_word_masking=True,
                                 word_segmenter="jieba")
    packed = pi.build_chunk_instances(chunk, options, vocab_ids, 12345, 0).packed
    ids, marks = ws.split_marks(packed.input_ids)
    valid = np.arange(SEQ)[None] < packed.lengths[:, None]
    candidate = valid & ~np.isin(ids, [vocab_ids.cls_id, vocab_ids.sep_id])
    previous = np.zeros_like(candidate)
    previous[:, 1:] = candidate[:, :-1]
    starts = candidate & ~(marks & previous)  # jieba's words
    for with_words in (False, True):
        rows = packed if with_words else packed._replace(input_ids=ids)
        masked = pi.mask_instances(rows, options, vocab_ids, np.random.default_rng(1))
        share, touched, masked_share = partly_masked(
            starts, candidate, masked_positions(masked._asdict()))
        print(f"zhwiki, jieba, static, {with_words=}: partly masked {share:.4f} of "
              f"{touched} words, masked share {masked_share:.4f}")
        assert masked_share == pytest.approx(0.15, abs=0.01)
        assert share == 0.0 if with_words else share > 0.8
    stats = run_tool(tmp_path, corpus, "jieba.tfrecord", input_file=corpus.input_file,
                     num_workers=2, masking="none", dupe_factor=1, word_segmenter="jieba")
    assert stats["documents"] == len(corpus.documents)
    (share, touched, masked_share), _ = dynamic_figures(str(tmp_path / "jieba.tfrecord"),
                                                         corpus.vocab)
    print(f"zhwiki, jieba, dynamic: partly masked {share:.4f} of {touched} words, "
          f"masked share {masked_share:.4f}")
    assert share == 0.0 and masked_share == pytest.approx(0.15, abs=0.01)
