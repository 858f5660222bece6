"""The one way to read chunks: a view of the store scoped to whom the read is for.

A :class:`Scope` says which tenant, which of its libraries and which readers (everyone's
documents, and those of the principals the caller acts for) a read may see; a
:class:`StoreView` built from it is the only object whose methods query the store, and every
one of its queries holds the scope's filter. A search, its context, its relevance check, a
listing, a count: each request builds its view once (``kbus_searcher.search.readers``).

A read for kbus itself (a tenant's stored chunks against its quota, the versions a sync or a
writer compares) sees every document of its libraries, restricted ones too: it says so by its
scope, made with :meth:`Scope.whole`, naming why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kbus_runtime.tracing import store_span
from weaviate.classes.aggregate import GroupByAggregate
from weaviate.classes.query import Filter, MetadataQuery, Sort
from weaviate.collections.classes.filters import _Filters

from kbus_searcher.store import filters
from kbus_searcher.store.collections import Collections
from kbus_searcher.store.pressure import Pressure
from kbus_searcher.store.queries import (
    BLOCK_PROPERTIES,
    KINDS,
    Candidate,
    Query,
    as_chunk,
    distinct,
    newest,
)
from kbus_searcher.store.schema import CHUNK_VECTOR, KEYWORD_PROPERTIES


@dataclass(frozen=True)
class Scope:
    """Whom a read is for: a tenant, its libraries (None: all of them), and the readers whose
    documents it sees (None: every document, for kbus's own reads and for a credential that
    may name every document, a writer's, on a form for restricted documents)."""

    tenant: str
    libraries: tuple[str, ...] | None
    readers: tuple[str, ...] | None
    #: Why a scope sees every document (a read for kbus itself); empty for a caller's.
    whole_because: str = ""

    @classmethod
    def of_caller(
        cls, tenant: str, libraries: tuple[str, ...] | None, readers: tuple[str, ...]
    ) -> Scope:
        """A caller's: what ``readers`` may read of these libraries."""
        return cls(tenant, libraries, readers)

    @classmethod
    def whole(cls, tenant: str, libraries: tuple[str, ...] | None, because: str) -> Scope:
        """A read of every document of these libraries, restricted ones too (kbus's own, or a
        writer's on a form for restricted documents), saying ``because``."""
        if not because:
            raise ValueError("a read of every document says why")
        return cls(tenant, libraries, None, because)

    def where(self) -> _Filters | None:
        """The filter every query of this scope holds (None: the tenant's whole store)."""
        parts: list[_Filters] = []
        if self.libraries is not None:
            parts.append(Filter.by_property("library").contains_any(list(self.libraries)))
        if self.readers is not None:
            parts.append(filters.readable(self.readers))
        return Filter.all_of(parts) if parts else None

    def held(self, where: _Filters) -> _Filters:
        """``where`` within this scope."""
        own = self.where()
        return where if own is None else own & where


class StoreView:
    """Reads of the collection searches are pointed at, within one :class:`Scope`."""

    def __init__(
        self,
        collections: Collections,
        scope: Scope,
        pressure: Pressure | None = None,
        work: float = 1.0,
    ) -> None:
        self.collections = collections
        self.scope = scope
        #: The searches in flight, and what the request reading through this view costs: a
        #: costly one's reads go after other tenants' cheap searches (store.pressure).
        self.pressure = pressure
        self.work = work
        #: The collection and handle this view opened (a request's queries share them).
        self._opened: tuple[str, Any] | None = None
        #: Objects this view's reads returned: what its request cost the store.
        self.read = 0

    async def _handle(self) -> tuple[str, Any] | None:
        """The active collection's handle for the scope's tenant (None: nothing stored), opened
        once per collection the alias names (a model switch mid-request opens the new one);
        a costly request's read waits here for other tenants' cheap searches."""
        if self.pressure is not None:
            await self.pressure.room_to_read(self.scope.tenant, self.work)
        name = await self.collections.active()
        if name is None:
            return None
        if self._opened is None or self._opened[0] != name:
            if not await self.collections.tenant_exists(self.scope.tenant, name):
                return None
            self._opened = (name, self.collections.use(name, self.scope.tenant))
        return self._opened

    async def search(self, query: Query) -> list[Candidate]:
        """Candidates for a query, within the scope (and the query's own libraries)."""
        found = await self._handle()
        if found is None:
            return []
        name, handle = found
        where = self.scope.held(
            filters.scope(query.libraries, query.filters, query.exclude_documents)
        )
        run = KINDS[query.search_type]
        with store_span(query.search_type.value, name, self.scope.tenant) as span:
            hits = await run(handle, query, where)
            hits = distinct(as_chunk(self.scope.tenant, c) for c in hits)
            span.set_attribute("kbus.candidates", len(hits))
        self.read += len(hits)
        return hits

    async def best_cosine(self, libraries: tuple[str, ...], vector: list[float]) -> float | None:
        """The highest cosine of ``vector`` among the chunks of these libraries the scope sees
        (a library's noise floor for its readers, never returned to a caller)."""
        found = await self._handle()
        if found is None:
            return None
        name, handle = found
        with store_span("best cosine", name, self.scope.tenant):
            res = await handle.query.near_vector(
                near_vector=vector,
                target_vector=CHUNK_VECTOR,
                limit=1,
                filters=self.scope.held(filters.scope(libraries, {})),
                return_metadata=MetadataQuery(distance=True),
                return_properties=[],
            )
        return 1.0 - float(res.objects[0].metadata.distance) if res.objects else None

    async def keywords(self, ids: list[str]) -> dict[str, str]:
        """The analysed keyword text of chunks the scope sees, by id."""
        found = await self._handle()
        if found is None or not ids:
            return {}
        name, handle = found
        with store_span("read keywords", name, self.scope.tenant):
            res = await handle.query.fetch_objects(
                filters=self.scope.held(Filter.by_id().contains_any(ids)),
                limit=len(ids),
                return_properties=KEYWORD_PROPERTIES,
            )
        self.read += len(res.objects)
        return {str(o.uuid): str(o.properties.get("keywords") or "") for o in res.objects}

    async def blocks(
        self, key: tuple[str, str, str], first: int, last: int
    ) -> list[dict[str, Any]]:
        """The chunks the scope sees at positions ``first`` to ``last`` of one version of one
        document (library, document id, version), with their text, offsets, headings, pages."""
        found = await self._handle()
        if found is None:
            return []
        name, handle = found
        library, document_id, version = key
        where = (
            filters.document(library, document_id)
            & Filter.by_property("version").equal(version)
            & Filter.by_property("position").greater_or_equal(first)
            & Filter.by_property("position").less_or_equal(last)
            & filters.own_objects()
        )
        with store_span("read blocks", name, self.scope.tenant):
            res = await handle.query.fetch_objects(
                filters=self.scope.held(where),
                limit=last - first + 1,
                return_properties=BLOCK_PROPERTIES,
            )
        self.read += len(res.objects)
        return [dict(o.properties) for o in res.objects]

    async def count_chunks(self) -> int:
        """How many objects (chunks and their matching texts) the scope sees."""
        found = await self._handle()
        if found is None:
            return 0
        result = await found[1].aggregate.over_all(total_count=True, filters=self.scope.where())
        return int(result.total_count or 0)

    async def documents(
        self, library: str, where: filters.Filters, limit: int, after: str | None = None
    ) -> tuple[list[dict[str, Any]], int]:
        """One page of the documents of a library the scope sees whose metadata matches, by
        id after ``after``: each one's first chunk's properties (every document has exactly one
        chunk at position 0), and how many match in all."""
        found = await self._handle()
        if found is None:
            return [], 0
        matching = self.scope.held(
            filters.scope((library,), where)
            & Filter.by_property("position").equal(0)
            & filters.own_objects()
        )
        page = matching
        if after is not None:
            page = matching & Filter.by_property("document_id").greater_than(after)
        res = await found[1].query.fetch_objects(
            filters=page,
            limit=limit,
            sort=Sort.by_property("document_id"),
            return_properties=["document_id", "title", "version", "source_uri", "metadata_json"],
        )
        counted = await found[1].aggregate.over_all(total_count=True, filters=matching)
        return [dict(o.properties) for o in res.objects], counted.total_count or 0

    async def versions(
        self, source: str | None, after: str | None, limit: int
    ) -> tuple[dict[str, tuple[str, int]], str | None]:
        """One page of the scope's documents (one source's) in id order after ``after``: each
        one's latest stored version and its publish sequence (a document being replaced has
        two), and the id to ask after for the next page (None: this was the last)."""
        found = await self._handle()
        if found is None:
            return {}, None
        where = Filter.by_property("position").equal(0) & filters.own_objects()
        if source is not None:
            where = where & Filter.by_property("source").equal(source)
        if after is not None:
            where = where & Filter.by_property("document_id").greater_than(after)
        res = await found[1].query.fetch_objects(
            filters=self.scope.held(where),
            limit=limit,
            sort=Sort.by_property("document_id"),
            return_properties=["document_id", "version", "sequence"],
        )
        rows = [
            (str(p["document_id"]), str(p["version"]), int(str(p["sequence"])))
            for p in (o.properties for o in res.objects)
        ]
        return newest(rows, full=len(rows) == limit)

    async def library_stats(self) -> list[tuple[str, int, int]]:
        """(library, documents, chunks) for every library the scope sees."""
        found = await self._handle()
        if found is None:
            return []
        handle = found[1]
        by_library = GroupByAggregate(prop="library")
        mine = self.scope.held(filters.own_objects())
        chunks = await handle.aggregate.over_all(
            group_by=by_library, total_count=True, filters=mine
        )
        # Every document has exactly one chunk at position 0.
        firsts = await handle.aggregate.over_all(
            group_by=by_library,
            total_count=True,
            filters=Filter.by_property("position").equal(0) & mine,
        )
        documents = {str(g.grouped_by.value): int(g.total_count or 0) for g in firsts.groups}
        return sorted(
            (
                str(g.grouped_by.value),
                documents.get(str(g.grouped_by.value), 0),
                int(g.total_count or 0),
            )
            for g in chunks.groups
        )
