"""create_pretraining_data: the original algorithm, record layout, statistics, scale."""

import json
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.text import tokenization
from bert_tf.train import records
from data_prep import pretraining_instances as pi
from data_prep import pretraining_pipeline as pp
from data_prep import record_writing
from data_prep import wikipedia
from flag_contract import check_every_flag_reaches_options
from harness import SPECIAL_TOKENS

WORDS = [f"w{chr(97 + i)}{chr(97 + j)}" for i in range(6) for j in range(10)]  # 60 words
PIECES = ["##x", "##y", "##z"]
VOCAB = SPECIAL_TOKENS + WORDS + PIECES  # the conftest vocab_file fixture writes it
SEQ, PRED = 64, 10


# ---------------------------------------------------------------- the original code
def original_truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
    """google-research/bert truncate_seq_pair, verbatim."""
    while True:
        total_length = len(tokens_a) + len(tokens_b)
        if total_length <= max_num_tokens:
            break
        trunc_tokens = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        assert len(trunc_tokens) >= 1
        if rng.random() < 0.5:
            del trunc_tokens[0]
        else:
            trunc_tokens.pop()


def original_pairs_from_document(all_documents, document_index, max_seq_length,
                                 short_seq_prob, rng):
    """google-research/bert create_instances_from_document up to masking, verbatim."""
    document = all_documents[document_index]
    max_num_tokens = max_seq_length - 3
    target_seq_length = max_num_tokens
    if rng.random() < short_seq_prob:
        target_seq_length = rng.randint(2, max_num_tokens)
    instances = []
    current_chunk = []
    current_length = 0
    i = 0
    while i < len(document):
        segment = document[i]
        current_chunk.append(segment)
        current_length += len(segment)
        if i == len(document) - 1 or current_length >= target_seq_length:
            if current_chunk:
                a_end = 1
                if len(current_chunk) >= 2:
                    a_end = rng.randint(1, len(current_chunk) - 1)
                tokens_a = []
                for j in range(a_end):
                    tokens_a.extend(current_chunk[j])
                tokens_b = []
                if len(current_chunk) == 1 or rng.random() < 0.5:
                    is_random_next = True
                    target_b_length = target_seq_length - len(tokens_a)
                    for _ in range(10):
                        random_document_index = rng.randint(0, len(all_documents) - 1)
                        if random_document_index != document_index:
                            break
                    random_document = all_documents[random_document_index]
                    random_start = rng.randint(0, len(random_document) - 1)
                    for j in range(random_start, len(random_document)):
                        tokens_b.extend(random_document[j])
                        if len(tokens_b) >= target_b_length:
                            break
                    num_unused_segments = len(current_chunk) - a_end
                    i -= num_unused_segments
                else:
                    is_random_next = False
                    for j in range(a_end, len(current_chunk)):
                        tokens_b.extend(current_chunk[j])
                original_truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
                instances.append((tokens_a, tokens_b, is_random_next))
            current_chunk = []
            current_length = 0
        i += 1
    return instances


# ---------------------------------------------------------------- fixtures
def random_documents(seed, num_documents, min_sentences=1, max_sentences=12,
                     min_len=1, max_len=30):
    rng = random.Random(seed)
    return [[[rng.randrange(5, 70) for _ in range(rng.randint(min_len, max_len))]
             for _ in range(rng.randint(min_sentences, max_sentences))]
            for _ in range(num_documents)]


_TOKENIZERS = {}


def shared_tokenizer(vocab_file):
    """One tokenizer per vocab for the module: its TF graph is traced once."""
    if vocab_file not in _TOKENIZERS:
        _TOKENIZERS[vocab_file] = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    return _TOKENIZERS[vocab_file]


