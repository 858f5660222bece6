"""What the chaos test asserts, counted so a report can say how much went wrong."""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import weaviate
from kbus_client import KbClient
from kbus_contract import DeadLetter
from kbus_contract.topology import Topology
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError
from weaviate.classes.query import Filter, MetadataQuery

from tests.chaos.ledger import LIBRARY, TENANTS, LedgerDoc


@dataclass
class Findings:
    """Counts of every kind of damage; all zero when nothing went wrong."""

    documents_lost: int = 0
    documents_missing_chunks: int = 0
    duplicate_chunks: int = 0
    stale_chunks: int = 0
    deleted_documents_present: int = 0
    wrong_tenant_chunks: int = 0
    good_documents_dead_lettered: int = 0
    not_found_by_keyword: int = 0
    not_found_by_vector: int = 0
    #: Chunks a read at consistency ALL lacked, summed over the nodes it went through (cluster).
    chunks_missing_at_all: int = 0
    chunks_checked: int = 0
    examples: list[str] = field(default_factory=list)

    def damage(self) -> dict[str, int]:
        counts = {k: v for k, v in vars(self).items() if isinstance(v, int)}
        counts.pop("chunks_checked")
        return counts

    def note(self, text: str) -> None:
        if len(self.examples) < 20:
            self.examples.append(text)


@dataclass(frozen=True)
class Stored:
    uuid: str
    tenant: str
    document_id: str
    position: int
    vector: list[float]
    #: The publish that wrote it: "<sequence> <version>".
    publish: str = ""


def physical(client: weaviate.WeaviateClient, collection: str) -> str:
    """The collection searches read (the index's alias names it)."""
    alias = client.alias.get(alias_name=collection)
    return alias.collection if alias is not None else collection


def read_store(client: weaviate.WeaviateClient, collection: str) -> list[Stored]:
    """Every chunk object in every tenant."""
    col = client.collections.use(physical(client, collection))
    tenants = col.tenants.get()
    stored = []
    for tenant in tenants:
        for obj in col.with_tenant(tenant).iterator(
            include_vector=True,
            return_properties=["document_id", "position", "library", "sequence", "version"],
        ):
            vector = obj.vector["chunk"]
            stored.append(
                Stored(
                    str(obj.uuid),
                    tenant,
                    str(obj.properties["document_id"]),
                    int(obj.properties["position"]),  # type: ignore[arg-type]
                    list(vector),  # type: ignore[arg-type]
                    f"{obj.properties['sequence']} {obj.properties['version']}",
                )
            )
    return stored


def check_store(docs: list[LedgerDoc], stored: list[Stored], findings: Findings) -> None:
    """Lost, partial, duplicated, stale, deleted and misplaced chunks."""
    by_id = {doc.document_id: doc for doc in docs}
    found: dict[str, list[Stored]] = defaultdict(list)
    for chunk in stored:
        doc = by_id.get(chunk.document_id)
        if doc is None or doc.tenant != chunk.tenant:
            findings.wrong_tenant_chunks += 1
            findings.note(f"{chunk.document_id} stored under {chunk.tenant}")
            continue
        found[chunk.document_id].append(chunk)
    findings.chunks_checked = len(stored)
    for doc in docs:
        chunks = found.get(doc.document_id, [])
        expected = doc.expected_chunk_ids()
        have = {c.uuid for c in chunks}
        positions = Counter(c.position for c in chunks)
        findings.duplicate_chunks += sum(n - 1 for n in positions.values() if n > 1)
        if doc.deleted:
            if chunks:
                findings.deleted_documents_present += 1
                findings.note(f"{doc.document_id} was deleted but has {len(chunks)} chunks")
            continue
        findings.stale_chunks += len(have - expected)
        if have - expected:
            publishes = sorted({(c.position, c.publish) for c in chunks})
            findings.note(f"{doc.document_id} ({doc.tenant}) holds chunks of {publishes}")
        if not have & expected:
            findings.documents_lost += 1
            findings.note(f"{doc.document_id} ({doc.tenant}) is not in the store")
        elif expected - have:
            findings.documents_missing_chunks += 1
            findings.note(f"{doc.document_id} lacks {len(expected - have)} of {len(expected)}")


