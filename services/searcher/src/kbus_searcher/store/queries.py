"""Queries: a search's candidates (one function per kind of search) and library statistics."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from kbus_contract import SearchType
from kbus_contract.identifiers import chunk_id
from kbus_runtime.analysis import analyze
from kbus_runtime.tracing import store_span
from weaviate.classes.aggregate import GroupByAggregate
from weaviate.classes.query import Filter, HybridFusion, MetadataQuery, Sort
from weaviate.collections.classes.filters import _Filters

from kbus_searcher.store import filters
from kbus_searcher.store.collections import Collections
from kbus_searcher.store.schema import (
    CHUNK_VECTOR,
    DOCUMENT_VECTOR,
    KEYWORD_PROPERTIES,
    RETURN_PROPERTIES,
)

#: What a context reads of the chunks around a hit.
BLOCK_PROPERTIES = ["position", "char_start", "char_end", "text", "heading_path", "page"]
#: The most candidates one search asks for.
MAX_RESULT_WINDOW = 1_000


@dataclass(frozen=True)
class Candidate:
    """A chunk the store returned, with the scores that placed it."""

    uuid: str
    properties: dict[str, Any]
    keyword: float | None
    vector: float | None
    fused: float | None
    #: Cosine of the query and the chunk's document vector (vector and hybrid search).
    document: float | None = None


@dataclass(frozen=True)
class Query:
    """What one search asks of the store."""

    tenant: str
    libraries: tuple[str, ...]
    text: str
    vector: list[float] | None
    search_type: SearchType
    alpha: float
    limit: int
    #: Who the caller may read as: "*" and the principals it acts for (filters.readable).
    readers: tuple[str, ...]
    filters: filters.Filters = field(default_factory=dict)
    exclude_documents: tuple[str, ...] = ()


_EXPLAIN = re.compile(
    r"Result Set (keyword|vector),\w+\) Document \S+: original score ([-+0-9.eE]+)"
)


def parse_explain(explain: str | None) -> tuple[float | None, float | None]:
    """The raw keyword (BM25) and vector (cosine) scores out of a hybrid ``explain_score``."""
    found: dict[str, float] = {}
    for kind, value in _EXPLAIN.findall(explain or ""):
        found[kind] = float(value)
    return found.get("keyword"), found.get("vector")


def as_chunk(tenant: str, candidate: Candidate) -> Candidate:
    """A matching text's object as the chunk it stands for (its id; ``matched`` says which
    text placed it)."""
    p = candidate.properties
    if not int(p.get("match") or 0):
        return candidate
    position = int(p.get("position") or 0)
    own = chunk_id(tenant, str(p["library"]), str(p["document_id"]), str(p["version"]), position)
    return replace(candidate, uuid=own)


def distinct(candidates: Iterable[Candidate]) -> list[Candidate]:
    """Each chunk once, at its first (best) place: a chunk found by its own text and by its
    matching texts is returned once, by the best of them.

    Weaviate 1.36 to 1.38.16 can return one object twice from a filtered graph search (ACORN
    enters its entry point twice; fixed in 1.38.17, weaviate/weaviate#13211, which cannot be
    built here: a module it needs is not served).
    """
    seen: set[str] = set()
    unique = []
    for candidate in candidates:
        if candidate.uuid not in seen:
            seen.add(candidate.uuid)
            unique.append(candidate)
    return unique


async def keyword(handle: Any, query: Query, where: _Filters) -> list[Candidate]:
    """BM25 over the analysed keyword text."""
    res = await handle.query.bm25(
        query=analyze(query.text),
        query_properties=KEYWORD_PROPERTIES,
        limit=query.limit,
        filters=where,
        return_metadata=MetadataQuery(score=True),
        return_properties=RETURN_PROPERTIES,
    )
    return [Candidate(str(o.uuid), o.properties, o.metadata.score, None, None) for o in res.objects]


def _document(query: Query, obj: Any) -> float | None:
    """Cosine of the query and the object's document vector (both are unit length)."""
    vector = (obj.vector or {}).get(DOCUMENT_VECTOR)
    if vector is None or query.vector is None:
        return None
    return float(
        np.dot(np.asarray(query.vector, dtype=np.float32), np.asarray(vector, dtype=np.float32))
    )