def write_corpus(path, num_documents, seed, sentences=(4, 14), words=(3, 14), pieces=False):
    rng = random.Random(seed)
    lines = []
    for _ in range(num_documents):
        for _ in range(rng.randint(*sentences)):
            tokens = []
            for _ in range(rng.randint(*words)):
                word = rng.choice(WORDS)
                if pieces and rng.random() < 0.3:
                    word += "".join(rng.choice("xyz") for _ in range(rng.randint(1, 2)))
                tokens.append(word)
            lines.append(" ".join(tokens) + ".")
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def run_tool(tmp_path, vocab_file, corpus, name="out.tfrecord", workers=1, seed=7,
             shards=1, gzip=False, chunk_chars=3000, **option_overrides):
    options = dict(max_seq_length=SEQ, max_predictions_per_seq=PRED, dupe_factor=2)
    options.update(option_overrides)
    tokenizer = shared_tokenizer(vocab_file)
    config = pp.PipelineConfig(
        input_files=wikipedia.resolve_input_files(corpus), output_files=pp.resolve_output_files(str(tmp_path / name), shards),
        random_seed=seed, num_workers=workers, gzip=gzip, chunk_chars=chunk_chars,
        stats_file=str(tmp_path / name) + pp.STATS_SUFFIX)
    stats = pp.create_pretraining_data(tokenizer, pi.InstanceOptions(**options), config)
    return config.output_files, stats


def read_records(paths, gzip=False, seq=SEQ, pred=PRED):
    spec = records.pretraining_features(seq, pred)
    dataset = tf.data.TFRecordDataset(paths, compression_type="GZIP" if gzip else "")
    batch = next(iter(dataset.map(lambda r: tf.io.parse_single_example(r, spec)).batch(100000)))
    return {k: v.numpy() for k, v in batch.items()}


# ---------------------------------------------------------------- the algorithm
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_segment_pairs_identical_to_original(seed):
    documents = random_documents(seed, 40)
    corpus = pi.ChunkCorpus.from_documents(documents)
    flat = corpus.token_ids.tolist()
    ours_rng, original_rng = random.Random(seed), random.Random(seed)
    for document_index in range(len(documents)):
        expected = original_pairs_from_document(documents, document_index, 32, 0.3, original_rng)
        got = pi.create_segment_pairs(corpus.documents, document_index, 32, 0.3, ours_rng)
        got = [(flat[p.a_start:p.a_start + p.a_length], flat[p.b_start:p.b_start + p.b_length],
                p.is_random_next) for p in got]
        assert got == expected
    assert ours_rng.random() == original_rng.random()  # the same draws were consumed


def test_truncation_identical_to_original_loop():
    for seed in range(300):
        rng = random.Random(seed)
        a_len, b_len, limit = rng.randint(1, 90), rng.randint(1, 90), rng.randint(2, 60)
        tokens_a, tokens_b = list(range(a_len)), list(range(100, 100 + b_len))
        original_truncate_seq_pair(tokens_a, tokens_b, limit, random.Random(seed + 1000))
        a_front, a_back, b_front, b_back = pi.truncate_seq_pair(
            a_len, b_len, limit, random.Random(seed + 1000))
        assert tokens_a == list(range(a_front, a_len - a_back))
        assert tokens_b == list(range(100 + b_front, 100 + b_len - b_back))


def test_short_target_share_is_short_seq_prob():
    # 1-token sentences: when B is the real continuation, the first pair of a document
    # has exactly the target length: 61 tokens, or randint(2, 61) with short_seq_prob.
    documents = [[[7]] * 150 for _ in range(6000)]
    corpus = pi.ChunkCorpus.from_documents(documents)
    rng = random.Random(3)
    short = continued = 0
    for index in range(len(documents)):
        first = pi.create_segment_pairs(corpus.documents, index, 64, 0.1, rng)[0]
        if not first.is_random_next:
            continued += 1
            short += first.a_length + first.b_length < 61
    expected = 0.1 * 59 / 60
    assert continued > 2500
    assert abs(short / continued - expected) < 4 * np.sqrt(expected * (1 - expected) / continued)


def test_options_reject_bad_values():
    with pytest.raises(ValueError, match="max_seq_length"):
        pi.InstanceOptions(max_seq_length=4)
    for prob in (0.0, 1.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="masked_lm_prob"):
            pi.InstanceOptions(masked_lm_prob=prob)
    with pytest.raises(ValueError, match="short_seq_prob"):
        pi.InstanceOptions(short_seq_prob=1.5)


