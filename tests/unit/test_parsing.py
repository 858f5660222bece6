"""Parsing each format keeps what retrieval uses; bad bytes are refused with the reason."""

from __future__ import annotations

import json

import pytest
from kbus_contract import ContentType, DocumentAdded, RecordTemplate
from kbus_ingestor.chunking import ChunkingConfig
from kbus_ingestor.parsing import Limits, ParseError, parse
from kbus_ingestor.profiling import Cutter

from tests import samples
from tests.cutting import chunk_document

LIMITS = Limits(max_unpacked_bytes=16 * 1024**2, max_records=1_000)
CONFIG = ChunkingConfig(size=512, overlap=50)
CUTTER = Cutter.recursive(CONFIG)


def _chunks(content_type: ContentType, data: bytes, template: RecordTemplate | None = None):  # type: ignore[no-untyped-def]
    parsed = parse(content_type, data, template, LIMITS)
    doc = DocumentAdded(
        tenant="t",
        library="l",
        document_id="d",
        title="",
        text="x",
        template=template,
        content_type=ContentType.JSON if template else ContentType.PLAIN,
    )
    return parsed, chunk_document(doc, CUTTER, 1_000, parsed=parsed).chunks


def test_html_keeps_the_main_content_its_headings_and_its_tables() -> None:
    html = (
        b"<html><head><title>Travel policy</title></head><body><nav>Home | Login</nav>"
        b"<article><h1>Travel</h1><p>Book trains for trips under four hours.</p>"
        b"<h2>Hotels</h2><p>Hotels are booked through the portal, up to 150 euros a night.</p>"
        b"<table><tr><th>city</th><th>limit</th></tr><tr><td>Paris</td><td>180</td></tr></table>"
        b"</article><footer>Copyright</footer></body></html>"
    )
    parsed, chunks = _chunks(ContentType.HTML, html)
    assert parsed.title == "Travel"  # the main heading, before the <title> a site decorates
    assert "Login" not in parsed.text
    assert "Copyright" not in parsed.text
    assert [c.heading_path for c in chunks] == [("Travel",), ("Travel", "Hotels")]
    assert "| Paris | 180 |" in chunks[1].text  # a table stays rows


def test_pdf_pages_become_page_numbers_on_each_chunk() -> None:
    pages = [f"Page {n} says the vault code rotates every {n} weeks. " * 12 for n in (1, 2, 3)]
    parsed, chunks = _chunks(ContentType.PDF, samples.pdf(pages, title="Vault"))
    assert parsed.title == "Vault"
    assert {c.page for c in chunks} == {1, 2, 3}
    for chunk in chunks:
        assert f"Page {chunk.page} says" in chunk.text or f"every {chunk.page} weeks" in chunk.text


def test_word_headings_become_paths_and_its_table_stays_rows() -> None:
    data = samples.word(
        "Handbook",
        {"Leave": "Ask your manager two weeks ahead.", "Expenses": "Receipts within 30 days."},
        table=[["day", "hours"], ["Monday", "8"]],
    )
    _, chunks = _chunks(ContentType.DOCX, data)
    paths = {c.heading_path for c in chunks}
    assert ("Handbook", "Leave") in paths
    assert ("Handbook", "Expenses") in paths
    assert any("| Monday | 8 |" in c.text for c in chunks)


def test_slides_are_pages_and_their_titles_headings() -> None:
    data = samples.slides([("Quarterly results", "Revenue grew 12 %"), ("Hiring", "Two roles")])
    _, chunks = _chunks(ContentType.PPTX, data)
    assert [(c.page, c.heading_path) for c in chunks] == [
        (1, ("Quarterly results",)),
        (2, ("Hiring",)),
    ]


def test_a_workbook_sheet_is_a_section_of_rows() -> None:
    _, chunks = _chunks(ContentType.XLSX, samples.sheet("Prices", [["item", "price"], ["tea", 3]]))
    assert chunks[0].heading_path == ("Prices",)
    assert "| tea | 3 |" in chunks[0].text


def test_each_record_is_a_chunk_with_its_heading_and_metadata() -> None:
    template = RecordTemplate(
        text="{name}: {description}", title="{name}", metadata=("sku", "price")
    )
    rows = [
        {
            "sku": "A1",
            "name": "Kettle",
            "description": "Boils a litre in two minutes.",
            "price": 30,
        },
        {"sku": "B2", "name": "Toaster", "description": "Four slots.", "price": 25},
    ]
    _, chunks = _chunks(ContentType.JSON, json.dumps(rows).encode(), template)
    assert [(c.text, c.heading_path, c.metadata) for c in chunks] == [
        ("Kettle: Boils a litre in two minutes.", ("Kettle",), {"sku": "A1", "price": 30}),
        ("Toaster: Four slots.", ("Toaster",), {"sku": "B2", "price": 25}),
    ]
    csv = b"sku,name,description,price\nA1,Kettle,Boils water.,30\n"
    parsed = parse(ContentType.CSV, csv, template, LIMITS)
    assert parsed.text == "Kettle: Boils water."
    assert parsed.records[0].metadata["price"] == "30"


@pytest.mark.parametrize(
    ("content_type", "data", "code"),
    [
        (ContentType.PDF, b"%PDF-1.4\n1 0 obj garbage", "unreadable"),
        (ContentType.PDF, samples.pdf(["secret"], password="hunter2"), "encrypted"),
        (ContentType.PDF, b"<html><body>not a pdf</body></html>", "content_type_mismatch"),
        (ContentType.DOCX, b"plain words, no archive", "content_type_mismatch"),
        (ContentType.XLSX, samples.word("t", {"a": "b"}), "content_type_mismatch"),
        (ContentType.DOCX, samples.archive_bomb(unpacked=64 * 1024**2), "too_large"),
        (ContentType.HTML, b"\x89PNG\r\n\x1a\n\x00\x00\x00", "content_type_mismatch"),
        (ContentType.PLAIN, "caf\u00e9".encode("latin-1"), "invalid_text"),
    ],
    ids=[
        "corrupt",
        "password",
        "html-as-pdf",
        "text-as-docx",
        "docx-as-xlsx",
        "bomb",
        "png",
        "latin-1",
    ],
)
def test_bad_bytes_are_refused_with_the_reason(
    content_type: ContentType, data: bytes, code: str
) -> None:
    with pytest.raises(ParseError) as caught:
        parse(content_type, data, None, LIMITS)
    assert caught.value.code == code, caught.value.message


def test_a_record_that_does_not_fit_its_template_is_named() -> None:
    template = RecordTemplate(text="{name}: {description}")
    rows = json.dumps([{"name": "a", "description": "b"}, {"name": "c"}]).encode()
    with pytest.raises(ParseError, match=r"record 2 does not fit its template.*'description'"):
        parse(ContentType.JSON, rows, template, LIMITS)


def test_a_template_is_data_never_code() -> None:
    with pytest.raises(ValueError, match="not a plain field name"):
        RecordTemplate(text="{name.__class__}")
    with pytest.raises(ValueError, match="not a plain field name"):
        RecordTemplate(text="{0[0]}")
