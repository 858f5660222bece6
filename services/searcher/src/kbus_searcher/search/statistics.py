"""Answering ``kb.stats``: documents and chunks per library, or one library's documents."""

from __future__ import annotations

import json

from kbus_contract import DocumentEntry, LibraryStats, StatsReply, StatsRequest
from kbus_contract.tenancy import Identity, require_granted, require_tenant
from weaviate.exceptions import WeaviateBaseError

from kbus_searcher.store import ChunkStore
from kbus_searcher.store.errors import unavailable


async def library_stats(store: ChunkStore, req: StatsRequest, sent: Identity) -> StatsReply:
    """Documents and chunks per library of a tenant (those its grant reaches), or the
    documents of one library."""
    require_tenant(sent, req.tenant)
    granted = sent.libraries()
    if req.library is not None:
        require_granted(sent, (req.library,))
    try:
        rows = await store.queries.library_stats(req.tenant)
        listed = await _documents(store, req)
    except WeaviateBaseError as exc:
        raise unavailable(exc, "count") from exc
    return StatsReply(
        documents=listed,
        tenant=req.tenant,
        libraries=tuple(
            LibraryStats(library=lib, documents=docs, chunks=chunks)
            for lib, docs, chunks in rows
            if granted is None or lib in granted
        ),
    )


async def _documents(store: ChunkStore, req: StatsRequest) -> tuple[DocumentEntry, ...]:
    if req.library is None:
        return ()
    rows = await store.queries.documents(req.tenant, req.library, req.filters, req.limit)
    return tuple(
        DocumentEntry(
            document_id=row["document_id"],
            title=row.get("title") or "",
            version=row.get("version") or "",
            source_uri=row.get("source_uri") or "",
            metadata=json.loads(row.get("metadata_json") or "{}"),
        )
        for row in rows
    )
