"""What the index holds of each document: its newest publish, read back as the ingestor made it,
and the connections of the admin jobs that publish stored documents again (``reembed``,
``reprocess``)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from kbus_contract import Chunk, ContentType, DocumentRef
from kbus_runtime.bus import connect_nats
from kbus_runtime.store import weaviate_client
from nats.aio.client import Client

from kbus_searcher.ordering import rank
from kbus_searcher.settings import SearcherSettings
from kbus_searcher.store import ChunkStore


@dataclass
class StoredDocument:
    """One publish of a document as a collection holds it."""

    ref: DocumentRef
    chunks: list[Chunk]
    #: Each chunk's matching texts by position, as (match number, text).
    matching: dict[int, list[tuple[int, str]]] = field(default_factory=dict)

    def add(self, row: dict[str, object]) -> None:
        """A stored object of this publish: a chunk's own, or one of its matching texts'."""
        match = int(str(row.get("match") or 0))
        if match:
            position = int(str(row["position"]))
            self.matching.setdefault(position, []).append((match, str(row["matched"])))
        else:
            self.chunks.append(_chunk(row))

    @property
    def rank(self) -> tuple[int, int]:
        """Which of a document's stored publishes is the newest (:func:`recuts.rank`)."""
        return rank(self.ref.sequence, self.ref.version)

    def ordered(self) -> None:
        """Chunks in order, each with its matching texts in order."""
        self.chunks = [
            c.model_copy(
                update={"matching": tuple(t for _, t in sorted(self.matching.get(c.position, [])))}
            )
            for c in sorted(self.chunks, key=lambda c: c.position)
        ]


async def read_documents(
    store: ChunkStore, name: str, tenant: str | None = None, library: str | None = None
) -> list[StoredDocument]:
    """The newest publish of every document in a collection (of one tenant, one library)."""
    documents: dict[tuple[str, str, str], StoredDocument] = {}
    for one in await store.collections.tenants(name):
        if tenant is not None and one != tenant:
            continue
        async for row in store.writes.read_chunks(name, one):
            if library is not None and row["library"] != library:
                continue
            key = (one, str(row["library"]), str(row["document_id"]))
            ranked = rank(int(row["sequence"]), str(row["version"]))
            found = documents.get(key)
            if found is None or found.rank < ranked:
                found = documents[key] = StoredDocument(_ref(one, row), [])
            if found.rank == ranked:
                found.add(row)
    for document in documents.values():
        document.ordered()
    return list(documents.values())


def _ref(tenant: str, row: dict[str, object]) -> DocumentRef:
    return DocumentRef(
        tenant=tenant,
        library=str(row["library"]),
        document_id=str(row["document_id"]),
        version=str(row["version"]),
        title=str(row["title"] or ""),
        source_uri=str(row["source_uri"] or ""),
        content_type=ContentType.PLAIN,
        metadata=json.loads(str(row["metadata_json"] or "{}")),
        source=str(row.get("source") or ""),
        access=tuple(row.get("access") or ("*",)),  # type: ignore[arg-type]
        sequence=int(str(row["sequence"])),
    )


def _chunk(row: dict[str, object]) -> Chunk:
    return Chunk(
        chunk_id=str(row["uuid"]),
        position=int(str(row["position"])),
        text=str(row["text"]),
        char_start=int(str(row["char_start"])),
        char_end=int(str(row["char_end"])),
        heading_path=tuple(row["heading_path"] or ()),  # type: ignore[arg-type]
        keywords=str(row["keywords"] or ""),
        page=int(str(row["page"] or 0)) or None,
        metadata=json.loads(str(row["metadata_json"] or "{}")),
    )


@contextlib.asynccontextmanager
async def connected(settings: SearcherSettings) -> AsyncIterator[tuple[Client, ChunkStore]]:
    """The bus and the index as an admin job uses them, closed when it is done."""
    nc = await connect_nats(settings.bus)
    client = weaviate_client(settings.store)
    await client.connect()
    try:
        yield nc, ChunkStore.configured(client, settings)
    finally:
        await client.close()
        await nc.close()
