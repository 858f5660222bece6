"""Answering ``kb.stats`` (documents and chunks per library, or one library's documents) and
``kb.versions`` (the indexed version of each document, for a publisher about to sync)."""

from __future__ import annotations

import json

from kbus_contract import (
    DocumentEntry,
    LibraryStats,
    StatsReply,
    StatsRequest,
    SyncEntry,
    VersionsReply,
    VersionsRequest,
)
from kbus_contract.tenancy import Identity
from weaviate.exceptions import WeaviateBaseError

from kbus_searcher.search.readers import scope_of
from kbus_searcher.store import ChunkStore, Scope, StoreView
from kbus_searcher.store.errors import unavailable


async def library_stats(store: ChunkStore, req: StatsRequest, sent: Identity) -> StatsReply:
    """Documents and chunks per library of a tenant (those its grant reaches), or the
    documents of one library."""
    named = None if req.library is None else (req.library,)
    view = store.view(_counted(scope_of(sent, req.tenant, named, req.principals), sent))
    whole = store.view(_counted(scope_of(sent, req.tenant, None, req.principals), sent))
    try:
        rows = await whole.library_stats()
        listed, total = await _documents(view, req)
    except WeaviateBaseError as exc:
        raise unavailable(exc, "count") from exc
    return StatsReply(
        documents=listed,
        total=total,
        after=listed[-1].document_id if len(listed) == req.limit else None,
        tenant=req.tenant,
        libraries=tuple(
            LibraryStats(library=lib, documents=docs, chunks=chunks) for lib, docs, chunks in rows
        ),
    )


def _counted(scope: Scope, sent: Identity) -> Scope:
    """What is counted: on the form for restricted documents (only a credential that may
    write, or act for anyone, reaches it), every document; else what the readers may read."""
    if not sent.restricted:
        return scope
    return Scope.whole(scope.tenant, scope.libraries, "its writer lists what it published")


async def _documents(view: StoreView, req: StatsRequest) -> tuple[tuple[DocumentEntry, ...], int]:
    """One page of the library's documents, and how many match in all."""
    if req.library is None:
        return (), 0
    rows, total = await view.documents(req.library, req.filters, req.limit, req.after)
    return tuple(
        DocumentEntry(
            document_id=row["document_id"],
            title=row.get("title") or "",
            version=row.get("version") or "",
            source_uri=row.get("source_uri") or "",
            metadata=json.loads(row.get("metadata_json") or "{}"),
        )
        for row in rows
    ), total


async def versions(store: ChunkStore, req: VersionsRequest, sent: Identity) -> VersionsReply:
    """One page of the indexed versions of a library's (or one source's) documents. Every
    document's, whatever its access: only a credential that may write the library asks (ids
    and versions, never text)."""
    scope_of(sent, req.tenant, (req.library,))
    view = store.view(
        Scope.whole(req.tenant, (req.library,), "a writer compares its source with the library")
    )
    try:
        found, after = await view.versions(req.source, req.after, req.limit)
    except WeaviateBaseError as exc:
        raise unavailable(exc, "list versions") from exc
    return VersionsReply(
        documents=tuple(SyncEntry(document_id=i, version=v) for i, (v, _) in found.items()),
        after=after,
    )
