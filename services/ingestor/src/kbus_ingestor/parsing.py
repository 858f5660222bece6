"""From a document's bytes to text that keeps what retrieval uses: headings, pages, rows.

HTML goes through trafilatura (the page's main content, as Markdown); PDF through pypdf, page
by page; Word, PowerPoint and Excel files through markitdown's converters (Markdown headings and
tables); CSV and JSON records through the document's template. Each parser runs in a worker
process (:mod:`kbus_ingestor.sandbox`), so this module keeps to plain data in and out.
"""

from __future__ import annotations

import bisect
import csv
import io
import json
import re
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kbus_contract import ContentType, RecordTemplate
from kbus_contract.base import Metadata
from kbus_contract.documents import template_fields
from kbus_contract.errors import ErrorCode
from kbus_contract.formats import FORMATS


class ParseError(Exception):
    """The bytes cannot become a document; ``code`` and the message say why."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message, code)
        self.message = message
        self.code = code


@dataclass(frozen=True)
class Record:
    """Where one record's text lies in the parsed text, with its heading and metadata."""

    start: int
    end: int
    title: str
    metadata: Metadata


@dataclass(frozen=True)
class Parsed:
    """A document as text: Markdown when its format has structure, with page starts."""

    text: str
    markdown: bool
    title: str = ""
    pages: tuple[int, ...] = ()  # the offset where each page (or slide) begins
    records: tuple[Record, ...] = ()

    def page_spans(self) -> list[tuple[int, int]]:
        """Where each page lies (the whole text when there are no pages)."""
        if not self.pages:
            return [(0, len(self.text))]
        ends = [start - 2 for start in self.pages[1:]] + [len(self.text)]
        return list(zip(self.pages, ends, strict=True))

    def page_at(self, offset: int) -> int | None:
        """The page (from 1) holding ``offset``, if the document has pages."""
        if not self.pages:
            return None
        return max(1, bisect.bisect_right(self.pages, offset))


@dataclass(frozen=True)
class Limits:
    """What a parser may unpack: an Office file's declared contents, records per document."""

    max_unpacked_bytes: int
    max_records: int


#: Office Open XML formats, and the folder each one's archive must hold.
OOXML_PART = {ct: f.archive_part for ct, f in FORMATS.items() if f.archive_part is not None}


def parse(
    content_type: ContentType, data: bytes, template: RecordTemplate | None, limits: Limits
) -> Parsed:
    """Parse one document's bytes.

    Raises:
        ParseError: the bytes are not what the content type says, unpack past the limits,
            are encrypted, hold no text, or a record does not fit its template.
    """
    check_bytes(content_type, data, limits)
    if content_type.records:
        assert template is not None  # the contract requires one
        return _records(content_type, _decode(data), template, limits)
    parsed = PARSERS[content_type](data)
    if not parsed.text or parsed.text.isspace():  # (strip() would copy a large text)
        raise ParseError("no text could be read from the document", ErrorCode.EMPTY_DOCUMENT)
    return parsed


def check_bytes(content_type: ContentType, data: bytes, limits: Limits) -> None:
    """Refuse bytes that are not what their content type says, and Office files whose
    contents unpack past the limit, before any parser reads them."""
    if content_type is ContentType.PDF:
        if not data.lstrip()[:5] == b"%PDF-":
            raise _mismatch(content_type, "it does not start with %PDF-")
    elif content_type in OOXML_PART:
        _check_ooxml(content_type, data, limits)
    elif b"\x00" in data[:65_536]:
        raise _mismatch(content_type, "it holds NUL bytes, as binary files do")


def _check_ooxml(content_type: ContentType, data: bytes, limits: Limits) -> None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            entries = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise _mismatch(content_type, f"it is not a zip archive ({exc})") from exc
    names = {e.filename for e in entries}
    if "[Content_Types].xml" not in names or not any(
        n.startswith(OOXML_PART[content_type]) for n in names
    ):
        raise _mismatch(content_type, "its archive holds no such document")
    unpacked = sum(e.file_size for e in entries)
    if unpacked > limits.max_unpacked_bytes:
        raise ParseError(
            f"the file unpacks to {unpacked} bytes; the limit is {limits.max_unpacked_bytes}",
            ErrorCode.TOO_LARGE,
        )


def _mismatch(content_type: ContentType, why: str) -> ParseError:
    return ParseError(
        f"the bytes are not {content_type.value}: {why}", ErrorCode.CONTENT_TYPE_MISMATCH
    )


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ParseError(f"the text is not UTF-8: {exc}", ErrorCode.INVALID_TEXT) from exc


def _plain(data: bytes) -> Parsed:
    return Parsed(_decode(data), markdown=False)


def _markdown(data: bytes) -> Parsed:
    return Parsed(_decode(data), markdown=True)


def _html(data: bytes) -> Parsed:
    """The page's main content (trafilatura), or, when that finds nothing or drops every
    heading the page has, the whole page but its navigation (markitdown)."""
    import trafilatura
    from trafilatura.settings import use_config

    html = _decode(data)
    config = use_config()
    config.set("DEFAULT", "MIN_EXTRACTED_SIZE", "1")  # a short page is still a page
    text = trafilatura.extract(
        html,
        output_format="markdown",
        include_tables=True,
        include_formatting=True,
        include_comments=False,
        favor_recall=True,
        config=config,
    )
    meta = trafilatura.extract_metadata(html)
    title = (meta.title if meta is not None else None) or ""
    if not text or (_HEADING_TAG.search(html) and not _HEADING_LINE.search(text)):
        text = _whole_page(html)
    return Parsed(text, markdown=True, title=title)


