"""Corpus readers: plain text, WikiExtractor output and MediaWiki XML dumps.

Every reader turns a file into documents, each a list of sentence strings:

* ``text``: the original create_pretraining_data.py format, one sentence per line and
  a blank line between documents.
* ``wikiextractor``: WikiExtractor output, ``<doc id=.. title=..>`` ... ``</doc>`` with
  one paragraph per line, or its ``--json`` form (one JSON object per line with a
  ``text`` field). The title line is dropped; paragraphs are split into sentences.
* ``wikipedia_xml``: a MediaWiki ``pages-articles`` dump (``.xml``, ``.xml.bz2`` or
  ``.xml.gz``), streamed with ``xml.etree.ElementTree.iterparse``. Only the article
  namespace (0) is kept, redirects are skipped, wikitext becomes plain text with
  mwparserfromhell (templates, references, tables, headings, file and category links
  dropped) and paragraphs are split into sentences with pysbd.

Reading is split in two steps so that the expensive one can run in worker processes:
``iter_raw_documents`` streams cheap ``RawDocument`` records from a file and
``raw_document_to_sentences`` turns one into sentences. ``iter_documents`` chains them.
Lines that cannot be used are counted in a ``collections.Counter`` (``stats``) under a
reason (``non_utf8_lines``, ``invalid_json_lines``, ``redirect_pages``, ...) and
skipped; they never stop the run.
"""

import bz2
import collections
import glob
import gzip
import json
import os
import re
import zlib
import xml.etree.ElementTree as ElementTree
from typing import (BinaryIO, Callable, Counter, Iterable, Iterator, List, NamedTuple, Optional,
                    Sequence, Union)

import pysbd.languages

from bert_tf.io import input_paths

INPUT_FORMATS = ("auto", "text", "wikiextractor", "wikipedia_xml")
# The language codes pysbd splits sentences of (`--language`).
LANGUAGES = tuple(sorted(pysbd.languages.LANGUAGE_CODES))

# Kinds of RawDocument content.
SENTENCES = "sentences"    # list of sentence strings, used as they are
PARAGRAPHS = "paragraphs"  # list of paragraph strings, still to be split
WIKITEXT = "wikitext"      # one wikitext string, still to be parsed and split

_XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
# Namespace keys whose links are not article text: Media, File, Category.
_DROPPED_LINK_NAMESPACES = ("-2", "6", "14")
_DEFAULT_DROPPED_PREFIXES = ("media", "file", "image", "category")
_DROPPED_TAGS = frozenset((
    "ref", "references", "table", "gallery", "math", "chem", "ce", "score", "timeline",
    "imagemap", "syntaxhighlight", "source", "pre", "nowiki", "templatedata", "graph",
    "mapframe", "maplink", "hiero", "inputbox", "categorytree", "div", "noinclude"))
_INTERLANGUAGE_LINK = re.compile(r"^:?[a-z]{2,3}(-[a-z]+)*:")
_WHITESPACE = re.compile(r"\s+")
_DOC_START = re.compile(r'^<doc\s[^>]*?title="([^"]*)"[^>]*>\s*$')


class RawDocument(NamedTuple):
    """One document before sentence splitting.

    Attributes:
      kind: SENTENCES, PARAGRAPHS or WIKITEXT.
      content: a list of strings (SENTENCES, PARAGRAPHS) or the wikitext string.
      language: pysbd language code for splitting.
      dropped_link_prefixes: lower-case namespace prefixes of links to drop (WIKITEXT).
    """
    kind: str
    content: Union[str, List[str]]
    language: str = "en"
    dropped_link_prefixes: tuple = _DEFAULT_DROPPED_PREFIXES


def local_matches(pattern: str) -> List[str]:
    """The files on local disk that a glob matches, sorted."""
    return sorted(m for m in glob.glob(pattern) if os.path.isfile(m))


def resolve_input_files(patterns: Union[str, Sequence[str]], match=local_matches,
                        exists=os.path.exists) -> List[str]:
    """The files of comma-separated paths and globs (or a list of them), through
    `bert_tf.io.input_paths.expand_input_paths`: a path that exists is that file, even
    with glob characters or commas in its name; each pattern's matches sorted.

    Args:
      patterns: comma-separated paths and globs, or a list of them.
      match: a glob -> its files (the Beam pipeline passes one that reads any
        Beam filesystem), and `exists` of the same filesystem.

    Raises:
      FileNotFoundError: naming the first path that is no file, or pattern that matches
        none.
    """
    return input_paths.expand_input_paths(patterns, "input_file", match=match, exists=exists)