# ---------------------------------------------------------------- records end to end
def _segments(features, row):
    length = int(features["input_mask"][row].sum())
    ids = features["input_ids"][row].copy()
    positions = features["masked_lm_positions"][row][features["masked_lm_weights"][row] > 0]
    ids[positions] = features["masked_lm_ids"][row][: len(positions)]
    first_sep = int(np.argmax(features["segment_ids"][row])) - 1
    return ids[1:first_sep].tolist(), ids[first_sep + 1:length - 1].tolist(), length


def _contains(haystack: bytes, needle):
    """Whether the int list `needle` is a contiguous run of the int32 bytes `haystack`."""
    target = np.asarray(needle, dtype=np.int32).tobytes()
    position = haystack.find(target)
    while position >= 0 and position % 4:
        position = haystack.find(target, position + 1)
    return position >= 0


def test_record_layout_and_segments(tmp_path, vocab_file):
    corpus = write_corpus(tmp_path / "corpus.txt", 30, seed=1)
    paths, stats = run_tool(tmp_path, vocab_file, corpus)
    features = read_records(paths)
    tokenizer = shared_tokenizer(vocab_file)
    document_ids = [
        np.asarray([i for line in doc.split("\n") for i in tokenizer.convert_tokens_to_ids(
            tokenizer.tokenize(line))], dtype=np.int32).tobytes()
        for doc in open(corpus, encoding="utf-8").read().split("\n\n") if doc.strip()]
    assert len(features["input_ids"]) == stats["instances"] > 100
    cls_id, sep_id = 2, 3
    for row in range(len(features["input_ids"])):
        mask = features["input_mask"][row]
        length = int(mask.sum())
        assert mask.tolist() == [1] * length + [0] * (SEQ - length)
        assert (features["input_ids"][row][length:] == 0).all()
        segment_ids = features["segment_ids"][row]
        a_end = int(np.argmax(segment_ids))  # index of the first B token
        assert segment_ids.tolist() == [0] * a_end + [1] * (length - a_end) + [0] * (SEQ - length)
        ids = features["input_ids"][row]
        assert ids[0] == cls_id and ids[a_end - 1] == sep_id and ids[length - 1] == sep_id
        weights = features["masked_lm_weights"][row]
        count = int(weights.sum())
        assert weights.tolist() == [1.0] * count + [0.0] * (PRED - count)
        assert count == min(PRED, max(1, int(round(length * 0.15))))
        positions = features["masked_lm_positions"][row][:count]
        assert (np.diff(positions) > 0).all()
        assert not set(positions.tolist()) & {0, a_end - 1, length - 1}
        assert (features["masked_lm_positions"][row][count:] == 0).all()
        tokens_a, tokens_b, _ = _segments(features, row)
        label = int(features["next_sentence_labels"][row][0])
        docs_a = {d for d, doc in enumerate(document_ids) if _contains(doc, tokens_a)}
        docs_b = {d for d, doc in enumerate(document_ids) if _contains(doc, tokens_b)}
        assert docs_a and docs_b, "segments must be real text"
        if label == 0:
            assert docs_a & docs_b


