"""Answers within a token budget, through the real services: each expansion, exact spans (for
Markdown, PDF pages and records), the budget counted with the named tokenizer, the cursor, and
the agent tool."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kbus_client import KbClient
from kbus_contract import ContentType, Expand, RecordTemplate, SearchReply
from kbus_ingestor.parsing import Limits, parse
from kbus_searcher.search.tokens import TokenCounter

from tests import samples
from tests.e2e.conftest import Stack

TENANT = "context"
COUNTER = TokenCounter.load()


def _section(name: str, topic: str, n: int) -> str:
    sentences = [
        f"The {topic} rule number {i} says that {name.lower()} staff record the {topic} "
        f"in the ledger before day {i + 2} of the month."
        for i in range(n)
    ]
    return f"## {name}\n\n" + " ".join(sentences) + "\n"


HANDBOOK = "# Handbook\n\n" + "\n".join(
    _section(name, topic, 9)
    for name, topic in [
        ("Travel", "train tickets"),
        ("Payroll", "salary slips"),
        ("Security", "visitor badges"),
        ("Canteen", "lunch vouchers"),
    ]
)


@pytest.fixture
async def kb(stack: Stack) -> AsyncIterator[KbClient]:
    client = await KbClient.connect(stack.nats_url, prefix=stack.topology.prefix, tenant=TENANT)
    yield client
    await client.close()


async def _library(kb: KbClient, documents: dict[str, dict[str, Any]]) -> str:
    library = f"c{uuid.uuid4().hex[:8]}"
    for document_id, fields in documents.items():
        await kb.publish_document(
            library=library, document_id=document_id, wait=True, timeout_s=120, **fields
        )
    return library


def _check_spans(reply: SearchReply, texts: dict[str, str], budget: int) -> None:
    """Every cited span is the document's text; the budget holds, counted as the reply says."""
    context = reply.context
    assert context is not None
    assert context.passages, reply
    assert context.tokenizer == COUNTER.name
    assert sum(COUNTER.count(p.text) for p in context.passages) <= budget
    assert context.used_tokens == sum(p.tokens for p in context.passages)
    for passage in context.passages:
        text = texts[passage.citation.document_id]
        pieces = [text[s.char_start : s.char_end] for s in passage.citation.spans]
        assert passage.text == "\n".join(pieces)
        for h in passage.highlights:
            assert text[h.char_start : h.char_end] in passage.text


async def test_each_expansion_holds_what_it_says_within_the_budget(kb: KbClient) -> None:
    library = await _library(kb, {"handbook": {"text": HANDBOOK, "content_type": "text/markdown"}})
    question = "when are visitor badges recorded in the ledger"
    security = HANDBOOK.index("## Security")
    section_end = len(HANDBOOK[: HANDBOOK.index("## Canteen")].rstrip())
    replies = {
        expand: await kb.search(
            question, libraries=[library], budget_tokens=2048, expand=expand, rerank=False
        )
        for expand in Expand
    }
    for reply in replies.values():
        _check_spans(reply, {"handbook": HANDBOOK}, 2048)
    best = {e: r.context.passages[0] for e, r in replies.items() if r.context}
    assert best[Expand.SECTION].citation.heading_path == ("Handbook", "Security")
    # Sections next to each other touch: one passage, a span for each, each naming its own.
    spans = {s.heading_path[-1]: s for s in best[Expand.SECTION].citation.spans}
    span = spans["Security"]
    assert security <= span.char_start <= security + len("## Security\n\n")
    assert span.char_end == section_end  # all of it, and nothing of the next
    whole = best[Expand.DOCUMENT].citation.spans
    assert [s.heading_path[-1] for s in whole] == ["Travel", "Payroll", "Security", "Canteen"]
    assert whole[0].char_start <= HANDBOOK.index("## Travel") + len("## Travel\n\n")
    assert whole[-1].char_end == len(HANDBOOK.rstrip())
    assert len(best[Expand.DOCUMENT].text) > len(best[Expand.SECTION].text)
    hit = replies[Expand.NONE].results[0]
    near = best[Expand.NEIGHBOURS].citation.spans
    assert near[0].char_start < hit.char_start
    assert near[-1].char_end > hit.char_end
    assert "visitor badges" in best[Expand.NONE].text
    assert best[Expand.NONE].highlights[0].terms


