"""Issue 38, the trial's findings that are rules about data values, each held by
generated inputs:

* a value means one thing: a label with white space around it is the label (`'pos '` is
  `'pos'`); a column or key named twice is refused, not silently the last one; a label
  that is not an index (`'²'`) is refused naming file and line; plain NER tags (no B-/I-)
  are scored token by token (conlleval -r), not as zero chunks;
* pre-training data is what its labels say: a "random next" segment comes from another
  document (every chunk holds two documents), no output shard is empty, the case fits
  the vocab (the runners' check); a long line costs time linear in its length.
"""

import collections
import importlib.util
import json
import random
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import harness
from bert_tf.runs import text_files
from bert_tf.tasks.ner import conlleval
from bert_tf.tasks.ner import data as ner_data
from data_prep import create_pretraining_data
from data_prep import pretraining_instances as pi
from data_prep import pretraining_pipeline as pp

FAST = settings(max_examples=25, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
WORDS = [f"w{chr(97 + i)}{chr(97 + j)}" for i in range(6) for j in range(10)]
VOCAB = harness.SPECIAL_TOKENS + WORDS


# ------------------------------------------------------------------ a value means one thing

_SPACE = st.sampled_from(["", " ", "  ", "\t"])


@FAST
@given(labels=st.lists(st.tuples(_SPACE, st.sampled_from(["pos", "neg"]), _SPACE),
                       min_size=4, max_size=12).filter(
                           lambda rows: {label for _, label, _ in rows} == {"pos", "neg"}),
       ext=st.sampled_from([".tsv", ".csv", ".jsonl"]))
def test_labels_with_white_space_are_the_labels(tmp_path, labels, ext):
    rows = [(f"text {i}", "".join(label)) for i, label in enumerate(labels)]
    if ext == ".tsv":  # a tab is a column separator there
        rows = [(text, label.replace("\t", " ")) for text, label in rows]
    path = tmp_path / f"train{ext}"
    if ext == ".jsonl":
        path.write_text("".join(json.dumps({"text": t, "label": label}) + "\n"
                                for t, label in rows), encoding="utf-8")
    else:
        sep = "\t" if ext == ".tsv" else ","
        quote = (lambda v: v) if ext == ".tsv" else (lambda v: f'"{v}"')
        path.write_text(f"text{sep}label\n" + "".join(
            f"{quote(t)}{sep}{quote(label)}\n" for t, label in rows), encoding="utf-8")
    for other in tmp_path.iterdir():
        if other != path:
            other.unlink()
    processor = text_files.GenericProcessor()
    assert processor.get_labels(str(tmp_path)) == ["neg", "pos"]
    assert {e.label for e in processor.get_examples(str(tmp_path), "train")} == {"neg", "pos"}


@FAST
@given(names=st.lists(st.sampled_from(["text", "label", "id", "extra"]), min_size=2,
                      max_size=5).filter(lambda n: len(set(n)) < len(n)),
       ext=st.sampled_from([".tsv", ".csv", ".jsonl"]))
def test_a_column_or_key_named_twice_is_refused(tmp_path, names, ext):
    path = tmp_path / f"train{ext}"
    if ext == ".jsonl":
        pairs = ", ".join(f'"{name}": "v{i}"' for i, name in enumerate(names))
        path.write_text("{" + pairs + "}\n", encoding="utf-8")
    else:
        sep = "\t" if ext == ".tsv" else ","
        path.write_text(sep.join(names) + "\n" + sep.join(["v"] * len(names)) + "\n",
                        encoding="utf-8")
    repeated = next(name for i, name in enumerate(names) if name in names[:i])
    with pytest.raises(ValueError, match=rf"train{ext}:1: .*{repeated!r} twice"):
        list(text_files.read_records(str(path)))


@FAST
@given(label=st.sampled_from(["²", "¹", "٣x", "1.5", "x", "-", "0x1", "1e3", "①"]))
def test_a_multiple_choice_label_that_is_not_an_index_names_file_and_line(tmp_path, label):
    from bert_tf.tasks.multiple_choice import data as mc_data  # noqa
    path = tmp_path / "train.jsonl"
    row = {"question": "q?", "choices": ["a", "b"], "label": 0}
    path.write_text(json.dumps(row) + "\n" + json.dumps(dict(row, label=label)) + "\n",
                    encoding="utf-8")
    with pytest.raises(ValueError, match=r"train\.jsonl:2: label"):
        mc_data.read_examples(str(path), "train")


@FAST
@given(tags=st.lists(st.sampled_from(["O", "PER", "LOC", "ORG"]), min_size=3, max_size=30))
def test_plain_tags_are_scored_token_by_token(tags):
    assert not ner_data.has_chunk_prefixes(tags)
    rng = random.Random(len(tags))
    predicted = [tag if rng.random() < 0.7 else "O" for tag in tags]
    lines = [f"w{i} {gold} {guess}" for i, (gold, guess) in enumerate(zip(tags, predicted))]
    counts = conlleval.evaluate_lines(lines, raw=True)
    found = sum(1 for gold, guess in zip(tags, predicted) if gold == guess != "O")
    assert counts.found_correct == sum(tag != "O" for tag in tags)
    assert counts.correct_chunks == found


def test_mixed_tag_schemes_are_refused():
    assert ner_data.has_chunk_prefixes(["O", "B-PER", "I-PER"])
    with pytest.raises(ValueError, match="'PER' has no B-/I- prefix but 'B-LOC' has one"):
        ner_data.has_chunk_prefixes(["O", "B-LOC", "PER"], "train.txt")


# ------------------------------------------------------------------ pre-training data

@FAST
@given(sizes=st.lists(st.lists(st.integers(1, 20), min_size=1, max_size=6), min_size=1,
                      max_size=5),
       seed=st.integers(0, 1000), seq=st.sampled_from([8, 16, 64]))
def test_a_random_next_segment_comes_from_another_document(sizes, seed, seq):
    documents, start = [], 0
    for lengths in sizes:
        offsets = [start] + list(start + np.cumsum(lengths))
        documents.append([int(o) for o in offsets])
        start = offsets[-1]
    rng = random.Random(seed)
    for index, offsets in enumerate(documents):
        for pair in pi.create_segment_pairs(documents, index, seq, 0.1, rng):
            inside = offsets[0] <= pair.b_start < offsets[-1]
            assert inside != pair.is_random_next
            assert pair.a_length >= 1 and pair.b_length >= 1


@pytest.mark.extras("apache_beam")
@pytest.mark.skipif(importlib.util.find_spec("apache_beam") is None,
                    reason="the beam extra is not installed (pip install -e .[beam])")
@FAST
@given(sizes=st.lists(st.integers(1, 50), min_size=1, max_size=12),
       chunk_chars=st.sampled_from([1, 2, 30, 100, 10 ** 6]),
       splits=st.integers(1, 4))
def test_every_chunk_holds_two_documents_locally_and_on_beam(tmp_path, sizes, chunk_chars,
                                                             splits):
    path = tmp_path / "corpus.txt"
    path.write_text("".join("w" * size + "\n\n" for size in sizes), encoding="utf-8")
    chunks = list(pp.iter_raw_chunks([str(path)], "text", chunk_chars,
                                     collections.Counter()))
    assert all(len(chunk) >= 2 for chunk in chunks[:-1])  # the last: what is left
    # The Beam plan starts the same chunks, however the documents fall into splits.
    cut = sorted(random.Random(len(sizes)).sample(range(1, len(sizes) + 1),
                                                  min(splits, len(sizes)) - 1))
    parts = [sizes[a:b] for a, b in zip([0] + cut, cut + [len(sizes)])]
    from data_prep import beam_inputs  # pylint: disable=import-outside-toplevel
    plan = beam_inputs.plan_chunks([(k, part) for k, part in enumerate(parts)], chunk_chars)
    starts, position = set(), 0
    for key, part in enumerate(parts):
        first_doc, _ = plan[key]
        if first_doc is not None:
            starts.add(position + first_doc)
        position += len(part)
    local, position = set(), 0
    for chunk in chunks:
        local.add(position)
        position += len(chunk)
    assert min(local) in starts and starts <= local


def _tool(tmp_path, vocab_file, corpus, **changes):
    values = dict(input_file=str(corpus), vocab_file=vocab_file,
                  output_file=str(tmp_path / "out.tfrecord"), max_seq_length=32,
                  max_predictions_per_seq=4, dupe_factor=1)
    values.update(changes)
    return create_pretraining_data.create(
        create_pretraining_data.CreatePretrainingDataOptions(**values))


def _corpus(path, documents=3, seed=0):
    rng = random.Random(seed)
    path.write_text("\n\n".join("\n".join(" ".join(rng.choices(WORDS, k=8))
                                          for _ in range(4)) for _ in range(documents))
                    + "\n", encoding="utf-8")
    return path


def test_more_shards_than_instances_are_refused_and_nothing_written(tmp_path, vocab_file):
    corpus = _corpus(tmp_path / "corpus.txt")
    stats = _tool(tmp_path, vocab_file, corpus)
    for name in list(tmp_path.iterdir()):
        if name.name.startswith("out.tfrecord"):
            name.unlink()
    shards = stats["instances"] + 1
    with pytest.raises(ValueError, match=rf"{stats['instances']} instances for {shards} "
                                         r"output files: 1 of them would be empty"):
        _tool(tmp_path, vocab_file, corpus, num_output_shards=shards)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt"]


def test_a_case_that_does_not_fit_the_vocab_is_refused(tmp_path):
    cased = harness.write_vocab(tmp_path / "vocab.txt", harness.SPECIAL_TOKENS + [
        f"{'W' if i % 3 else 'w'}{i}" for i in range(1200)] + WORDS)
    corpus = _corpus(tmp_path / "corpus.txt")
    with pytest.raises(ValueError, match="do_lower_case=true does not fit vocab_file"):
        _tool(tmp_path, str(cased), corpus, do_lower_case=True)
    assert not list(tmp_path.glob("out.tfrecord*"))
    _tool(tmp_path, str(cased), corpus, do_lower_case=True, allow_case_mismatch=True)


def test_a_long_line_costs_linear_time(tmp_path, vocab_file):
    rng = random.Random(0)
    times = []
    for words in (20_000, 80_000):
        corpus = tmp_path / f"long{words}.txt"
        corpus.write_text(" ".join(rng.choices(WORDS, k=words)) + "\n"
                          + "wab wac .\n\nwba wbb .\nwbc .\n", encoding="utf-8")
        start = time.perf_counter()
        _tool(tmp_path, vocab_file, corpus, output_file=str(tmp_path / f"o{words}.tfrecord"))
        times.append(time.perf_counter() - start)
    assert times[1] < 6 * times[0] + 2.0, times  # 4x the words: ~4x the time, not 16x
