"""create_pretraining_data on Apache Beam: the local tool's instances, splits, sinks, stats."""

import bz2
import collections
import dataclasses
import glob
import json
import os
import re
import subprocess
import sys
from xml.sax.saxutils import escape

import pytest
import tensorflow as tf

beam = pytest.importorskip(
    "apache_beam", reason="the beam extra is not installed (pip install -e .[beam])")
pytestmark = pytest.mark.extras("apache_beam")

# pylint: disable=wrong-import-position
from absl import flags
from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions
from apache_beam.testing import test_pipeline

from data_prep import beam_chunks, beam_inputs, beam_pipeline, wikipedia
from flag_contract import check_every_flag_reaches_options
from test_create_pretraining_data import PRED, SEQ, VOCAB, WORDS, run_tool, write_corpus  # noqa: F401

# The Dataflow options of README's "A whole Wikipedia" command (the test checks that
# README has them, then runs the pipeline with them on the DirectRunner).
DATAFLOW_OPTIONS = [
    "--project=my-project", "--region=us-central1",
    "--temp_location=gs://my-bucket/tmp", "--staging_location=gs://my-bucket/staging",
    "--setup_file=./setup.py", "--machine_type=n2-standard-4",
    "--max_num_workers=50", "--disk_size_gb=50", "--experiments=use_runner_v2"]


def settings_for(inputs, output, vocab_file, seed=7, shards=1, chunk_chars=3000, **kwargs):
    """The command's settings; `inputs`, a tuple, are taken as they are (not matched)."""
    options = beam_pipeline.CreatePretrainingDataBeamOptions(
        input_file=inputs[0] if isinstance(inputs, tuple) else inputs,
        output_file=str(output), vocab_file=vocab_file, max_seq_length=SEQ,
        max_predictions_per_seq=PRED, dupe_factor=2, random_seed=seed,
        num_output_shards=shards, chunk_chars=chunk_chars, **kwargs)
    settings = beam_pipeline.settings_from_options(options)
    if isinstance(inputs, tuple):
        settings = dataclasses.replace(settings, input_files=inputs)
    return settings


def run_beam(settings, *pipeline_args):
    return beam_pipeline.run_pipeline(settings, PipelineOptions(list(pipeline_args)))


def record_multiset(paths, gzip=False):
    dataset = tf.data.TFRecordDataset(list(paths), compression_type="GZIP" if gzip else "")
    return collections.Counter(record.numpy() for record in dataset)


def shards(prefix):
    return sorted(glob.glob(glob.escape(str(prefix)) + "-[0-9]*-of-[0-9]*[0-9]"))


def _same_stats(local, beam_stats):
    for key in ("documents", "single_sentence_documents", "sentences", "input_tokens",
                "instances", "instance_tokens", "masked_tokens", "nsp", "skipped"):
        expected = local[key]
        if key == "skipped":
            expected = dict(expected, unreadable_files=0)
        assert beam_stats[key] == expected, key


def test_same_instances_as_local_tool_across_files(tmp_path, vocab_file):
    """Three files (text, gzip text with a non-UTF-8 line, WikiExtractor); chunks span files."""
    write_corpus(tmp_path / "a.txt", 14, seed=1)
    write_corpus(tmp_path / "b.txt", 9, seed=2)
    (tmp_path / "b.txt").write_bytes(
        (tmp_path / "b.txt").read_bytes().replace(b"\n\n", b"\n\xff\xfe bad\n\n", 1))
    os.system(f"gzip {tmp_path / 'b.txt'}")
    paragraphs = ["\n".join(" ".join(WORDS[(d * 7 + i * 3 + k) % 60] for k in range(5)) + "."
                        for i in range(4)) for d in range(6)]
    (tmp_path / "c.wiki").write_text("".join(
        f'<doc id="{d}" url="u" title="T{d}">\nT{d}\n{p}\n</doc>\n'
        for d, p in enumerate(paragraphs)), encoding="utf-8")
    pattern = f"{tmp_path}/a.txt,{tmp_path}/b.txt.gz,{tmp_path}/c.wiki"
    local_paths, local = run_tool(tmp_path, vocab_file, pattern, name="local.tfrecord",
                                  chunk_chars=700)
    settings = settings_for(pattern, tmp_path / "beam.tfrecord", vocab_file, shards=3,
                            chunk_chars=700)
    stats = run_beam(settings)
    assert local["instances"] > 100 and local["skipped"]["non_utf8_lines"] == 1
    assert record_multiset(local_paths) == record_multiset(shards(tmp_path / "beam.tfrecord"))
    _same_stats(local, stats)
    saved = json.loads((tmp_path / "beam.tfrecord.stats.json").read_text())
    assert saved["instances"] == stats["instances"] and saved["runner"]
    other = run_beam(settings_for(pattern, tmp_path / "seed8.tfrecord", vocab_file, seed=8,
                                  chunk_chars=700))
    assert other["instances"] and record_multiset([tmp_path / "seed8.tfrecord"]) != \
        record_multiset(local_paths)


