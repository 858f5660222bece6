"""Every format through the bus, parsed by the ingestor: what a hit keeps (pages, headings,
records), web pages by address, and bad files dead-lettered with the reason while the
documents after them are indexed."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from kbus_client import DocumentRejectedError, KbClient

from tests import samples
from tests.e2e.conftest import Stack
from tests.webserver import Site, serve

TENANT = "formats"


@pytest.fixture
async def kb(stack: Stack) -> AsyncIterator[KbClient]:
    client = await KbClient.connect(stack.nats_url, prefix=stack.topology.prefix, tenant=TENANT)
    yield client
    await client.close()


@pytest.fixture
def site() -> Iterator[Site]:
    site = Site()
    site.pages["/canteen.html"] = (
        "text/html",
        b"<html><head><title>Canteen</title></head><body><nav>Menu</nav><main><h1>Canteen</h1>"
        b"<h2>Allergies</h2><p>Every dish lists its allergens on the board beside the till; "
        b"ask the chef about nuts.</p></main></body></html>",
    )
    with serve(site):
        yield site


async def _top(kb: KbClient, library: str, query: str, **kw: Any) -> dict[str, Any]:
    reply = await kb.search(query, libraries=[library], rerank=False, **kw)
    assert reply.results, f"nothing found for {query!r}"
    return reply.results[0].model_dump(mode="json")


async def test_each_format_is_parsed_and_found_with_what_it_keeps(kb: KbClient, site: Site) -> None:
    library = f"f{uuid.uuid4().hex[:8]}"
    pdf_pages = [
        "The badge office is on the ground floor, open from eight.",
        "Lost badges are replaced at reception within one working day for a fee of ten euros.",
        "Visitors sign in at the front desk and wear a paper badge.",
    ]
    files = {
        "guide.pdf": ("application/pdf", samples.pdf(pdf_pages, title="Badges")),
        "handbook.docx": (
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            samples.word("Handbook", {"Parental leave": "Sixteen weeks of paid parental leave."}),
        ),
        "deck.pptx": (
            "application/vnd.openxmlformats-officedocument.presentationml.presentation",
            samples.slides([("Intro", "Welcome"), ("Bike scheme", "Lease a bicycle tax-free")]),
        ),
        "rooms.xlsx": (
            "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            samples.sheet("Rooms", [["room", "seats"], ["Aurora boardroom", 14]]),
        ),
        "products.csv": (
            "text/csv",
            b"sku,name,blurb\nK1,Kettle,Boils a litre of water in two minutes\n"
            b"T2,Toaster,Browns four slices of bread evenly\n",
        ),
    }
    template = {"text": "{name}: {blurb}", "title": "{name}", "metadata": ["sku"]}
    for name, (content_type, data) in files.items():
        await kb.publish_document(
            library=library,
            document_id=name,
            data=data,
            content_type=content_type,
            template=template if name.endswith(".csv") else None,
            wait=True,
            timeout_s=120,
        )
    await kb.publish_document(
        library=library, document_id="canteen", url=f"{site.url}/canteen.html", wait=True
    )

    pdf = await _top(kb, library, "how do I replace a lost badge")
    assert (pdf["document_id"], pdf["page"], pdf["title"]) == ("guide.pdf", 2, "Badges")
    word = await _top(kb, library, "how long is parental leave")
    assert (word["document_id"], word["heading_path"]) == (
        "handbook.docx",
        ["Handbook", "Parental leave"],
    )
    slide = await _top(kb, library, "leasing a bicycle")
    assert (slide["document_id"], slide["page"]) == ("deck.pptx", 2)
    sheet = await _top(kb, library, "how many seats does the Aurora boardroom have")
    assert sheet["document_id"] == "rooms.xlsx"
    assert "| Aurora boardroom | 14 |" in sheet["text"]
    record = await _top(kb, library, "toast bread", filters={"sku": "T2"})
    assert (record["text"], record["heading_path"], record["metadata"]) == (
        "Toaster: Browns four slices of bread evenly",
        ["Toaster"],
        {"sku": "T2"},
    )
    page = await _top(kb, library, "which dishes contain nuts")
    assert (page["document_id"], page["source_uri"]) == ("canteen", f"{site.url}/canteen.html")
    assert page["heading_path"] == ["Canteen", "Allergies"]
    assert "Menu" not in page["text"]


async def test_bad_files_and_pages_are_dead_lettered_and_the_next_document_indexed(
    kb: KbClient, site: Site
) -> None:
    library = f"bad{uuid.uuid4().hex[:8]}"
    pdf, docx = "application/pdf", samples.OOXML["docx"]
    bad: dict[str, tuple[dict[str, Any], str]] = {
        "corrupt.pdf": ({"data": b"%PDF-1.7\n1 0 obj <<", "content_type": pdf}, "unreadable"),
        "locked.pdf": (
            {"data": samples.pdf(["payroll"], password="x"), "content_type": pdf},
            "encrypted",
        ),
        "bomb.docx": ({"data": samples.archive_bomb(), "content_type": docx}, "too_large"),
        "huge.html": (
            {"data": b"<p>" + b"z" * (50 * 1024**2), "content_type": "text/html"},
            "too_large",
        ),
        "liar.pdf": ({"data": b"<html>not a pdf</html>", "content_type": pdf}, "content_type"),
        "hops": ({"url": f"{site.url}/hop/0"}, "too_many_redirects"),
        "private": ({"url": "http://10.0.0.1/admin"}, "address_refused"),
        "metadata": ({"url": "http://169.254.169.254/latest/"}, "address_refused"),
        "records.json": (
            {
                "data": json.dumps([{"name": "a"}]).encode(),
                "content_type": "application/json",
                "template": {"text": "{name}: {blurb}"},
            },
            "template_mismatch",
        ),
    }
    for document_id, (fields, code) in bad.items():
        started = time.monotonic()
        with pytest.raises(DocumentRejectedError) as caught:
            await kb.publish_document(
                library=library, document_id=document_id, wait=True, timeout_s=120, **fields
            )
        assert code in f"{caught.value.code} {caught.value}", (document_id, caught.value)
        assert time.monotonic() - started < 90, document_id
    assert not [p for p in site.asked if p != "/robots.txt" and not p.startswith("/hop/")]
    after = await kb.publish_document(
        library=library, document_id="after", text="The fire drill is on Thursday.", wait=True
    )
    assert after.receipt is not None


async def test_fetching_a_changed_page_again_embeds_only_its_new_text(
    kb: KbClient, site: Site, stack: Stack
) -> None:
    library = f"re{uuid.uuid4().hex[:8]}"
    sections = {
        "Opening": "The library opens at nine on weekdays and at ten on Saturdays.",
        "Loans": "Books are lent for three weeks and can be renewed twice online.",
        "Fines": "A late book costs twenty cents a day, up to the price of the book.",
    }

    def page(parts: dict[str, str]) -> bytes:
        body = "".join(f"<h2>{h}</h2><p>{t}</p>" for h, t in parts.items())
        return f"<html><body><main><h1>Library</h1>{body}</main></body></html>".encode()

    site.pages["/library.html"] = ("text/html", page(sections))
    url = f"{site.url}/library.html"
    first = await kb.publish_document(library=library, document_id="lib", url=url, wait=True)
    before = _embedder_counts(stack)
    site.pages["/library.html"] = ("text/html", page({**sections, "Fines": "No late fines."}))
    second = await kb.publish_document(library=library, document_id="lib", url=url, wait=True)
    after = _embedder_counts(stack)
    assert second.version != first.version  # the page's version comes from its bytes
    assert second.receipt is not None
    assert second.receipt.chunk_count == 3
    assert after["embedded"] - before["embedded"] == 1  # only the changed section
    assert after["cached"] - before["cached"] == 2
    found = await _top(kb, library, "what are the late fines")
    assert "No late fines" in found["text"]


def _embedder_counts(stack: Stack) -> dict[str, float]:
    text = httpx.get(f"http://127.0.0.1:{stack.http_ports['embedder']}/metrics").text
    counts = {"embedded": 0.0, "cached": 0.0}
    for line in text.splitlines():
        if line.startswith("kbus_embedder_chunks_total{"):
            counts["embedded"] += float(line.rsplit(" ", 1)[1])
        if line.startswith("kbus_embedder_cached_chunks_total{"):
            counts["cached"] += float(line.rsplit(" ", 1)[1])
    return counts