async def check_dead_letters(
    js: JetStreamContext, topology: Topology, docs: list[LedgerDoc], findings: Findings
) -> None:
    """No document of the ledger (all are good) may be dead-lettered."""
    ours = {doc.document_id for doc in docs}
    try:
        info = await js.stream_info(topology.dead_letter_stream.name)
    except NotFoundError:
        return
    if info.state.messages == 0:
        return
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        try:
            msg = await js.get_msg(topology.dead_letter_stream.name, seq)
        except NotFoundError:
            continue
        letter = DeadLetter.model_validate_json(msg.data or b"{}")
        if letter.document_id in ours:
            findings.good_documents_dead_lettered += 1
            findings.note(f"dead letter for {letter.document_id}: {letter.reason[:200]}")


async def check_keyword(kb: KbClient, docs: list[LedgerDoc], findings: Findings) -> None:
    """Every chunk of every live document comes back for its document's token."""
    gate = asyncio.Semaphore(8)

    async def one(doc: LedgerDoc) -> None:
        expected = doc.expected_chunk_ids()
        async with gate:
            reply = await kb.search(
                doc.token,
                libraries=[LIBRARY],
                tenant=doc.tenant,
                k=max(5, len(expected) + 2),
                search_type="keyword",
                rerank=False,  # membership is checked, not order
            )
        hits = {hit.chunk_id for hit in reply.results}
        if expected - hits:
            findings.not_found_by_keyword += 1
            findings.note(f"keyword {doc.token} misses {len(expected - hits)} of {doc.document_id}")

    await asyncio.gather(*(one(doc) for doc in docs if not doc.deleted))


def check_vectors(
    client: weaviate.WeaviateClient, collection: str, stored: list[Stored], findings: Findings
) -> None:
    """Each chunk is its own nearest neighbour (its vector is indexed, not just stored)."""
    col = client.collections.use(physical(client, collection))
    for chunk in stored:
        if chunk.tenant not in TENANTS:
            continue
        result = col.with_tenant(chunk.tenant).query.near_vector(
            near_vector=chunk.vector,
            target_vector="chunk",
            limit=10,
            filters=Filter.by_property("library").equal(LIBRARY),
            return_metadata=MetadataQuery(distance=True),
        )
        found = [str(o.uuid) for o in result.objects]
        if not found or found[0] != chunk.uuid:
            findings.not_found_by_vector += 1
            rank = found.index(chunk.uuid) if chunk.uuid in found else None
            first = result.objects[0].metadata.distance if result.objects else None
            findings.note(
                f"chunk {chunk.uuid} of {chunk.document_id} is not its own neighbour"
                f" (rank {rank} of {len(found)}; first at distance {first})"
            )


def check_index(weaviate_ports: dict[str, int], collection: str, docs: list[LedgerDoc]) -> Findings:
    """What the index holds, read through one node: every chunk where it belongs, each one its
    own nearest neighbour."""
    findings = Findings()
    client: Any = weaviate.connect_to_local(
        port=weaviate_ports["http"], grpc_port=weaviate_ports["grpc"], skip_init_checks=True
    )
    try:
        stored = read_store(client, collection)
        check_store(docs, stored, findings)
        check_vectors(client, collection, stored, findings)
    finally:
        client.close()
    return findings


async def check_all(
    *,
    docs: list[LedgerDoc],
    weaviate_ports: dict[str, int],
    collection: str,
    kb: KbClient,
    topology: Topology,
) -> Findings:
    """Run every check against the drained system."""
    findings = await asyncio.to_thread(check_index, weaviate_ports, collection, docs)
    await check_dead_letters(kb.nc.jetstream(), topology, docs, findings)
    await check_keyword(kb, docs, findings)
    return findings
