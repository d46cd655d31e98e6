"""Corpus readers: text, WikiExtractor (<doc> and --json) and MediaWiki XML dumps."""

import bz2
import collections
import gzip
import json
from xml.sax.saxutils import escape

import pytest

from data_prep import wikipedia

PAGE = """  <page>
    <title>{title}</title>
    <ns>{ns}</ns>
    <id>{id}</id>{redirect}
    <revision>
      <id>1{id}</id>
      <model>wikitext</model>
      <format>text/x-wiki</format>
      <text xml:space="preserve">{text}</text>
    </revision>
  </page>
"""

ARTICLE = """{{Infobox person|name=Ada Lovelace|born=1815}}
'''Ada Lovelace''' was an English [[mathematician]] and writer.<ref>Toole, 1998.</ref> She is known for her work on the [[Analytical Engine|analytical engine]] of Charles Babbage. Her notes hold the first published algorithm.

[[File:Ada Lovelace portrait.jpg|thumb|Portrait of Ada by Chalon]]
== Early life ==
Ada was born in London on 10 December 1815. Her mother promoted her interest in mathematics.
{| class="wikitable"
|-
| TableCellText || More
|}
* She corresponded with Mr. De Morgan about calculus.

[[Category:English mathematicians]]
[[de:Ada Lovelace]]"""


def write_dump(path, compress):
    pages = [
        dict(title="Ada Lovelace", ns=0, id=1, redirect="", text=ARTICLE),
        dict(title="Lovelace", ns=0, id=2, redirect='\n    <redirect title="Ada Lovelace" />',
             text="#REDIRECT [[Ada Lovelace]]"),
        dict(title="Talk:Ada Lovelace", ns=1, id=3, redirect="", text="Talk page text. It is long."),
        dict(title="Second", ns=0, id=4, redirect="",
             text="The second article has text. It has two sentences & an entity."),
        dict(title="Old redirect", ns=0, id=5, redirect="", text="#redirect [[Second]]"),
    ]
    body = "".join(PAGE.format(**{**p, "text": escape(p["text"])}) for p in pages)
    xml = ('<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10" '
           'xml:lang="en">\n  <siteinfo>\n    <namespaces>\n'
           '      <namespace key="0" case="first-letter" />\n'
           '      <namespace key="6" case="first-letter">File</namespace>\n'
           '      <namespace key="14" case="first-letter">Category</namespace>\n'
           '    </namespaces>\n  </siteinfo>\n' + body + '</mediawiki>\n')
    data = xml.encode("utf-8")
    if compress:
        path.write_bytes(bz2.compress(data))
    else:
        path.write_bytes(data)
    return str(path)


@pytest.mark.parametrize("name", ["dump.xml", "dump.xml.bz2"])
def test_xml_dump_articles_only_plain_text_sentences(tmp_path, name):
    path = write_dump(tmp_path / name, compress=name.endswith(".bz2"))
    stats = collections.Counter()
    documents = list(wikipedia.iter_documents(path, stats=stats))
    assert stats["redirect_pages"] == 2 and stats["non_article_pages"] == 1
    assert len(documents) == 2
    ada, second = documents
    assert ada[0] == "Ada Lovelace was an English mathematician and writer."
    assert ada[1] == "She is known for her work on the analytical engine of Charles Babbage."
    assert "Ada was born in London on 10 December 1815." in ada
    assert "She corresponded with Mr. De Morgan about calculus." in ada  # no split at "Mr."
    text = " ".join(ada)
    for dropped in ("Infobox", "Toole", "Portrait", "thumb", "Early life", "TableCellText",
                    "Category", "English mathematicians", "de:", "[[", "{{", "'''"):
        assert dropped not in text
    assert second == ["The second article has text.", "It has two sentences & an entity."]


def test_xml_dump_is_streamed(tmp_path):
    path = write_dump(tmp_path / "dump.xml", compress=False)
    raw = wikipedia.iter_raw_documents(path, "wikipedia_xml")
    first = next(raw)  # a generator: pages come one at a time
    assert first.kind == wikipedia.WIKITEXT and first.language == "en"
    assert "file" in first.dropped_link_prefixes


def test_malformed_xml_names_the_file(tmp_path):
    path = tmp_path / "broken.xml"
    path.write_text("<mediawiki><page><title>x</title></mediawiki>", encoding="utf-8")
    with pytest.raises(ValueError, match="broken.xml"):
        list(wikipedia.iter_documents(str(path)))


