"""Document formats, declared once: each one's content type, file extensions, whether its bytes
are binary (they travel by claim check) or records (a template turns them into text), the
further media types a web server may send it as, and the folder an Office archive must hold.

Everything else is derived from :data:`FORMATS`: the CLI's suffix map, the fetcher's accepted
media types, the checks of the bytes, the parsers' coverage (a unit test) and the table in
docs/formats.md (``make docs``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class ContentType(StrEnum):
    """Document formats the ingestor understands (docs/formats.md, "Formats and sources")."""

    PLAIN = "text/plain"
    MARKDOWN = "text/markdown"
    HTML = "text/html"
    PDF = "application/pdf"
    DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
    XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
    CSV = "text/csv"
    JSON = "application/json"

    @property
    def facts(self) -> Format:
        return FORMATS[self]

    @property
    def binary(self) -> bool:
        """Bytes that are not text: they travel by claim check only."""
        return FORMATS[self].binary

    @property
    def records(self) -> bool:
        """Records that a :class:`RecordTemplate` turns into text."""
        return FORMATS[self].records


@dataclass(frozen=True)
class Format:
    """One format's facts."""

    #: As a person names it.
    name: str
    #: File name endings, lower case, the first the usual one.
    extensions: tuple[str, ...]
    #: Not text: travels by claim check, and its bytes are checked by their kind.
    binary: bool = False
    #: Records a template turns into text (one record, one chunk).
    records: bool = False
    #: Further media types a web server may send it as (besides its content type).
    served_as: tuple[str, ...] = ()
    #: An Office Open XML archive: the folder it must hold.
    archive_part: str | None = None
    #: May be fetched from a URL (records need a template, so they are published, not fetched).
    fetched: bool = True


FORMATS: dict[ContentType, Format] = {
    ContentType.PLAIN: Format("plain text", (".txt", ".text")),
    ContentType.MARKDOWN: Format("Markdown", (".md", ".markdown")),
    ContentType.HTML: Format("HTML", (".html", ".htm"), served_as=("application/xhtml+xml",)),
    ContentType.PDF: Format("PDF", (".pdf",), binary=True),
    ContentType.DOCX: Format("Word", (".docx",), binary=True, archive_part="word/"),
    ContentType.PPTX: Format("PowerPoint", (".pptx",), binary=True, archive_part="ppt/"),
    ContentType.XLSX: Format("Excel", (".xlsx",), binary=True, archive_part="xl/"),
    ContentType.CSV: Format("CSV", (".csv",), records=True, fetched=False),
    ContentType.JSON: Format("JSON", (".json",), records=True, fetched=False),
}


def by_extension() -> dict[str, ContentType]:
    """Each file name ending and the format it is published as."""
    return {ext: ct for ct, f in FORMATS.items() for ext in f.extensions}


def by_media_type() -> dict[str, ContentType]:
    """Each media type a fetched page may be served as, and the format it is parsed as."""
    return {
        media: ct for ct, f in FORMATS.items() if f.fetched for media in (ct.value, *f.served_as)
    }