def test_statistics_on_thousands_of_instances(tmp_path, vocab_file):
    corpus = write_corpus(tmp_path / "corpus.txt", 160, seed=2, sentences=(20, 30))
    paths, stats = run_tool(tmp_path, vocab_file, corpus, dupe_factor=5,
                            max_seq_length=128, max_predictions_per_seq=20, chunk_chars=20000)
    features = read_records(paths, seq=128, pred=20)
    n = len(features["input_ids"])
    assert n > 2500
    nsp = features["next_sentence_labels"].mean()
    assert 0.45 < nsp < 0.56, nsp
    weights = features["masked_lm_weights"] > 0
    lengths = features["input_mask"].sum(1)
    assert abs(weights.sum() / lengths.sum() - 0.15) < 0.01
    rows, slots = np.nonzero(weights)
    shown = features["input_ids"][rows, features["masked_lm_positions"][rows, slots]]
    labels = features["masked_lm_ids"][rows, slots]
    mask_share = (shown == 4).mean()
    unchanged_share = (shown == labels).mean()
    random_share = 1 - mask_share - unchanged_share
    total = len(shown)
    for share, expected in ((mask_share, 0.8), (unchanged_share, 0.1 + 0.1 / 68),
                            (random_share, 0.1 - 0.1 / 68)):
        assert abs(share - expected) < 4 * np.sqrt(expected * (1 - expected) / total)
    assert not np.isin(labels, [2, 3]).any()  # never [CLS] / [SEP]
    assert stats["instances"] == n and stats["masked_tokens"] == weights.sum()
    assert stats["nsp"]["random_next"] == features["next_sentence_labels"].sum()
    # short_seq_prob acts per document (test_short_target_share_is_short_seq_prob);
    # instances also end short at document ends and after random-next put-backs.
    assert stats["short_instances"] == (lengths < 128).sum()


def test_whole_word_masking_masks_whole_words(tmp_path, vocab_file):
    corpus = write_corpus(tmp_path / "corpus.txt", 40, seed=3, pieces=True)
    for whole_word in (True, False):
        paths, _ = run_tool(tmp_path, vocab_file, corpus, name=f"wwm{whole_word}.tfrecord",
                            whole_word_masking=whole_word)
        features = read_records(paths)
        split_words = 0
        for row in range(len(features["input_ids"])):
            count = int(features["masked_lm_weights"][row].sum())
            masked = set(features["masked_lm_positions"][row][:count].tolist())
            tokens_a, tokens_b, length = _segments(features, row)
            original = [2] + tokens_a + [3] + tokens_b + [3]
            for pos in range(1, length - 1):
                if original[pos] < 65 or original[pos - 1] == 2:  # not a ## piece / first
                    continue
                previous = pos - 1 if original[pos - 1] != 3 else pos - 2
                if (pos in masked) != (previous in masked):
                    split_words += 1
        if whole_word:
            assert split_words == 0
        else:
            assert split_words > 20  # the check can see split words


def test_deterministic_and_independent_of_workers(tmp_path, vocab_file):
    corpus = write_corpus(tmp_path / "corpus.txt", 60, seed=4)
    one, _ = run_tool(tmp_path, vocab_file, corpus, name="a.tfrecord", workers=1, shards=2)
    again, _ = run_tool(tmp_path, vocab_file, corpus, name="b.tfrecord", workers=1, shards=2)
    two, stats = run_tool(tmp_path, vocab_file, corpus, name="c.tfrecord", workers=2, shards=2)
    other, _ = run_tool(tmp_path, vocab_file, corpus, name="d.tfrecord", workers=1, shards=2, seed=8)
    read = lambda paths: [open(p, "rb").read() for p in paths]
    assert read(one) == read(again) == read(two)
    assert read(one) != read(other)
    assert stats["documents"] == 60


def test_shards_gzip_stats_and_no_temp_files(tmp_path, vocab_file):
    corpus = write_corpus(tmp_path / "corpus.txt", 20, seed=5)
    paths, stats = run_tool(tmp_path, vocab_file, corpus, shards=3, gzip=True)
    assert [os.path.basename(p) for p in paths] == [
        f"out.tfrecord-0000{i}-of-00003" for i in range(3)]
    counts = [len(read_records([p], gzip=True)["input_ids"]) for p in paths]
    assert sum(counts) == stats["instances"] and max(counts) - min(counts) <= 1
    with open(tmp_path / "out.tfrecord.stats.json", encoding="utf-8") as f:
        saved = json.load(f)
    assert saved["instances"] == stats["instances"] and saved["documents"] == 20
    assert not [name for name in os.listdir(tmp_path) if ".tmp" in name]