def open_binary(path: str):
    """Opens a file for binary reading, decompressing .bz2 and .gz by their suffix."""
    if path.endswith(".bz2"):
        return bz2.open(path, "rb")
    if path.endswith(".gz"):
        return gzip.open(path, "rb")
    return open(path, "rb")


def detect_format(path: str, opener: Callable[[str], BinaryIO] = open_binary) -> str:
    """Guesses the input format of `path` from its name and first non-blank line."""
    name = re.sub(r"\.(bz2|gz)$", "", path)
    if name.endswith(".xml"):
        return "wikipedia_xml"
    with opener(path) as reader:
        for raw_line in reader:
            line = raw_line.strip()
            if not line:
                continue
            if line.startswith(b"<mediawiki") or line.startswith(b"<?xml"):
                return "wikipedia_xml"
            if line.startswith(b"<doc ") or line.startswith(b"<doc>"):
                return "wikiextractor"
            if line.startswith(b"{") and b'"text"' in line:
                return "wikiextractor"
            return "text"
    return "text"


def _decoded_lines(path: str, stats: Counter, opener=open_binary) -> Iterator[Optional[str]]:
    """Yields the lines of `path` stripped; None for a line that is not UTF-8.

    A line ends in LF, CRLF or CR alone (old Mac files).
    """
    with opener(path) as reader:
        for raw_line in reader:
            for piece in raw_line.splitlines() or [b""]:
                try:
                    yield piece.decode("utf-8").strip()
                except UnicodeDecodeError:
                    stats["non_utf8_lines"] += 1
                    yield None


def _iter_text(path: str, stats: Counter, opener=open_binary) -> Iterator[RawDocument]:
    """One sentence per line, blank lines between documents (the original format)."""
    sentences = []
    for line in _decoded_lines(path, stats, opener):
        if line is None:
            continue
        if line:
            sentences.append(line)
        elif sentences:
            yield RawDocument(SENTENCES, sentences)
            sentences = []
    if sentences:
        yield RawDocument(SENTENCES, sentences)


def _iter_wikiextractor(path: str, stats: Counter, language: str,
                        opener=open_binary) -> Iterator[RawDocument]:
    """WikiExtractor `<doc>` blocks or its --json lines; the title line is dropped."""
    title, paragraphs, in_doc = None, [], False
    for line_number, line in enumerate(_decoded_lines(path, stats, opener), start=1):
        if line is None:
            continue
        if not in_doc and line.startswith("{"):
            try:
                record = json.loads(line)
                text = record["text"]
            except (ValueError, KeyError, TypeError):
                stats["invalid_json_lines"] += 1
                continue
            yield from _wikiextractor_document(
                record.get("title"), text.split("\n"), stats, language)
            continue
        match = _DOC_START.match(line)
        if match or line.startswith("<doc"):
            title, paragraphs, in_doc = (match.group(1) if match else None), [], True
        elif line == "</doc>":
            if in_doc:
                yield from _wikiextractor_document(title, paragraphs, stats, language)
            in_doc = False
        elif in_doc:
            paragraphs.append(line)
        elif line:
            stats["lines_outside_doc"] += 1


def _wikiextractor_document(title, paragraphs, stats, language):
    """Builds one RawDocument from WikiExtractor paragraphs (title line removed)."""
    paragraphs = [p.strip() for p in paragraphs if p.strip()]
    if paragraphs and title is not None and paragraphs[0] == title.strip():
        paragraphs = paragraphs[1:]
    if not paragraphs:
        stats["empty_documents"] += 1
        return
    yield RawDocument(PARAGRAPHS, paragraphs, language)


