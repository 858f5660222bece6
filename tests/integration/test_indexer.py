"""The indexing consumer on real NATS and Weaviate: parts, receipts, versions, dead letters."""

from __future__ import annotations

import asyncio
import json

import httpx
from faststream import TestApp
from kbus_contract import DocumentIndexed, EmbeddingsReady, SearchReply
from kbus_contract.buckets import scope_key
from kbus_contract.topology import Topology
from kbus_runtime.settings import BusSettings, StoreSettings
from kbus_searcher.app import create_app
from kbus_searcher.settings import SearcherSettings
from kbus_searcher.store import ChunkStore
from nats.aio.client import Client

from tests.helpers import ask, find_in_stream, read_stream, ready


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
    await nc.jetstream().publish(
        topology.of_document("embeddings.ready", message.document),
        message.model_dump_json().encode(),
    )


async def _keyword(nc: Client, topology: Topology, query: str) -> SearchReply:
    request = {
        "tenant": "t1",
        "libraries": ["lib"],
        "query": query,
        "k": 50,
        "search_type": "keyword",
        "rerank": False,
    }
    reply = await ask(nc, topology, json.dumps(request).encode())
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

        v2 = ready("t1", "lib", "doc", "v2", ["beta common", "gamma common"], sequence=2)
        await _publish(nc, topology, v2)
        receipts = await read_stream(nc, topology.document_indexed, count=2)
        assert receipts[1]["version"] == "v2"
        assert receipts[1]["chunk_count"] == 2
        after = await _keyword(nc, topology, "common")
        assert sorted(h.text for h in after.results) == ["beta common", "gamma common"]
        assert {h.version for h in after.results} == {"v2"}


async def test_a_search_sees_the_old_version_until_every_chunk_of_the_new_one_is_stored(
    nc: Client,
    bus: BusSettings,
    store_settings: StoreSettings,
    topology: Topology,
    store: ChunkStore,
) -> None:
    app = create_app(SearcherSettings(bus=bus, store=store_settings))
    old = ["one common", "two common", "three common"]
    new = ["uno common", "dos common", "tres common", "cuatro common"]
    async with TestApp(app):
        await _publish(nc, topology, ready("t1", "lib", "doc", "v1", old))
        await find_in_stream(nc, topology.document_indexed, {"version": "v1"})
        first, second = parts_of(ready("t1", "lib", "doc", "v2", new, sequence=2), 2)
        await _publish(nc, topology, first)
        for _ in range(100):  # until half of the new version is in the store
            if await store.writes.count_stored(first) == 2:
                break
            await asyncio.sleep(0.1)
        assert await store.writes.count_stored(first) == 2
        during = await _keyword(nc, topology, "common")
        assert sorted(h.text for h in during.results) == sorted(old)

        await _publish(nc, topology, second)
        await find_in_stream(nc, topology.document_indexed, {"version": "v2"})
        after = await _keyword(nc, topology, "common")
        assert sorted(h.text for h in after.results) == sorted(new)


async def test_a_bad_vector_is_dead_lettered_and_not_acked_silently(
    nc: Client, bus: BusSettings, store_settings: StoreSettings, topology: Topology
) -> None:
    app = create_app(SearcherSettings(bus=bus, store=store_settings))
    async with TestApp(app):
        await _publish(nc, topology, ready("t1", "lib", "first", "v1", ["ok"]))
        # The first vector written fixes the index's dimension.
        await find_in_stream(nc, topology.document_indexed, {"document_id": "first"})
        wrong = ready("t1", "lib", "second", "v1", ["bad"], dim=12)
        await _publish(nc, topology, wrong)
        [letter] = await read_stream(nc, topology.dead_letters, count=1)
    assert letter["stage"] == "indexer"
    assert letter["code"] == "store_rejected"
    assert letter["document_id"] == "second"