def test_bad_input_counted_or_rejected(tmp_path, vocab_file):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(b"wab wac.\nwad wae waf.\n\xff\xfe broken\n\nwba wbb.\n\nwca wcb.\nwcc.\n")
    paths, stats = run_tool(tmp_path, vocab_file, str(corpus))
    assert stats["skipped"]["non_utf8_lines"] == 1
    assert stats["documents"] == 3 and stats["single_sentence_documents"] == 1
    assert stats["sentences"] == 5
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"\n\n  \n")
    with pytest.raises(ValueError, match="no training instances"):
        run_tool(tmp_path, vocab_file, str(empty), name="empty.tfrecord")
    assert not list(tmp_path.glob("empty.tfrecord*"))
    binary = tmp_path / "binary.txt"  # all of it bad: refused as a whole, naming it
    binary.write_bytes(b"\x01\x02\n\n\x00\n\xff\n")
    with pytest.raises(ValueError, match="binary.txt: not a text file"):
        run_tool(tmp_path, vocab_file, str(binary), name="binary.tfrecord")
    assert not list(tmp_path.glob("binary.tfrecord*"))
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        run_tool(tmp_path, vocab_file, str(tmp_path / "nothing-here*.txt"))
    with pytest.raises(ValueError, match="max_seq_length"):
        run_tool(tmp_path, vocab_file, str(corpus), max_seq_length=3)
    with pytest.raises(ValueError, match="masked_lm_prob"):
        run_tool(tmp_path, vocab_file, str(corpus), masked_lm_prob=1.0)


def test_cli_main_writes_records(tmp_path, vocab_file):
    from absl import flags  # pylint: disable=import-outside-toplevel
    from data_prep import create_pretraining_data  # pylint: disable=import-outside-toplevel
    corpus = write_corpus(tmp_path / "corpus.txt", 10, seed=6)
    output = tmp_path / "cli.tfrecord"
    flag_values = flags.FlagValues()
    create_pretraining_data.define_flags(flag_values)
    flag_values([
        "prog", f"--input_file={corpus}", f"--output_file={output}",
        f"--vocab_file={vocab_file}", "--max_seq_length=32", "--max_predictions_per_seq=5",
        "--dupe_factor=1", "--num_output_shards=1"])
    stats = create_pretraining_data.run(flag_values)
    assert stats["documents"] == 10
    features = read_records([str(output)], seq=32, pred=5)
    assert len(features["input_ids"]) > 0
    assert json.loads((tmp_path / "cli.tfrecord.stats.json").read_text())["documents"] == 10


def _run_command(flag_list):
    from absl import flags  # pylint: disable=import-outside-toplevel
    from data_prep import create_pretraining_data  # pylint: disable=import-outside-toplevel
    flag_values = flags.FlagValues()
    create_pretraining_data.define_flags(flag_values)
    flag_values(["prog"] + flag_list)
    return create_pretraining_data.run(flag_values)


def test_every_flag_reaches_the_options():
    from data_prep import create_pretraining_data  # pylint: disable=import-outside-toplevel
    options_class = create_pretraining_data.CreatePretrainingDataOptions
    assert check_every_flag_reaches_options(options_class) == 23  # 22 flags + 1 alias


def test_original_whole_word_flag_writes_the_same_records(tmp_path, vocab_file):
    """--do_whole_word_mask (the original's name) is --whole_word_masking."""
    corpus = write_corpus(tmp_path / "corpus.txt", 20, seed=3, pieces=True)
    outputs = {}
    for flag in ("do_whole_word_mask", "whole_word_masking", "nowhole_word_masking"):
        output = tmp_path / f"{flag}.tfrecord"
        stats = _run_command([
            f"--input_file={corpus}", f"--output_file={output}", f"--vocab_file={vocab_file}",
            "--max_seq_length=32", "--max_predictions_per_seq=5", "--dupe_factor=2",
            f"--{flag}"])
        assert stats["options"]["whole_word_masking"] == (flag != "nowhole_word_masking")
        outputs[flag] = output.read_bytes()
    assert outputs["do_whole_word_mask"] == outputs["whole_word_masking"]
    assert outputs["whole_word_masking"] != outputs["nowhole_word_masking"]