def _local_name(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _iter_wikipedia_xml(path: str, stats: Counter, language: Optional[str],
                        opener=open_binary) -> Iterator[RawDocument]:
    """Streams article pages of a MediaWiki XML dump; memory stays flat."""
    dropped_prefixes = set(_DEFAULT_DROPPED_PREFIXES)
    root = None
    with opener(path) as reader:
        try:
            for event, element in ElementTree.iterparse(reader, events=("start", "end")):
                if root is None:
                    root = element
                    language = language or _dump_language(root.get(_XML_LANG, "en"))
                    continue
                if event != "end":
                    continue
                name = _local_name(element.tag)
                if name == "namespace" and element.get("key") in _DROPPED_LINK_NAMESPACES:
                    if element.text:
                        dropped_prefixes.add(element.text.strip().lower())
                elif name == "page":
                    document = _page_document(element, stats, language, tuple(dropped_prefixes))
                    root.clear()
                    if document is not None:
                        yield document
        except ElementTree.ParseError as error:
            raise ValueError(f"{path}: not a well-formed MediaWiki XML dump ({error})") from error


def _page_document(page, stats, language, dropped_prefixes) -> Optional[RawDocument]:
    """Returns the RawDocument of an article page, or None (counted) for others."""
    namespace, text, redirect = None, None, False
    for child in page.iter():
        name = _local_name(child.tag)
        if name == "ns":
            namespace = (child.text or "").strip()
        elif name == "redirect":
            redirect = True
        elif name == "text":
            text = child.text or ""
    if namespace not in (None, "0"):
        stats["non_article_pages"] += 1
        return None
    if redirect or text is None or text.lstrip()[:9].lower() == "#redirect":
        stats["redirect_pages"] += 1
        return None
    if not text.strip():
        stats["empty_documents"] += 1
        return None
    return RawDocument(WIKITEXT, text, language, dropped_prefixes)


def _dump_language(code: str) -> str:
    """The pysbd language of a dump's xml:lang (`en-GB` is `en`); English for a language
    pysbd does not split."""
    code = (code or "en").split("-")[0].lower()
    return code if code in LANGUAGES else "en"


def check_language(language: Optional[str]) -> Optional[str]:
    """`language` (None: from the dump, else English) when pysbd splits it.

    Raises:
      ValueError: naming the code and listing the accepted ones.
    """
    if language is not None and language not in LANGUAGES:
        raise ValueError(f"language={language!r}: pysbd has no sentence splitter for it; "
                         f"expected one of {', '.join(LANGUAGES)}")
    return language


def wikitext_to_paragraphs(wikitext: str, dropped_link_prefixes=_DEFAULT_DROPPED_PREFIXES) -> List[str]:
    """Plain-text paragraphs of an article's wikitext (mwparserfromhell).

    Templates, references, tables, headings, file/category links and interlanguage
    links are dropped; other links keep their label.
    """
    import mwparserfromhell  # pylint: disable=import-outside-toplevel
    code = mwparserfromhell.parse(wikitext)
    prefixes = tuple(p + ":" for p in dropped_link_prefixes)
    doomed = []
    for node in code.filter(recursive=True):
        kind = type(node).__name__
        if kind == "Heading" or kind == "Comment":
            doomed.append(node)
        elif kind == "Tag" and str(node.tag).strip().lower() in _DROPPED_TAGS:
            doomed.append(node)
        elif kind == "Wikilink":
            title = str(node.title).strip().lower().lstrip(":")
            if title.startswith(prefixes) or _INTERLANGUAGE_LINK.match(str(node.title).strip()):
                doomed.append(node)
    for node in doomed:
        try:
            code.remove(node)
        except ValueError:
            pass  # inside a node removed before
    text = code.strip_code(normalize=True, collapse=True)
    paragraphs = []
    for line in text.split("\n"):
        line = _WHITESPACE.sub(" ", line).strip()
        if line and not line.startswith(("{|", "|", "!")):
            paragraphs.append(line)
    return paragraphs


_SEGMENTERS = {}


def split_sentences(paragraph: str, language: str = "en") -> List[str]:
    """Splits a paragraph into sentences with pysbd (rule-based, no download)."""
    segmenter = _SEGMENTERS.get(language)
    if segmenter is None:
        check_language(language)
        segmenter = _SEGMENTERS[language] = pysbd.Segmenter(language=language, clean=False)
    try:
        pieces = segmenter.segment(paragraph)
    except Exception:  # pylint: disable=broad-except
        pieces = [paragraph]  # pysbd fails on rare inputs: keep the paragraph whole
    return [s.strip() for s in pieces if s.strip()]


def raw_document_to_sentences(document: RawDocument, stats: Optional[Counter] = None) -> List[str]:
    """Turns a RawDocument into its list of sentences (may be empty)."""
    if document.kind == SENTENCES:
        return list(document.content)
    if document.kind == WIKITEXT:
        paragraphs = wikitext_to_paragraphs(document.content, document.dropped_link_prefixes)
    else:
        paragraphs = document.content
    sentences = []
    for paragraph in paragraphs:
        sentences.extend(split_sentences(paragraph, document.language))
    if not sentences and stats is not None:
        stats["empty_documents"] += 1
    return sentences


def iter_raw_documents(path: str, input_format: str = "auto", stats: Optional[Counter] = None,
                       language: Optional[str] = None,
                       opener: Callable[[str], BinaryIO] = open_binary) -> Iterator[RawDocument]:
    """Streams the RawDocuments of one file.

    Args:
      path: the file (.bz2 and .gz are decompressed).
      input_format: one of INPUT_FORMATS; "auto" looks at the name and first line.
      stats: Counter updated in place with skip reasons.
      language: pysbd language for sentence splitting (one of LANGUAGES); None: the
        dump's xml:lang (XML) or English.
      opener: opens `path` for binary reading, decompressed (the Beam pipeline passes
        one that reads any Beam filesystem, or one stream range of a multistream dump).

    Raises:
      ValueError: unknown input_format or language, a malformed XML dump, or a file
        that is not text (`bert_tf.io.input_paths.check_text_file`).
    """
    stats = stats if stats is not None else collections.Counter()
    check_language(language)
    if input_format not in INPUT_FORMATS:
        raise ValueError(f"input_format {input_format!r}: expected one of {INPUT_FORMATS}")
    if input_format == "auto":
        input_format = _named_decompression_errors(path, detect_format, path, opener)
    # Binary data (an executable, a gzip without its suffix) is refused, naming the file
    # (an XML dump declares its own encoding: UTF-16 is read).
    _named_decompression_errors(path, input_paths.check_text_file, path, opener,
                                input_format == "wikipedia_xml")
    if input_format == "text":
        documents = _iter_text(path, stats, opener)
    elif input_format == "wikiextractor":
        documents = _iter_wikiextractor(path, stats, language or "en", opener)
    else:
        documents = _iter_wikipedia_xml(path, stats, language, opener)
    return _documents_naming_errors(path, documents)


# What bz2 / gzip raise for a truncated or corrupt file (besides file-system errors,
# which keep their own type and message).
_DECOMPRESSION_ERRORS = (EOFError, OSError, zlib.error)
_FILE_SYSTEM_ERRORS = (FileNotFoundError, PermissionError, IsADirectoryError,
                       NotADirectoryError)


def _decompression_error(path, error):
    if isinstance(error, _FILE_SYSTEM_ERRORS):
        return error
    return ValueError(f"{path}: the compressed file is truncated or corrupt ({error}); "
                      "download it again, or check it with `bzip2 -t` / `gzip -t`")


def _named_decompression_errors(path, function, *args):
    """`function(*args)`, a truncated or corrupt compressed file named in the error."""
    try:
        return function(*args)
    except _DECOMPRESSION_ERRORS as error:
        raise _decompression_error(path, error) from None


def _documents_naming_errors(path, documents):
    """Yields from `documents`; a truncated or corrupt compressed file is named."""
    try:
        yield from documents
    except _DECOMPRESSION_ERRORS as error:
        raise _decompression_error(path, error) from None


def iter_documents(path: Union[str, Iterable[str]], input_format: str = "auto",
                   stats: Optional[Counter] = None,
                   language: Optional[str] = None) -> Iterator[List[str]]:
    """Yields the documents of one or more files, each a non-empty list of sentences.

    Args:
      path: a file, comma-separated globs, or a list of them (see resolve_input_files).
      input_format: "auto", "text", "wikiextractor" or "wikipedia_xml".
      stats: optional Counter updated in place: skipped lines and pages by reason.
      language: pysbd language code for sentence splitting (default: from the dump or
        English).
    """
    stats = stats if stats is not None else collections.Counter()
    for file_path in resolve_input_files(path):
        for raw in iter_raw_documents(file_path, input_format, stats, language):
            sentences = raw_document_to_sentences(raw, stats)
            if sentences:
                yield sentences