async def test_a_backlog_is_indexed_in_shared_batches_and_each_message_ends_on_its_own(
    nc: Client, bus: BusSettings, store_settings: StoreSettings, topology: Topology
) -> None:
    settings = SearcherSettings(bus=bus, store=store_settings)
    async with TestApp(create_app(settings)):
        await _publish(nc, topology, ready("t1", "lib", "first", "v1", ["first words"]))
        # The first vector written fixes the index's dimension.
        await find_in_stream(nc, topology.document_indexed, {"document_id": "first"})
    # While no indexer runs, a backlog builds up.
    docs = [f"d{i}" for i in range(12)]
    backlog = [
        ready("t1", "lib", doc, "v1", [f"{doc} words", f"{doc} more words"], sequence=10 + i)
        for i, doc in enumerate(docs)
    ]
    backlog.insert(5, ready("t1", "lib", "wrong", "v1", ["wrong words"], dim=12, sequence=30))
    backlog.append(ready("t1", "lib", "twice", "old", ["old words"], sequence=40))
    backlog.append(ready("t1", "lib", "twice", "new", ["new words"], sequence=41))
    for message in backlog:
        await _publish(nc, topology, message)

    app = create_app(settings)
    async with TestApp(app):
        for doc in docs:
            await find_in_stream(nc, topology.document_indexed, {"document_id": doc})
        await find_in_stream(nc, topology.document_indexed, {"version": "new"})
        [letter] = await read_stream(nc, topology.dead_letters, count=1)
        found = await _keyword(nc, topology, "words")
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as http:
            metrics = (await http.get("http://searcher/metrics")).text
    assert (letter["document_id"], letter["code"]) == ("wrong", "store_rejected")
    texts = {h.text for h in found.results}
    assert "new words" in texts
    assert "old words" not in texts
    assert "wrong words" not in texts
    assert {f"{doc} more words" for doc in docs} <= texts
    batches = _sample(metrics, "kbus_indexer_batch_documents_count")
    assert _sample(metrics, "kbus_indexer_batch_documents_sum") == len(backlog)
    assert batches < len(backlog) / 2  # shared batches, not one per message
    # The refused document failed alone: no message of its batches was sent back for a retry.
    assert "kbus_messages_retried_total{" not in metrics


def _sample(metrics: str, name: str) -> float:
    [value] = [float(line.split()[-1]) for line in metrics.splitlines() if line.startswith(name)]
    return value


async def _delete(nc: Client, topology: Topology, **scope: str) -> int:
    """Publish a deletion; returns its stream sequence."""
    ack = await nc.jetstream().publish(
        topology.accepted(topology.deleted("t1", scope.get("library"))),
        json.dumps({"tenant": "t1", **scope}).encode(),
    )
    return int(ack.seq)


async def test_the_latest_publish_wins_whatever_order_the_pipeline_delivers(
    nc: Client, bus: BusSettings, store_settings: StoreSettings, topology: Topology
) -> None:
    app = create_app(SearcherSettings(bus=bus, store=store_settings))
    async with TestApp(app):
        await _publish(nc, topology, ready("t1", "lib", "doc", "new", ["fresh words"], sequence=9))
        await find_in_stream(nc, topology.document_indexed, {"version": "new"})
        # An older publish whose embeddings arrive late must not come back.
        await _publish(nc, topology, ready("t1", "lib", "doc", "old", ["stale words"], sequence=3))
        await _publish(nc, topology, ready("t1", "lib", "probe", "p", ["probe words"], sequence=10))
        await find_in_stream(nc, topology.document_indexed, {"document_id": "probe"})
        texts = {h.text for h in (await _keyword(nc, topology, "words")).results}
    assert texts == {"fresh words", "probe words"}