@pytest.mark.slow
def test_real_dumps_through_workers(tmp_path, shared_data_dir):
    """XML dumps (sentence splitting in the workers) give the same records at 1 and 2 workers."""
    vocab = str(shared_data_dir / "checkpoints" / "uncased_L-6_H-384_A-12" / "vocab.txt")
    wiki = shared_data_dir / "wiki"
    inputs = f"{wiki}/bgwiki-sample-pages-articles.xml.bz2,{wiki}/zhwiki-test-pages.xml"
    outputs = []
    for workers in (1, 2):
        paths, stats = run_tool(tmp_path, vocab, inputs, name=f"real{workers}.tfrecord",
                                workers=workers, chunk_chars=100_000, max_seq_length=128,
                                max_predictions_per_seq=20)
        outputs.append(open(paths[0], "rb").read())
    assert outputs[0] == outputs[1]
    assert stats["skipped"]["non_article_pages"] >= 10 and stats["documents"] > 20
    features = read_records(paths, seq=128, pred=20)
    assert len(features["input_ids"]) == stats["instances"]


def test_output_paths_that_cannot_be_files_are_refused_up_front(tmp_path):
    (tmp_path / "taken").mkdir()
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(ValueError, match="is an existing directory"):
        pp.resolve_output_files(str(tmp_path / "taken"))
    with pytest.raises(ValueError, match="is a file, not a directory"):
        pp.resolve_output_files(str(tmp_path / "a_file" / "out.tfrecord"))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        pp.resolve_output_files(str(tmp_path / "no_dir" / "out.tfrecord"))
    # The stats file beside the records is a path of the output set too.
    (tmp_path / "out.tfrecord.stats.json").mkdir()
    with pytest.raises(ValueError, match="stats.json' is an existing directory"):
        pp.resolve_output_files(str(tmp_path / "out.tfrecord"))


def test_a_rerun_replaces_the_whole_output_set(tmp_path):
    # An earlier run into the same prefix with 3 shards, and a killed run's temporary
    # shard (pid of a process that has ended): after a 2-shard run, `prefix-*` matches
    # exactly the new shards.
    prefix = str(tmp_path / "wiki.tfrecord")
    for index in range(3):
        (tmp_path / f"wiki.tfrecord-{index:05d}-of-00003").write_bytes(b"old")
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    (tmp_path / f"wiki.tfrecord-00000-of-00002.tmp-{ended.pid}").write_bytes(b"half")
    (tmp_path / "other.tfrecord-00000-of-00001").write_bytes(b"not ours")
    paths = pp.resolve_output_files(prefix, 2)
    with record_writing.ShardedWriter(paths) as writer:
        writer.write_all([b"a", b"b", b"c"])
        writer.commit(prefix + pp.STATS_SUFFIX, {"instances": 3})
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "other.tfrecord-00000-of-00001", "wiki.tfrecord-00000-of-00002",
        "wiki.tfrecord-00001-of-00002", "wiki.tfrecord.stats.json"]
    assert sum(1 for path in paths for _ in tf.data.TFRecordDataset(path)) == 3


def test_masking_none_writes_rows_without_masks_once(tmp_path, vocab_file):
    corpus = write_corpus(tmp_path / "corpus.txt", 30, seed=8)
    with pytest.raises(ValueError, match="dupe_factor=2 with masking='none'.*--dupe_factor=1"):
        run_tool(tmp_path, vocab_file, corpus, masking="none")
    paths, stats = run_tool(tmp_path, vocab_file, corpus, masking="none", dupe_factor=1)
    spec = records.pretraining_features(SEQ, PRED, masked=False)
    dataset = tf.data.TFRecordDataset(paths).map(lambda r: tf.io.parse_single_example(r, spec))
    features = {k: v.numpy() for k, v in next(iter(dataset.batch(100000))).items()}
    example = tf.train.Example.FromString(next(iter(tf.data.TFRecordDataset(paths))).numpy())
    assert sorted(example.features.feature) == ["input_ids", "input_mask",
                                                "next_sentence_labels", "segment_ids"]
    assert not (features["input_ids"] == 4).any()  # no [MASK] anywhere
    assert stats["masked_tokens"] == 0 and stats["instances"] == len(features["input_ids"])
    # The same pairs as the masked run of the same seed, before masking.
    masked_paths, _ = run_tool(tmp_path, vocab_file, corpus, name="masked.tfrecord",
                               dupe_factor=1)
    masked = read_records(masked_paths)
    for row in range(len(features["input_ids"])):
        ids = masked["input_ids"][row].copy()
        real = masked["masked_lm_weights"][row] > 0
        ids[masked["masked_lm_positions"][row][real]] = masked["masked_lm_ids"][row][real]
        np.testing.assert_array_equal(ids, features["input_ids"][row])


