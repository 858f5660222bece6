"""The indexing consumer on real NATS and Weaviate: parts, receipts, versions, dead letters."""

from __future__ import annotations

import json

from faststream import TestApp
from kbus_searcher.app import create_app
from kbus_searcher.settings import SearcherSettings
from kbus_shared.contracts import DocumentIndexed, EmbeddingsReady, SearchReply
from kbus_shared.settings import BusSettings, StoreSettings
from kbus_shared.topology import Topology
from nats.aio.client import Client

from tests.helpers import read_stream
from tests.integration.test_store import ready


def parts_of(message: EmbeddingsReady, size: int) -> list[EmbeddingsReady]:
    chunks = message.chunks
    count = (len(chunks) + size - 1) // size
    return [
        message.model_copy(
            update={"part": i, "parts": count, "chunks": chunks[i * size : (i + 1) * size]}
        )
        for i in range(count)
    ]


async def _publish(nc: Client, topology: Topology, message: EmbeddingsReady) -> None:
    await nc.jetstream().publish(topology.embeddings_ready, message.model_dump_json().encode())


async def _keyword(nc: Client, topology: Topology, query: str) -> SearchReply:
    request = {
        "tenant": "t1",
        "libraries": ["lib"],
        "query": query,
        "k": 50,
        "search_type": "keyword",
        "rerank": False,
    }
    reply = await nc.request(topology.search, json.dumps(request).encode(), timeout=10)
    return SearchReply.model_validate_json(reply.data)


async def test_parts_then_one_receipt_then_a_shorter_version_replaces_all(
    nc: Client, bus: BusSettings, store_settings: StoreSettings, topology: Topology
) -> None:
    app = create_app(SearcherSettings(bus=bus, store=store_settings))
    words = [f"alpha{i} common" for i in range(7)]
    async with TestApp(app):
        v1 = ready("t1", "lib", "doc", "v1", words)
        for part in parts_of(v1, 3):
            await _publish(nc, topology, part)
        [receipt] = await read_stream(nc, topology.document_indexed, count=1)
        assert DocumentIndexed.model_validate(receipt).chunk_count == 7
        assert len((await _keyword(nc, topology, "common")).results) == 7

        v2 = ready("t1", "lib", "doc", "v2", ["beta common", "gamma common"])
        await _publish(nc, topology, v2)
        receipts = await read_stream(nc, topology.document_indexed, count=2)
        assert receipts[1]["version"] == "v2"
        assert receipts[1]["chunk_count"] == 2
        after = await _keyword(nc, topology, "common")
        assert sorted(h.text for h in after.results) == ["beta common", "gamma common"]
        assert {h.version for h in after.results} == {"v2"}


async def test_a_bad_vector_is_dead_lettered_and_not_acked_silently(
    nc: Client, bus: BusSettings, store_settings: StoreSettings, topology: Topology
) -> None:
    app = create_app(SearcherSettings(bus=bus, store=store_settings))
    async with TestApp(app):
        await _publish(nc, topology, ready("t1", "lib", "first", "v1", ["ok"]))
        wrong = ready("t1", "lib", "second", "v1", ["bad"], dim=12)
        await _publish(nc, topology, wrong)
        [letter] = await read_stream(nc, topology.dead_letters, count=1)
    assert letter["stage"] == "indexer"
    assert letter["code"] == "store_rejected"
    assert letter["document_id"] == "second"