async def test_a_publish_overtaken_while_it_was_written_removes_its_own_chunks(
    nc: Client,
    bus: BusSettings,
    store_settings: StoreSettings,
    topology: Topology,
    store: ChunkStore,
) -> None:
    """Two indexer replicas, two publishes of one document: the later one was made searchable
    by the other replica after this one read the store, so this one wrote an older version.
    Its chunks go again (else they stay, stale, beside the newer ones) and it sends no receipt.
    """
    app = create_app(SearcherSettings(bus=bus, store=store_settings))
    async with TestApp(app):
        versions = await nc.jetstream().key_value(topology.versions_bucket)
        # What the other replica's advance left, its chunks not yet seen here.
        await versions.put(scope_key("t1", "lib", "doc"), b"9 new")
        await versions.put(scope_key("t1", "lib", "long"), b"9 new")
        old = ready("t1", "lib", "doc", "old", ["stale words"], sequence=3)
        await _publish(nc, topology, old)
        # The first part of a publish in two parts: it can never complete now.
        long = ready("t1", "lib", "long", "old", ["part one", "part two"], sequence=4)
        first_part = parts_of(long, 1)[0]
        await _publish(nc, topology, first_part)
        await _publish(nc, topology, ready("t1", "lib", "probe", "p", ["probe words"], sequence=10))
        await find_in_stream(nc, topology.document_indexed, {"document_id": "probe"})
        assert await store.writes.count_stored(old) == 0
        assert await store.writes.count_stored(first_part) == 0
        receipts = await read_stream(nc, topology.document_indexed, count=1)
        assert [r["document_id"] for r in receipts] == ["probe"]


async def test_deletions_of_a_document_a_library_and_a_tenant(
    nc: Client, bus: BusSettings, store_settings: StoreSettings, topology: Topology
) -> None:
    app = create_app(SearcherSettings(bus=bus, store=store_settings))
    async with TestApp(app):
        # Publishes and deletions share the documents stream's sequence. No ingestor runs here,
        # so stand-in publishes take sequences 1-3 and the deletions come after them.
        for _ in range(3):
            await nc.jetstream().publish(topology.accepted(topology.added("t1", "lib")), b"{}")
        for i, (library, doc) in enumerate([("lib", "a"), ("lib", "b"), ("lib2", "c")]):
            await _publish(
                nc, topology, ready("t1", library, doc, "v", [f"{doc} shared"], sequence=i + 1)
            )
        for doc in "abc":
            await find_in_stream(nc, topology.document_indexed, {"document_id": doc})

        seq = await _delete(nc, topology, library="lib", document_id="a")
        removed = await find_in_stream(nc, topology.document_removed, {"document_id": "a"})
        assert removed["chunks_deleted"] == 1
        assert {h.document_id for h in (await _keyword(nc, topology, "shared")).results} == {"b"}

        # Embeddings of a publish made before the deletion arrive after it: not indexed.
        late = ready("t1", "lib", "a", "v", ["a shared"], sequence=seq - 1)
        await _publish(nc, topology, late)
        # A publish made after the deletion is indexed again.
        after = (
            await nc.jetstream().publish(topology.accepted(topology.added("t1", "lib")), b"{}")
        ).seq
        await _publish(nc, topology, ready("t1", "lib", "a", "v2", ["a again"], sequence=after))
        await find_in_stream(nc, topology.document_indexed, {"document_id": "a", "version": "v2"})
        texts = {h.text for h in (await _keyword(nc, topology, "shared again")).results}
        assert texts == {"a again", "b shared"}

        await _delete(nc, topology, library="lib")
        await find_in_stream(nc, topology.document_removed, {"library": "lib", "document_id": None})
        assert (await _keyword(nc, topology, "shared again")).no_match

        await _delete(nc, topology)
        await find_in_stream(nc, topology.document_removed, {"library": None})
        request = {
            "tenant": "t1",
            "libraries": ["lib2"],
            "query": "shared",
            "search_type": "keyword",
            "rerank": False,
        }
        reply = await ask(nc, topology, json.dumps(request).encode())
        assert SearchReply.model_validate_json(reply.data).no_match