def test_text_format_blank_lines_and_bad_bytes(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_bytes(b"First sentence.\n  Second one.  \n\xc3\x28 bad\n\n\n"
                     b"Other document.\n\xff\n")
    stats = collections.Counter()
    documents = list(wikipedia.iter_documents(str(path), stats=stats))
    assert documents == [["First sentence.", "Second one."], ["Other document."]]
    assert stats["non_utf8_lines"] == 2


def test_wikiextractor_doc_and_json(tmp_path):
    doc = tmp_path / "wiki_00"
    doc.write_text(
        '<doc id="1" url="u" title="Alpha">\nAlpha\n\nAlpha is a letter. It comes first.\n'
        'Beta follows.\n</doc>\n<doc id="2" url="u" title="Empty">\nEmpty\n\n</doc>\n',
        encoding="utf-8")
    stats = collections.Counter()
    assert wikipedia.detect_format(str(doc)) == "wikiextractor"
    assert list(wikipedia.iter_documents(str(doc), stats=stats)) == [
        ["Alpha is a letter.", "It comes first.", "Beta follows."]]
    assert stats["empty_documents"] == 1
    lines = [json.dumps({"id": "1", "title": "Gamma", "text": "Gamma\n\nGamma is here. So is delta."}),
             "{not json", json.dumps({"id": "2", "title": "E", "text": "E\n\n"})]
    js = tmp_path / "wiki_01"
    js.write_text("\n".join(lines) + "\n", encoding="utf-8")
    stats = collections.Counter()
    assert list(wikipedia.iter_documents(str(js), stats=stats)) == [["Gamma is here.", "So is delta."]]
    assert stats["invalid_json_lines"] == 1 and stats["empty_documents"] == 1


def test_globs_and_missing_files(tmp_path):
    for name in ("b.txt", "a.txt"):
        (tmp_path / name).write_text(f"{name} text.\n", encoding="utf-8")
    files = wikipedia.resolve_input_files(f"{tmp_path}/*.txt, {tmp_path}/a.txt")
    assert [f.rsplit("/", 1)[1] for f in files] == ["a.txt", "b.txt", "a.txt"]
    with pytest.raises(FileNotFoundError, match="missing-"):
        wikipedia.resolve_input_files(f"{tmp_path}/a.txt,{tmp_path}/missing-*.txt")
    with pytest.raises(FileNotFoundError, match="empty"):
        wikipedia.resolve_input_files(" , ")
    with pytest.raises(ValueError, match="input_format"):
        list(wikipedia.iter_documents(files[0], input_format="html"))


def test_real_bulgarian_dump(shared_data_dir):
    stats = collections.Counter()
    path = shared_data_dir / "wiki" / "bgwiki-sample-pages-articles.xml.bz2"
    documents = list(wikipedia.iter_documents(str(path), stats=stats))
    assert documents and stats["non_article_pages"] >= 1
    assert documents[0][0].startswith("Григорианският календар")
    assert all(s.strip() == s and s for d in documents for s in d)


@pytest.mark.slow
def test_real_english_dump_and_wikiextractor(shared_data_dir):
    stats = collections.Counter()
    dump = shared_data_dir / "wiki" / "enwiki-sample-pages-articles.xml.bz2"
    documents = list(wikipedia.iter_documents(str(dump), stats=stats))
    assert len(documents) == 106 and stats["redirect_pages"] == 99
    extracted = shared_data_dir / "wiki" / "enwiki_wikiextractor_wiki_00"
    assert len(list(wikipedia.iter_documents(str(extracted)))) == 36


@pytest.mark.parametrize("suffix, compress", [(".txt.bz2", bz2.compress),
                                              (".txt.gz", gzip.compress)])
def test_truncated_compressed_input_is_named(tmp_path, suffix, compress):
    text = "".join(f"Sentence number {i} of the first document.\n" for i in range(2000))
    data = compress(text.encode("utf-8"))
    path = tmp_path / ("corpus" + suffix)
    path.write_bytes(data[:len(data) // 2])  # an interrupted download
    with pytest.raises(ValueError, match=f"{path}: the compressed file is truncated or "
                                         "corrupt"):
        list(wikipedia.iter_documents(str(path), "text"))
    with pytest.raises(FileNotFoundError):
        list(wikipedia.iter_documents(str(tmp_path / "missing.txt.bz2"), "text"))


def test_unknown_language_is_refused_naming_the_accepted_codes(tmp_path):
    """issue 26: language="xx" was split as English without a word."""
    path = write_dump(tmp_path / "dump.xml", compress=False)
    with pytest.raises(ValueError, match=r"language='xx': pysbd has no sentence splitter "
                                         r"for it; expected one of am, ar, .*, en, .*, zh"):
        wikipedia.iter_raw_documents(path, "wikipedia_xml", language="xx")
    with pytest.raises(ValueError, match="language='xx'"):
        wikipedia.split_sentences("One. Two.", "xx")
    first = next(wikipedia.iter_raw_documents(path, "wikipedia_xml", language="de"))
    assert first.language == "de"
    assert "en" in wikipedia.LANGUAGES and "xx" not in wikipedia.LANGUAGES
