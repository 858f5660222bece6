"""Documents of every format, made with the formats' own libraries, for the tests."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Sequence

import docx
import openpyxl
import pptx
from fpdf import FPDF


def pdf(pages: list[str], *, title: str = "", password: str | None = None) -> bytes:
    """A PDF with one paragraph per page."""
    doc = FPDF()
    doc.set_font("helvetica", size=12)
    if title:
        doc.set_title(title)
    if password is not None:
        doc.set_encryption(owner_password=password + "-owner", user_password=password)
    for text in pages:
        doc.add_page()
        doc.multi_cell(0, 8, text)
    return bytes(doc.output())


def word(title: str, sections: dict[str, str], table: list[list[str]] | None = None) -> bytes:
    """A Word document: a level-1 title, a level-2 heading per section, an optional table."""
    doc = docx.Document()
    doc.add_heading(title, 1)
    for heading, text in sections.items():
        doc.add_heading(heading, 2)
        doc.add_paragraph(text)
    if table:
        grid = doc.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, value in enumerate(row):
                grid.cell(r, c).text = value
    out = io.BytesIO()
    doc.save(out)
    return out.getvalue()


def slides(pairs: list[tuple[str, str]]) -> bytes:
    """A PowerPoint deck: one title-and-content slide per pair."""
    deck = pptx.Presentation()
    for title, text in pairs:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = text
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def sheet(name: str, rows: Sequence[Sequence[object]]) -> bytes:
    """An Excel workbook of one sheet."""
    book = openpyxl.Workbook()
    ws = book.active
    assert ws is not None
    ws.title = name
    for row in rows:
        ws.append(row)
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def archive_bomb(part: str = "word/document.xml", unpacked: int = 64 * 1024**2) -> bytes:
    """An Office-looking archive whose one part unpacks to ``unpacked`` bytes of zeros."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        with z.open(part, "w", force_zip64=True) as member:
            block = b"\0" * (1024 * 1024)
            for _ in range(unpacked // len(block)):
                member.write(block)
    return out.getvalue()


#: Office formats' content types, by suffix.
OOXML = {
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
}
