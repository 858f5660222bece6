"""The ingestor on a real NATS: chunks out, bad documents dead-lettered with a reason."""

from __future__ import annotations

import asyncio
import json
import random

from faststream import TestApp
from kbus_contract import ChunksReady, DeadLetter, DocumentAdded
from kbus_contract.topology import Topology
from kbus_ingestor.app import create_app
from kbus_ingestor.chunking import ChunkingConfig
from kbus_ingestor.profiling import Cutter
from kbus_ingestor.settings import IngestorSettings
from kbus_runtime.budgets import BudgetSettings, TenantBudget
from kbus_runtime.settings import BusSettings
from nats.aio.client import Client

from tests.cutting import chunk_document
from tests.helpers import document, publish_raw, read_stream, take_work

GUIDE = "# Guide\nIntro.\n\n## Install\n\n### Linux\nRun the installer as root.\n"


async def test_a_document_becomes_chunks_with_heading_paths(
    nc: Client, bus: BusSettings, topology: Topology
) -> None:
    app = create_app(IngestorSettings(bus=bus))
    async with TestApp(app):
        doc = document("acme", "docs", "guide.md", GUIDE, content_type="text/markdown")
        await publish_raw(nc, topology, json.dumps(doc).encode())
        [raw] = await take_work(nc, topology.chunks_ready, "embedder", count=1)
    ready = ChunksReady.model_validate(raw)
    assert ready.document.tenant == "acme"
    paths = [c.heading_path for c in ready.chunks]
    assert ("Guide", "Install", "Linux") in paths
    for chunk in ready.chunks:
        assert GUIDE[chunk.char_start : chunk.char_end] == chunk.text


async def test_bad_documents_are_dead_lettered_and_good_ones_still_flow(
    nc: Client, bus: BusSettings, topology: Topology
) -> None:
    app = create_app(IngestorSettings(bus=bus.model_copy(update={"max_document_bytes": 10_000})))
    bad = [
        b"{not json",
        b"\xff\xfe not utf-8",
        json.dumps({"tenant": "acme"}).encode(),
        json.dumps(document("a.b", "docs", "x", "text")).encode(),
        json.dumps(document("acme", "docs", "empty", "   ")).encode(),
        json.dumps(document("acme", "docs", "big", "word " * 5_000)).encode(),
    ]
    async with TestApp(app):
        for payload in bad:
            await publish_raw(nc, topology, payload)
        await publish_raw(
            nc, topology, json.dumps(document("acme", "docs", "ok", "Fine.")).encode()
        )
        letters = [
            DeadLetter.model_validate(d)
            for d in await read_stream(nc, topology.dead_letters, count=len(bad))
        ]
        [ready] = await take_work(nc, topology.chunks_ready, "embedder", count=1)
    assert ChunksReady.model_validate(ready).document.document_id == "ok"
    by_reason = " | ".join(letter.reason for letter in letters)
    assert all(letter.stage == "ingestor" for letter in letters)
    assert "Invalid JSON" in by_reason
    assert "tenant" in by_reason
    assert "empty or whitespace" in by_reason
    assert any(letter.code == "too_large" for letter in letters)
    big = next(letter for letter in letters if letter.code == "too_large")
    assert big.document_id == "big"
    assert big.tenant == "acme"
    assert all(letter.original_size > 0 for letter in letters)


async def test_a_large_document_is_sent_on_as_fast_as_it_is_taken_never_piled_up(
    nc: Client, bus: BusSettings, topology: Topology
) -> None:
    """A document of many parts waits while its tenant holds its budget of chunk messages,
    and its parts, taken as the embedder takes them, hold every chunk of the whole cut."""
    budget, part_chunks = 3, 4
    settings = IngestorSettings(
        bus=bus,
        part_chunks=part_chunks,
        budgets=BudgetSettings(tenant_budgets={"acme": TenantBudget.of(chunk_messages=budget)}),
    )
    words = random.Random(7).choices(["cells", "divide", "slowly.", "Tissue", "grows\n\n"], k=9000)
    text = " ".join(words)
    whole = chunk_document(
        DocumentAdded.model_validate(document("acme", "docs", "big", text)),
        Cutter.recursive(ChunkingConfig(settings.chunk_size, settings.chunk_overlap)),
        settings.max_chunks,
    )
    parts = -(-len(whole.chunks) // part_chunks)
    assert parts > 5 * budget
    js = nc.jetstream()
    async with TestApp(create_app(settings)):
        await publish_raw(nc, topology, json.dumps(document("acme", "docs", "big", text)).encode())
        held = []
        for _ in range(10):
            await asyncio.sleep(0.3)
            info = await js.stream_info(topology.chunks_stream.name)
            held.append(info.state.messages)
        taken = await take_work(nc, topology.chunks_ready, "embedder", count=parts)
    assert max(held) == budget  # it filled the budget, and waited there
    readies = [ChunksReady.model_validate(raw) for raw in taken]
    assert [r.part for r in readies] == list(range(parts))
    assert {(r.parts, r.total_chunks) for r in readies} == {(parts, len(whole.chunks))}
    chunks = [c for r in readies for c in r.chunks]
    assert chunks == list(whole.chunks)