def test_full_sentence_rows_without_next_sentence(tmp_path, vocab_file):
    corpus = write_corpus(tmp_path / "corpus.txt", 30, seed=9)
    paths, stats = run_tool(tmp_path, vocab_file, corpus, next_sentence=False,
                            masking="none", dupe_factor=1)
    spec = records.pretraining_features(SEQ, PRED, masked=False, next_sentence=False)
    dataset = tf.data.TFRecordDataset(paths).map(lambda r: tf.io.parse_single_example(r, spec))
    features = {k: v.numpy() for k, v in next(iter(dataset.batch(100000))).items()}
    example = tf.train.Example.FromString(next(iter(tf.data.TFRecordDataset(paths))).numpy())
    assert sorted(example.features.feature) == ["input_ids", "input_mask", "segment_ids"]
    lengths = features["input_mask"].sum(1)
    assert (features["segment_ids"] == 0).all()
    assert (features["input_ids"][:, 0] == 2).all()
    assert (features["input_ids"][np.arange(len(lengths)), lengths - 1] == 3).all()
    # Rows are full: only the last row of the chunk and rows before a sentence that
    # does not fit are short, so most rows are within a sentence of max_seq_length.
    assert np.median(lengths) > SEQ - 16
    # Every token of the corpus, once: the rows' tokens without [CLS]/[SEP] are the
    # corpus' tokens (documents in a shuffled order).
    tokenizer = shared_tokenizer(vocab_file)
    corpus_ids = [i for line in open(corpus, encoding="utf-8").read().split("\n") if line
                  for i in tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line))]
    row_ids = features["input_ids"][(features["input_mask"] > 0)
                                    & ~np.isin(features["input_ids"], [2, 3])]
    assert np.bincount(row_ids, minlength=len(VOCAB)).tolist() == np.bincount(
        corpus_ids, minlength=len(VOCAB)).tolist()
    assert stats["nsp"]["random_next"] == 0
    # With masks (the default), the same rows carry the original's masks.
    paths, _ = run_tool(tmp_path, vocab_file, corpus, name="masked.tfrecord",
                        next_sentence=False)
    spec = records.pretraining_features(SEQ, PRED, next_sentence=False)
    masked = next(iter(tf.data.TFRecordDataset(paths).map(
        lambda r: tf.io.parse_single_example(r, spec)).batch(100000)))
    assert len(masked["input_ids"]) == 2 * len(lengths)  # dupe_factor 2
    assert masked["masked_lm_weights"].numpy().sum(1).min() >= 1


class _TiedKeys:
    """A generator stand-in whose uniform keys tie at the selection threshold."""

    def random(self, shape, dtype=np.float64):
        return np.array([[0.1, 0.5, 0.5, 0.5, 0.9, 0.2]], dtype=dtype).reshape(shape)


def test_choose_tokens_keeps_the_count_when_keys_tie_at_the_threshold():
    # Three keys equal the 3rd smallest: `keys <= threshold` alone chose 5 tokens, more
    # than num_to_predict (an IndexError past max_predictions_per_seq at seq 512).
    candidate = np.ones([1, 6], dtype=bool)
    chosen = pi._choose_tokens(  # pylint: disable=protected-access
        candidate, np.array([3]), 4, _TiedKeys())
    assert chosen.tolist() == [[True, True, False, False, False, True]]