_HEADING_TAG = re.compile(r"<h[1-6][\s>]", re.IGNORECASE)
_HEADING_LINE = re.compile(r"^#{1,6} ", re.MULTILINE)


def _whole_page(html: str) -> str:
    from bs4 import BeautifulSoup
    from markitdown import StreamInfo
    from markitdown.converters import HtmlConverter

    soup = BeautifulSoup(html, "html.parser")
    for tag in soup(["nav", "header", "footer", "aside", "script", "style", "noscript"]):
        tag.decompose()
    page = io.BytesIO(str(soup).encode("utf-8"))
    result = HtmlConverter().convert(page, StreamInfo(extension=".html", charset="utf-8"))
    return result.markdown.strip()


def _pdf(data: bytes) -> Parsed:
    from pypdf import PdfReader
    from pypdf.errors import FileNotDecryptedError, PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise ParseError("the PDF is password-protected", ErrorCode.ENCRYPTED)
        pages = [page.extract_text() or "" for page in reader.pages]
        title = str(reader.metadata.title or "") if reader.metadata else ""
    except FileNotDecryptedError as exc:
        raise ParseError("the PDF is password-protected", ErrorCode.ENCRYPTED) from exc
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as exc:
        raise ParseError(f"unreadable PDF: {exc}", ErrorCode.UNREADABLE) from exc
    return _paged([p.strip() for p in pages], markdown=False, title=title)


def _paged(pages: list[str], *, markdown: bool, title: str = "") -> Parsed:
    """Pages joined by blank lines, each page's start remembered."""
    starts, parts, offset = [], [], 0
    for page in pages:
        starts.append(offset)
        parts.append(page)
        offset += len(page) + 2
    return Parsed("\n\n".join(parts), markdown=markdown, title=title, pages=tuple(starts))


_SLIDE = re.compile(r"^<!-- Slide number: \d+ -->\n?", re.MULTILINE)


def _office(content_type: ContentType) -> Callable[[bytes], Parsed]:
    def convert(data: bytes) -> Parsed:
        from markitdown import StreamInfo
        from markitdown.converters import DocxConverter, PptxConverter, XlsxConverter

        converter = {
            ContentType.DOCX: DocxConverter,
            ContentType.PPTX: PptxConverter,
            ContentType.XLSX: XlsxConverter,
        }[content_type]
        extension = content_type.facts.extensions[0]
        try:
            result = converter().convert(  # type: ignore[no-untyped-call]
                io.BytesIO(data), StreamInfo(extension=extension)
            )
        except Exception as exc:  # each format's library raises its own kinds
            raise ParseError(
                f"unreadable {extension[1:]} file: {exc}", ErrorCode.UNREADABLE
            ) from exc
        text, title = result.markdown, result.title or ""
        if content_type is ContentType.PPTX:
            # Each slide is a page, so a citation can name it.
            slides = [s.strip() for s in _SLIDE.split(text) if s.strip()]
            return _paged(slides, markdown=True, title=title)
        return Parsed(text, markdown=True, title=title)

    return convert


#: The parser of each format but records (those a template renders).
PARSERS: dict[ContentType, Callable[[bytes], Parsed]] = {
    ContentType.PLAIN: _plain,
    ContentType.MARKDOWN: _markdown,
    ContentType.HTML: _html,
    ContentType.PDF: _pdf,
    **{ct: _office(ct) for ct in OOXML_PART},
}


def _records(
    content_type: ContentType, text: str, template: RecordTemplate, limits: Limits
) -> Parsed:
    """Each record through its template: one block of text per record, with its heading and
    the metadata fields the template names."""
    parts: list[str] = []
    records: list[Record] = []
    offset = 0
    for n, row in enumerate(_rows(content_type, text), start=1):
        if n > limits.max_records:
            raise ParseError(f"more than {limits.max_records} records", ErrorCode.TOO_LARGE)
        body = _render(template.text, row, n)
        title = _render(template.title, row, n) if template.title else ""
        meta = {name: _field(row, name, n) for name in template.metadata}
        records.append(Record(offset, offset + len(body), title, meta))
        parts.append(body)
        offset += len(body) + 2
    if not records:
        raise ParseError("the document holds no records", ErrorCode.EMPTY_DOCUMENT)
    return Parsed("\n\n".join(parts), markdown=False, records=tuple(records))


def _rows(content_type: ContentType, text: str) -> Iterator[dict[str, Any]]:
    if content_type is ContentType.CSV:
        try:
            yield from csv.DictReader(io.StringIO(text))
        except csv.Error as exc:
            raise ParseError(f"unreadable CSV: {exc}", ErrorCode.UNREADABLE) from exc
        return
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(f"unreadable JSON: {exc}", ErrorCode.UNREADABLE) from exc
    rows = value if isinstance(value, list) else [value]
    for n, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            raise ParseError(f"record {n} is not an object", ErrorCode.TEMPLATE_MISMATCH)
        yield row


def _render(template: str, row: dict[str, Any], n: int) -> str:
    values = {name: _text(_field(row, name, n)) for name in template_fields(template)}
    return template.format_map(values).strip()


def _field(row: dict[str, Any], name: str, n: int) -> Any:
    value = row.get(name)
    if value is None or value == "":
        raise ParseError(
            f"record {n} does not fit its template: it has no {name!r}", ErrorCode.TEMPLATE_MISMATCH
        )
    return value if isinstance(value, str | int | float | bool) else _text(value)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