async def test_an_expansion_reads_only_the_library_its_hit_came_from(kb: KbClient) -> None:
    secret = HANDBOOK.replace("staff record", "SECRET staff record")
    # One id and one version in both libraries: only the library tells them apart.
    same = {"content_type": "text/markdown", "version": "1"}
    mine = await _library(kb, {"handbook": {"text": HANDBOOK, **same}})
    await _library(kb, {"handbook": {"text": secret, **same}})
    reply = await kb.search(
        "visitor badges ledger",
        libraries=[mine],
        budget_tokens=4096,
        expand=Expand.DOCUMENT,
        rerank=False,
    )
    _check_spans(reply, {"handbook": HANDBOOK}, 4096)
    assert reply.context is not None
    assert all("SECRET" not in p.text for p in reply.context.passages)


async def test_a_small_budget_cuts_at_a_sentence_and_the_cursor_gives_the_rest(
    kb: KbClient,
) -> None:
    library = await _library(kb, {"handbook": {"text": HANDBOOK, "content_type": "text/markdown"}})
    given: list[tuple[int, int]] = []
    cursor = None
    cuts = 0
    for _ in range(40):
        reply = await kb.search(
            "salary slips ledger",
            libraries=[library],
            budget_tokens=64,
            expand=Expand.SECTION,
            cursor=cursor,
            rerank=False,
        )
        if reply.context is None or not reply.context.passages:
            break
        _check_spans(reply, {"handbook": HANDBOOK}, 64)
        for p in reply.context.passages:
            for s in p.citation.spans:
                assert all(s.char_end <= a or s.char_start >= b for a, b in given), "twice"
                given.append((s.char_start, s.char_end))
            cuts += p.cut is not None
        cursor = reply.context.cursor
        if cursor is None:
            break
    assert cursor is None, "the pages never ended"
    assert cuts  # 64 tokens hold less than a section
    covered = sum(b - a for a, b in given)
    assert covered >= len(HANDBOOK) * 0.8  # every section, page by page


async def test_pdf_pages_and_records_are_cited_at_their_own_offsets(kb: KbClient) -> None:
    pages = [
        "The badge office is on the ground floor, open from eight.",
        "Lost badges are replaced at reception within one working day for a fee of ten euros.",
        "Visitors sign in at the front desk and wear a paper badge.",
    ]
    pdf = samples.pdf(pages, title="Badges")
    csv = (
        b"sku,name,blurb\nK1,Kettle,Boils a litre of water in two minutes\n"
        b"T2,Toaster,Browns four slices of bread evenly\n"
    )
    template = RecordTemplate(text="{name}: {blurb}", title="{name}")
    library = await _library(
        kb,
        {
            "guide.pdf": {"data": pdf, "content_type": "application/pdf"},
            "products.csv": {"data": csv, "content_type": "text/csv", "template": template},
        },
    )
    limits = Limits(max_unpacked_bytes=1 << 26, max_records=1000)
    texts = {
        "guide.pdf": parse(ContentType.PDF, pdf, None, limits).text,
        "products.csv": parse(ContentType.CSV, csv, template, limits).text,
    }
    for question, document, expand in [
        ("how do I replace a lost badge", "guide.pdf", Expand.SECTION),
        ("toast bread", "products.csv", Expand.NEIGHBOURS),
    ]:
        reply = await kb.search(
            question, libraries=[library], budget_tokens=512, expand=expand, rerank=False
        )
        _check_spans(reply, texts, 512)
        assert reply.context is not None
        first = reply.context.passages[0]
        assert first.citation.document_id == document
    pdf_reply = await kb.search(
        "lost badges replaced at reception",
        libraries=[library],
        budget_tokens=512,
        expand=Expand.SECTION,
        rerank=False,
    )
    assert pdf_reply.context is not None
    first = pdf_reply.context.passages[0]
    assert 2 in first.citation.pages
    # The pages' hits touch, so they are one passage; each page's span is that page's text.
    (page_two,) = [s for s in first.citation.spans if s.page == 2]
    assert texts["guide.pdf"][page_two.char_start : page_two.char_end] == pages[1]


async def test_the_tool_numbers_passages_cites_them_and_says_when_nothing_matched(
    kb: KbClient,
) -> None:
    library = await _library(kb, {"handbook": {"text": HANDBOOK, "content_type": "text/markdown"}})
    tool = kb.as_tool(libraries=[library], budget_tokens=256, expand="section")
    assert "budget_tokens" in tool.parameters["properties"]
    answer = await tool.call_json({"query": "when are lunch vouchers recorded"})
    first = answer.splitlines()[0]
    assert first.startswith('[1] "handbook"')
    assert f"{library}/handbook version" in first
    assert "section Handbook > Canteen" in first
    assert "characters " in first
    assert "of 256 tokens, counted with all-MiniLM-L6-v2" in answer
    nothing = await tool.call_json({"query": "zqxj vvkw plorf"})
    assert nothing.startswith("No passage in the knowledge base matches this query")