async def nearest(handle: Any, query: Query, where: _Filters) -> list[Candidate]:
    """The chunks whose vectors are closest to the query's (cosine)."""
    res = await handle.query.near_vector(
        near_vector=query.vector,
        target_vector=CHUNK_VECTOR,
        include_vector=[DOCUMENT_VECTOR],
        limit=query.limit,
        filters=where,
        return_metadata=MetadataQuery(distance=True),
        return_properties=RETURN_PROPERTIES,
    )
    return [
        Candidate(
            str(o.uuid),
            o.properties,
            None,
            1.0 - float(o.metadata.distance),
            None,
            _document(query, o),
        )
        for o in res.objects
    ]


async def hybrid(handle: Any, query: Query, where: _Filters) -> list[Candidate]:
    """Relative-score fusion of the keyword and vector lists, with both raw scores kept."""
    res = await handle.query.hybrid(
        query=analyze(query.text),
        vector=query.vector,
        target_vector=CHUNK_VECTOR,
        include_vector=[DOCUMENT_VECTOR],
        alpha=query.alpha,
        limit=query.limit,
        filters=where,
        fusion_type=HybridFusion.RELATIVE_SCORE,
        query_properties=KEYWORD_PROPERTIES,
        return_metadata=MetadataQuery(score=True, explain_score=True),
        return_properties=RETURN_PROPERTIES,
    )
    candidates = []
    for o in res.objects:
        bm25, cosine = parse_explain(o.metadata.explain_score)
        candidates.append(
            Candidate(
                str(o.uuid), o.properties, bm25, cosine, o.metadata.score, _document(query, o)
            )
        )
    return candidates


_KINDS = {SearchType.KEYWORD: keyword, SearchType.VECTOR: nearest, SearchType.HYBRID: hybrid}


