"""Files and web pages as documents: published as they are, parsed by the ingestor."""

from __future__ import annotations

import fnmatch
import hashlib
import html
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from kbus_contract import ContentType
from kbus_contract.formats import by_extension
from kbus_contract.identifiers import document_id_of

#: What each file suffix is published as.
SUFFIXES = by_extension()
TEXT = {ContentType.PLAIN, ContentType.MARKDOWN}


@dataclass(frozen=True)
class Source:
    """A file or a web page, ready to publish: text inline, other bytes by claim check."""

    document_id: str
    fields: dict[str, Any] = field(default_factory=dict)
    #: Where it came from, as a person names it (the file's path, the page's address).
    origin: str = ""


class UnsupportedFileError(Exception):
    """The file cannot become a document; the message says why."""


@dataclass(frozen=True)
class Selection:
    """Which files of a folder are documents: those matching an ``include`` glob (all when
    none is given) and no ``exclude`` glob, each matched against the path relative to the
    folder (``docs/*.md``, ``**/drafts/*``); hidden files and folders (``.git``) are skipped
    unless ``hidden``."""

    include: Sequence[str] = ()
    exclude: Sequence[str] = ()
    hidden: bool = False

    def takes(self, relative: Path) -> bool:
        """Whether the file at ``relative`` (to its folder) is one of the documents."""
        if not self.hidden and any(part.startswith(".") for part in relative.parts):
            return False
        name = relative.as_posix()
        if self.include and not any(_matches(name, g) for g in self.include):
            return False
        return not any(_matches(name, g) for g in self.exclude)


def _matches(name: str, glob: str) -> bool:
    # ``**/`` also matches no folder at all, as in a shell with globstar.
    return fnmatch.fnmatchcase(name, glob) or (
        glob.startswith("**/") and fnmatch.fnmatchcase(name, glob[3:])
    )


def find_files(
    paths: list[Path], selection: Selection | None = None
) -> Iterator[tuple[Path, Path]]:
    """Every file under the given paths that ``selection`` takes, with the root its id is
    relative to (a file named on its own is always taken)."""
    chosen = selection or Selection()
    for path in paths:
        if path.is_dir():
            for file in sorted(p for p in path.rglob("*") if p.is_file()):
                if chosen.takes(file.relative_to(path)):
                    yield file, path
        else:
            yield path, path.parent


def file_source(file: Path, root: Path) -> Source:
    """The document a file is, before it is read: its id (its path relative to ``root``,
    made an id by :func:`document_id_of`) and its path."""
    return Source(document_id_of(file.relative_to(root).as_posix()), origin=str(file))


def read_file(file: Path, root: Path, template: dict[str, Any] | None) -> Source:
    """A file as it is, with its content type from its suffix (the ingestor checks the bytes)
    and its id from its path relative to ``root`` (:func:`document_id_of`).

    Raises:
        UnsupportedFileError: the type is not supported, records have no template, the file
            is empty, or a text file is not UTF-8.
    """
    content_type = SUFFIXES.get(file.suffix.lower())
    if content_type is None:
        raise UnsupportedFileError(
            f"unsupported type {file.suffix or '(none)'}: kbus ingests " + ", ".join(SUFFIXES)
        )
    if content_type.records and template is None:
        raise UnsupportedFileError("records need a template (--record-text)")
    fields: dict[str, Any] = {
        "content_type": content_type,
        "source_uri": file.resolve().as_uri(),
        "title": file.stem,
        "template": template if content_type.records else None,
    }
    data = file.read_bytes()
    if not data.strip():
        raise UnsupportedFileError("the file is empty")
    if content_type in TEXT:
        try:
            fields["text"] = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UnsupportedFileError(f"not UTF-8 text: {exc}") from exc
        if content_type is ContentType.MARKDOWN:
            fields["title"] = _first_heading(fields["text"]) or file.stem
    else:
        # The ingestor takes the title from the document itself when there is one.
        fields["title"] = ""
        fields["data"] = data
    return Source(file_source(file, root).document_id, fields, str(file))


def page(url: str) -> Source:
    """A web page the ingestor fetches; its address is its id."""
    return Source(url.split("://", 1)[1][:256].rstrip("/") or url, {"url": url}, url)


def _first_heading(text: str) -> str:
    for line in text.splitlines():
        if line.startswith("#"):
            return line.lstrip("#").strip()
    return ""


_LOC = re.compile(r"<loc>\s*([^<\s]+)\s*</loc>", re.IGNORECASE)
_URL = re.compile(r"<url>(.*?)</url>", re.IGNORECASE | re.DOTALL)
_LASTMOD = re.compile(r"<lastmod>\s*([^<\s]+)\s*</lastmod>", re.IGNORECASE)
_WEB = ("http://", "https://")


def sitemap(url: str, *, max_bytes: int = 10 * 1024**2, depth: int = 1) -> list[str]:
    """The page addresses a sitemap lists (a sitemap index's sitemaps read in turn, one
    level deep). Read with a size cap and a timeout; addresses are taken from ``<loc>``
    elements without an XML parser, so no entity in the file is ever expanded.

    Raises:
        UnsupportedFileError: the sitemap cannot be read.
    """
    return [loc for loc, _ in sitemap_pages(url, max_bytes=max_bytes, depth=depth)]


def sitemap_pages(
    url: str, *, max_bytes: int = 10 * 1024**2, depth: int = 1
) -> list[tuple[str, str | None]]:
    """:func:`sitemap`'s pages, each with its ``<lastmod>`` when the sitemap gives one."""
    text = _read(url, max_bytes, "the sitemap").decode("utf-8", "replace")
    if "<sitemapindex" in text and depth > 0:
        inner = [html.unescape(loc) for loc in _LOC.findall(text)]
        return [
            p for one in inner for p in sitemap_pages(one, max_bytes=max_bytes, depth=depth - 1)
        ]
    pages: list[tuple[str, str | None]] = []
    for block in _URL.findall(text):
        loc, lastmod = _LOC.search(block), _LASTMOD.search(block)
        if loc is not None and html.unescape(loc.group(1)).startswith(_WEB):
            pages.append((html.unescape(loc.group(1)), lastmod.group(1) if lastmod else None))
    return pages


def page_version(url: str, *, max_bytes: int = 50 * 1024**2) -> str:
    """A page's version when its sitemap gives no date: the hash of what it serves now."""
    return "sha256:" + hashlib.sha256(_read(url, max_bytes, "the page")).hexdigest()[:32]


def _read(url: str, max_bytes: int, what: str) -> bytes:
    try:
        with httpx.stream("GET", url, follow_redirects=True, timeout=30.0) as response:
            response.raise_for_status()
            body = b""
            for piece in response.iter_bytes():
                body += piece
                if len(body) > max_bytes:
                    raise UnsupportedFileError(f"{what} is over {max_bytes} bytes")
    except httpx.HTTPError as exc:
        raise UnsupportedFileError(f"{what} could not be read: {exc}") from exc
    return body
