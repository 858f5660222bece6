"""Reading files into documents: text, Markdown, HTML and PDF."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

TEXT = {".txt", ".text"}
MARKDOWN = {".md", ".markdown"}
HTML = {".html", ".htm"}
PDF = {".pdf"}
SUPPORTED = TEXT | MARKDOWN | HTML | PDF


@dataclass(frozen=True)
class FileDocument:
    """What a file becomes before it is published."""

    document_id: str
    title: str
    text: str
    content_type: str
    source_uri: str


class UnsupportedFileError(Exception):
    """The file cannot become a document; the message says why."""


def find_files(paths: list[Path]) -> Iterator[tuple[Path, Path]]:
    """Every file under the given paths, with the root its id is relative to."""
    for path in paths:
        if path.is_dir():
            for file in sorted(p for p in path.rglob("*") if p.is_file()):
                if not any(part.startswith(".") for part in file.relative_to(path).parts):
                    yield file, path
        else:
            yield path, path.parent


def read_document(file: Path, root: Path) -> FileDocument:
    """Parse one file.

    Raises:
        UnsupportedFileError: the type is not supported, or the file has no text.
    """
    suffix = file.suffix.lower()
    if suffix not in SUPPORTED:
        raise UnsupportedFileError(
            f"unsupported type {suffix or '(none)'}: kbus ingests " + ", ".join(sorted(SUPPORTED))
        )
    doc_id = file.relative_to(root).as_posix()
    if suffix in PDF:
        title, text, content_type = _pdf(file)
    elif suffix in HTML:
        title, text, content_type = _html(file)
    else:
        text = file.read_text(encoding="utf-8", errors="replace")
        content_type = "text/markdown" if suffix in MARKDOWN else "text/plain"
        title = _first_heading(text) if suffix in MARKDOWN else ""
    if not text.strip():
        raise UnsupportedFileError("no text could be read from the file")
    return FileDocument(doc_id, title or file.stem, text, content_type, file.resolve().as_uri())


def _first_heading(text: str) -> str:
    for line in text.splitlines():
        if line.startswith("#"):
            return line.lstrip("#").strip()
    return ""


def _html(file: Path) -> tuple[str, str, str]:
    """HTML as Markdown-ish text: headings become ``#`` lines so chunks get heading paths."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(file.read_bytes(), "html.parser")
    for tag in soup(["script", "style", "noscript", "template"]):
        tag.decompose()
    title = soup.title.get_text(strip=True) if soup.title else ""
    if soup.title:
        soup.title.decompose()
    for level in range(1, 7):
        for heading in soup.find_all(f"h{level}"):
            heading.replace_with(f"\n\n{'#' * level} {heading.get_text(' ', strip=True)}\n\n")
    for block in soup.find_all(["p", "li", "pre", "tr", "br", "div"]):
        block.insert_after("\n")
    lines = [" ".join(line.split()) for line in soup.get_text().splitlines()]
    text = "\n".join(lines)
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return title, text.strip(), "text/markdown"


def _pdf(file: Path) -> tuple[str, str, str]:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(file)
        pages = [page.extract_text() or "" for page in reader.pages]
    except (PdfReadError, ValueError, OSError) as exc:
        raise UnsupportedFileError(f"unreadable PDF: {exc}") from exc
    title = ""
    if reader.metadata and reader.metadata.title:
        title = str(reader.metadata.title)
    return title, "\n\n".join(p.strip() for p in pages if p.strip()), "text/plain"