class ChunkQueries:
    """Reads the collection searches are pointed at."""

    def __init__(self, collections: Collections) -> None:
        self.collections = collections

    async def search(self, query: Query) -> list[Candidate]:
        """Candidates for a query, scoped to a tenant and its libraries."""
        name = await self.collections.active()
        if name is None or not await self.collections.tenant_exists(query.tenant, name):
            return []
        where = filters.scope(
            query.libraries, query.filters, query.exclude_documents, readers=query.readers
        )
        run = _KINDS[query.search_type]
        with store_span(query.search_type.value, name, query.tenant) as span:
            found = await run(self.collections.use(name, query.tenant), query, where)
            found = distinct(as_chunk(query.tenant, c) for c in found)
            span.set_attribute("kbus.candidates", len(found))
        return found

    async def best_cosine(
        self, tenant: str, libraries: tuple[str, ...], vector: list[float]
    ) -> float | None:
        """The highest cosine of ``vector`` among the chunks of a tenant's libraries (all of
        them: a library's noise floor, never returned to a caller)."""
        name = await self.collections.active()
        if name is None or not await self.collections.tenant_exists(tenant, name):
            return None
        with store_span("best cosine", name, tenant):
            res = await self.collections.use(name, tenant).query.near_vector(
                near_vector=vector,
                target_vector=CHUNK_VECTOR,
                limit=1,
                filters=filters.scope(libraries, {}, readers=None),
                return_metadata=MetadataQuery(distance=True),
                return_properties=[],
            )
        return 1.0 - float(res.objects[0].metadata.distance) if res.objects else None

    async def read_keywords(self, tenant: str, ids: list[str]) -> dict[str, str]:
        """The analysed keyword text of chunks of the active collection, by id."""
        name = await self.collections.active()
        if name is None or not ids:
            return {}
        with store_span("read keywords", name, tenant):
            res = await self.collections.use(name, tenant).query.fetch_objects(
                filters=Filter.by_id().contains_any(ids),
                limit=len(ids),
                return_properties=KEYWORD_PROPERTIES,
            )
        return {str(o.uuid): str(o.properties.get("keywords") or "") for o in res.objects}

    async def blocks(
        self, tenant: str, key: tuple[str, str, str], first: int, last: int
    ) -> list[dict[str, Any]]:
        """The chunks at positions ``first`` to ``last`` of one version of one document
        (library, document id, version), with their text, offsets, headings and pages."""
        name = await self.collections.active()
        if name is None:
            return []
        library, document_id, version = key
        where = (
            filters.document(library, document_id)
            & Filter.by_property("version").equal(version)
            & Filter.by_property("position").greater_or_equal(first)
            & Filter.by_property("position").less_or_equal(last)
            & filters.own_objects()
        )
        with store_span("read blocks", name, tenant):
            res = await self.collections.use(name, tenant).query.fetch_objects(
                filters=where, limit=last - first + 1, return_properties=BLOCK_PROPERTIES
            )
        return [dict(o.properties) for o in res.objects]

    async def count_chunks(self, tenant: str) -> int:
        """How many chunks a tenant stores (in the collection searches read)."""
        name = await self.collections.active()
        if name is None or not await self.collections.tenant_exists(tenant, name):
            return 0
        result = await self.collections.use(name, tenant).aggregate.over_all(total_count=True)
        return int(result.total_count or 0)

    async def documents(
        self,
        tenant: str,
        library: str,
        where: filters.Filters,
        limit: int,
        readers: tuple[str, ...],
    ) -> list[dict[str, Any]]:
        """The first chunk's properties of each document of a library whose metadata matches
        and that one of ``readers`` may read (every document has exactly one chunk at
        position 0)."""
        name = await self.collections.active()
        if name is None or not await self.collections.tenant_exists(tenant, name):
            return []
        res = await self.collections.use(name, tenant).query.fetch_objects(
            filters=filters.scope((library,), where, readers=readers)
            & Filter.by_property("position").equal(0)
            & filters.own_objects(),
            limit=limit,
            return_properties=["document_id", "title", "version", "source_uri", "metadata_json"],
        )
        return [dict(o.properties) for o in res.objects]

    async def versions(
        self, tenant: str, library: str, source: str | None, after: str | None, limit: int
    ) -> tuple[dict[str, tuple[str, int]], str | None]:
        """One page of a library's (one source's) documents in id order after ``after``: each
        one's latest stored version and its publish sequence (a document being replaced has
        two), and the id to ask after for the next page (None: this was the last)."""
        name = await self.collections.active()
        if name is None or not await self.collections.tenant_exists(tenant, name):
            return {}, None
        where = (
            Filter.by_property("library").equal(library)
            & Filter.by_property("position").equal(0)
            & filters.own_objects()
        )
        if source is not None:
            where = where & Filter.by_property("source").equal(source)
        if after is not None:
            where = where & Filter.by_property("document_id").greater_than(after)
        res = await self.collections.use(name, tenant).query.fetch_objects(
            filters=where,
            limit=limit,
            sort=Sort.by_property("document_id"),
            return_properties=["document_id", "version", "sequence"],
        )
        rows = [
            (str(p["document_id"]), str(p["version"]), int(str(p["sequence"])))
            for p in (o.properties for o in res.objects)
        ]
        return _newest(rows, full=len(rows) == limit)

    async def library_stats(
        self, tenant: str, readers: tuple[str, ...]
    ) -> list[tuple[str, int, int]]:
        """(library, documents, chunks) for every library of a tenant, of the documents one of
        ``readers`` may read."""
        name = await self.collections.active()
        if name is None or not await self.collections.tenant_exists(tenant, name):
            return []
        handle = self.collections.use(name, tenant)
        by_library = GroupByAggregate(prop="library")
        mine = filters.own_objects() & filters.readable(readers)
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


def _newest(
    rows: list[tuple[str, str, int]], *, full: bool
) -> tuple[dict[str, tuple[str, int]], str | None]:
    """Each document's latest (version, sequence); a full page leaves out its last document
    (more of its versions may follow) unless that is all it holds."""
    last = rows[-1][0] if full else None
    whole = [row for row in rows if row[0] != last] or rows
    found: dict[str, tuple[str, int]] = {}
    for document_id, version, sequence in whole:
        if sequence >= found.get(document_id, ("", -1))[1]:
            found[document_id] = (version, sequence)
    return found, (whole[-1][0] if full else None)