# ------------------------------------------------ a stopped command ends its workers

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def proc_stat(pid):
    """(state, ppid) of a live process from /proc; None when it has ended (or is a zombie)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") else (fields[0], int(fields[1]))


def _children(pid):
    """The live processes whose parent is `pid`."""
    return sorted(int(name) for name in os.listdir("/proc") if name.isdigit()
                  and (proc_stat(int(name)) or ("", 0))[1] == pid)


def _start_with_workers(tmp_path, vocab_file, workers):
    """Starts the command with `workers` on a corpus of a few seconds' work; returns it
    once its temporary shard is open and its worker processes run, and their pids."""
    corpus = write_corpus(tmp_path / "corpus.txt", 20000, seed=5)
    command = [sys.executable, "-m", "data_prep.create_pretraining_data",
               f"--input_file={corpus}", f"--output_file={tmp_path / 'out.tfrecord'}",
               f"--vocab_file={vocab_file}", f"--max_seq_length={SEQ}",
               f"--max_predictions_per_seq={PRED}", "--dupe_factor=5",
               f"--num_workers={workers}", "--num_output_shards=2"]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    deadline = time.time() + 60
    while time.time() < deadline and process.poll() is None:
        children = _children(process.pid)
        if len(children) >= workers - 1 and list(tmp_path.glob("out.tfrecord*.tmp-*")):
            time.sleep(0.3)  # the workers are in a chunk's work
            return process, children
        time.sleep(0.05)
    process.kill()
    pytest.fail(f"no worker started: {process.communicate()[1][-2000:]}")


def _wait_ended(pids, seconds=10):
    deadline = time.time() + seconds
    while time.time() < deadline and any(proc_stat(pid) for pid in pids):
        time.sleep(0.05)
    return [pid for pid in pids if proc_stat(pid)]


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
# It hung in about one run of six (issue 49): fixed by pretraining_pipeline._end_pool.
@pytest.mark.parametrize("signum, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_ends_the_workers_and_leaves_no_temporary_file(tmp_path, vocab_file,
                                                               signum, status):
    """issue 26: after `kill -TERM` a worker process was still alive 13 minutes later."""
    process, workers = _start_with_workers(tmp_path, vocab_file, workers=2)
    assert workers
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=20)
    lines = stderr.strip().splitlines()
    assert process.returncode == status, stderr[-2000:]
    assert "Traceback" not in stderr
    assert lines[-1] == {signal.SIGTERM: "bert-create-pretraining-data: error: stopped by SIGTERM",
                         signal.SIGINT: "bert-create-pretraining-data: error: stopped by SIGINT "
                                        "(Ctrl-C)"}[signum]
    assert _wait_ended(workers) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt"]


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_workers_end_when_their_parent_is_killed(tmp_path, vocab_file):
    """A SIGKILLed command cannot end its workers: they notice and end themselves."""
    process, workers = _start_with_workers(tmp_path, vocab_file, workers=3)
    assert len(workers) == 2
    process.kill()
    process.communicate(timeout=20)
    assert _wait_ended(workers) == []


def test_unknown_language_is_refused_with_the_accepted_codes(tmp_path, vocab_file):
    from absl import flags  # pylint: disable=import-outside-toplevel
    with pytest.raises(flags.IllegalFlagValueError, match=r"--language=xx: .*<am\|ar\|"):
        _run_command([f"--input_file={tmp_path}/none.txt", f"--vocab_file={vocab_file}",
                      f"--output_file={tmp_path}/out.tfrecord", "--language=xx"])
    from data_prep import create_pretraining_data  # pylint: disable=import-outside-toplevel
    options = create_pretraining_data.CreatePretrainingDataOptions(
        input_file=str(tmp_path / "none.txt"), output_file=str(tmp_path / "out.tfrecord"),
        vocab_file=vocab_file, language="xx")
    with pytest.raises(ValueError, match="language must be one of am, ar, .* got 'xx'"):
        create_pretraining_data.create(options)