@pytest.mark.parametrize("split_bytes", [97, 1000])
def test_text_ranges_own_each_document_once(tmp_path, split_bytes):
    """Byte ranges of a text file read back the local reader's documents and counts."""
    lines = []
    for d in range(40):
        lines += [f"d{d} s{s} " + "x" * (d * 7 % 23) for s in range(1 + d % 4)]
        lines += [b"\xff\xfe bad".decode("latin-1")] if d % 9 == 4 else []
        lines += [""] * (1 + d % 3) + ([" \t"] if d % 5 == 0 else [])
    path = tmp_path / "t.txt"
    path.write_bytes("\n".join(lines).encode("utf-8").replace("ÿþ".encode(), b"\xff\xfe"))
    expected_stats = collections.Counter()
    expected = list(wikipedia.iter_raw_documents(str(path), "text", expected_stats))
    splits = beam_inputs.file_splits(0, str(path), split_bytes=split_bytes)
    assert len(splits) == -(-path.stat().st_size // split_bytes)
    stats = collections.Counter()
    got = [d for split in splits for d in beam_inputs.iter_text_range(split, stats)]
    assert got == expected and stats == expected_stats and stats["non_utf8_lines"] == 4


def test_plan_chunks_matches_sequential_chunking():
    sizes = {(0, 0): [5, 1, 9], (0, 1): [2], (1, 0): [], (1, 1): [3, 3, 3, 20, 1]}
    plan = beam_inputs.plan_chunks(list(sizes.items()), chunk_chars=6)
    # Sequential (a chunk holds 6 characters and two documents): [5,1] [9,2] [3,3]
    # [3,20] [1] -> chunks start at docs (0,0):0, (0,0):2, (1,1):0, (1,1):2, (1,1):4.
    assert plan == {(0, 0): (0, 0), (0, 1): (None, None), (1, 0): (None, None),
                    (1, 1): (0, 2)}


# ------------------------------------------------------------ multistream dumps
_HEADER = ('<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" xml:lang="en">\n'
           '  <siteinfo>\n    <sitename>Wikipedia</sitename>\n    <namespaces>\n'
           '      <namespace key="0" case="first-letter" />\n'
           '      <namespace key="14" case="first-letter">Category</namespace>\n'
           '    </namespaces>\n  </siteinfo>\n')


def _page(page_id, ns=0, redirect=False):
    sentences = [" ".join(WORDS[(page_id * 11 + s * 5 + k) % 60] for k in range(3 + s % 6))
                 for s in range(3 + page_id % 7)]
    text = "[[Category:X]] " + ". ".join(sentences) + ".\n\n" + "Wba wbb wbc. Wbd wbe."
    if redirect:
        text = "#REDIRECT [[Elsewhere]]"
    return (f"  <page>\n    <title>Page {page_id}</title>\n    <ns>{ns}</ns>\n"
            f"    <id>{page_id}</id>\n    <revision>\n      <text xml:space=\"preserve\">"
            f"{escape(text)}</text>\n    </revision>\n  </page>\n")


def write_multistream_dump(folder, name="tiny-pages-articles-multistream", groups=6,
                           per_group=3):
    """A dump whose header, page groups and closing tag are separate bz2 streams."""
    streams, index_lines, offset = [bz2.compress(_HEADER.encode())], [], 0
    offset = len(streams[0])
    for group in range(groups):
        ids = range(1 + group * per_group, 1 + (group + 1) * per_group)
        pages = "".join(_page(i, ns=14 if i % 8 == 0 else 0, redirect=i % 9 == 0) for i in ids)
        index_lines += [f"{offset}:{i}:Page {i}" for i in ids]
        streams.append(bz2.compress(pages.encode()))
        offset += len(streams[-1])
    streams.append(bz2.compress(b"</mediawiki>\n"))
    dump = folder / f"{name}.xml.bz2"
    dump.write_bytes(b"".join(streams))
    (folder / f"{name}-index.txt.bz2").write_bytes(bz2.compress("\n".join(index_lines).encode()))
    return dump, streams


@pytest.mark.parametrize("streams_per_split", [1, 4])
def test_multistream_dump_split_by_streams_gives_the_local_instances(
        tmp_path, vocab_file, streams_per_split):
    dump, streams = write_multistream_dump(tmp_path)
    splits = beam_inputs.file_splits(0, str(dump), streams_per_split)
    assert len(splits) == -(-6 // streams_per_split)
    assert splits[0].start == len(streams[0]) and splits[-1].end == os.path.getsize(dump)
    local_paths, local = run_tool(tmp_path, vocab_file, str(dump), name="local.tfrecord",
                                  chunk_chars=400)
    # The index beside the dump is matched by the glob but not read as a corpus.
    stats = run_beam(settings_for(f"{tmp_path}/tiny*", tmp_path / "beam.tfrecord", vocab_file,
                                  chunk_chars=400, streams_per_split=streams_per_split))
    assert local["documents"] >= 12 and local["skipped"]["redirect_pages"] >= 1
    assert local["skipped"]["non_article_pages"] >= 1
    assert record_multiset(local_paths) == record_multiset([tmp_path / "beam.tfrecord"])
    _same_stats(local, stats)


def test_corrupt_stream_fails_naming_the_file(tmp_path, vocab_file):
    dump, streams = write_multistream_dump(tmp_path, name="bad-multistream")
    data = bytearray(dump.read_bytes())
    middle = len(streams[0]) + len(streams[1]) + len(streams[2]) // 2
    data[middle:middle + 40] = bytes(40)
    dump.write_bytes(bytes(data))
    with pytest.raises(Exception, match=re.escape(str(dump))):
        run_beam(settings_for(str(dump), tmp_path / "out.tfrecord", vocab_file,
                              streams_per_split=2))


def test_bad_input_counted_and_empty_glob_refused_up_front(tmp_path, vocab_file):
    good = write_corpus(tmp_path / "good.txt", 8, seed=3)
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\xff\xfe\x00\x81\n\x9c\x80\n\nwaa wab.\n")
    settings = settings_for((good, str(binary), str(tmp_path / "gone.txt")),
                            tmp_path / "out.tfrecord", vocab_file)
    stats = run_beam(settings)
    assert stats["skipped"]["non_utf8_lines"] == 2
    assert stats["skipped"]["unreadable_files"] == 1
    assert stats["documents"] == 9
    flag_values = flags.FlagValues()
    beam_pipeline.define_flags(flag_values)
    flag_values(["prog", f"--input_file={good},{tmp_path}/nothing-*.txt",
                 f"--output_file={tmp_path}/x.tfrecord", f"--vocab_file={vocab_file}"])
    with pytest.raises(FileNotFoundError, match=re.escape(f"{tmp_path}/nothing-*.txt")):
        beam_pipeline.settings_from_flags(flag_values)


def test_streaming_mode_text_ranges_and_runner_shards(tmp_path, vocab_file):
    """--split_bytes ranges, --noreshuffle_chunks, --num_output_shards=0: the same instances."""
    corpus = write_corpus(tmp_path / "corpus.txt", 40, seed=11)
    local_paths, local = run_tool(tmp_path, vocab_file, corpus, name="local.tfrecord")
    stats = run_beam(settings_for(corpus, tmp_path / "beam.tfrecord", vocab_file, shards=0,
                                  split_bytes=1500, reshuffle_chunks=False))
    paths = shards(tmp_path / "beam.tfrecord")
    assert paths and stats["output_files"] == paths
    assert record_multiset(local_paths) == record_multiset(paths)
    _same_stats(local, stats)


def test_gzip_shards_spread_and_named_like_the_local_tool(tmp_path, vocab_file):
    corpus = write_corpus(tmp_path / "corpus.txt", 30, seed=5)
    local_paths, local = run_tool(tmp_path, vocab_file, corpus, name="local.tfrecord",
                                  shards=3, gzip=True)
    stats = run_beam(settings_for(corpus, tmp_path / "beam.tfrecord", vocab_file, shards=3,
                                  gzip=True))
    paths = shards(tmp_path / "beam.tfrecord")
    assert [os.path.basename(p) for p in paths] == [
        os.path.basename(p).replace("local", "beam") for p in local_paths]
    counts = [sum(record_multiset([p], gzip=True).values()) for p in paths]
    assert sum(counts) == stats["instances"] == local["instances"]
    assert min(counts) > 0.2 * stats["instances"]
    assert record_multiset(paths, gzip=True) == record_multiset(local_paths, gzip=True)
    assert not [p for p in os.listdir(tmp_path) if "temp" in p or ".tmp" in p]


def test_dataflow_options_through_test_pipeline(tmp_path, vocab_file):
    """The pipeline with a Dataflow job's options, run by TestPipeline on the DirectRunner."""
    readme = open(os.path.join(os.path.dirname(__file__), "..", "README.md"),
                  encoding="utf-8").read()
    for option in DATAFLOW_OPTIONS + ["--runner=DataflowRunner"]:
        assert option in readme, f"README's Dataflow command lacks {option}"
    corpus = write_corpus(tmp_path / "corpus.txt", 12, seed=9)
    settings = settings_for(corpus, tmp_path / "out.tfrecord", vocab_file, shards=2)
    options = PipelineOptions(DATAFLOW_OPTIONS)
    assert options.view_as(GoogleCloudOptions).project == "my-project"
    with test_pipeline.TestPipeline(runner="DirectRunner", options=options) as pipeline:
        beam_chunks.build_pipeline(pipeline, settings)
        proto = pipeline.to_runner_api()  # what a Dataflow submission serializes
    assert any("BuildInstances" in t.unique_name for t in proto.components.transforms.values())
    _, local = run_tool(tmp_path, vocab_file, corpus, name="local.tfrecord", shards=2)
    assert sum(record_multiset(shards(tmp_path / "out.tfrecord")).values()) == local["instances"]


def test_entry_point_without_beam_names_the_extra(tmp_path):
    code = ("import sys; sys.modules['apache_beam'] = None; sys.argv = ['x', "
            "'--input_file=a', '--output_file=b', '--vocab_file=c']; "
            "from data_prep import beam_pipeline; beam_pipeline.run_main()")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=os.path.join(os.path.dirname(__file__), ".."), check=False)
    assert result.returncode != 0
    assert "pip install bert_tf[beam]" in result.stderr, result.stderr[-2000:]


def test_flags_for_unmasked_full_sentence_rows_reach_the_pipeline(tmp_path, vocab_file):
    """--masking=none --next_sentence=false (the local tool's flags) give its rows on Beam."""
    corpus = write_corpus(tmp_path / "corpus.txt", 20, seed=9)
    local_paths, local = run_tool(tmp_path, vocab_file, corpus, name="local.tfrecord",
                                  masking="none", dupe_factor=1, next_sentence=False)
    flag_values = flags.FlagValues()
    beam_pipeline.define_flags(flag_values)
    flag_values(["prog", f"--input_file={corpus}", f"--output_file={tmp_path}/beam.tfrecord",
                 f"--vocab_file={vocab_file}", f"--max_seq_length={SEQ}",
                 f"--max_predictions_per_seq={PRED}", "--masking=none", "--dupe_factor=1",
                 "--nonext_sentence", "--random_seed=7", "--chunk_chars=3000",
                 "--num_output_shards=1"])
    settings = beam_pipeline.settings_from_flags(flag_values)
    assert settings.options.masking == "none" and not settings.options.next_sentence
    stats = run_beam(settings)
    assert local["instances"] > 10 and stats["instances"] == local["instances"]
    assert stats["output_files"] == [str(tmp_path / "beam.tfrecord")]  # one shard: no suffix
    assert record_multiset(local_paths) == record_multiset(stats["output_files"])


def test_every_flag_reaches_the_options():
    tried = check_every_flag_reaches_options(beam_pipeline.CreatePretrainingDataBeamOptions)
    assert tried == 26  # the local tool's 22 flags and 1 alias, 3 of Beam's own
