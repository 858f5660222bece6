"""What a search asks of the store and the kinds of search (keyword, vector, hybrid): run only
inside a scoped view (:mod:`kbus_searcher.store.view`)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from kbus_contract import SearchType
from kbus_contract.identifiers import chunk_id
from kbus_runtime.analysis import analyze
from weaviate.classes.query import HybridFusion, MetadataQuery
from weaviate.collections.classes.filters import _Filters

from kbus_searcher.store import filters
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

    libraries: tuple[str, ...]
    text: str
    vector: list[float] | None
    search_type: SearchType
    alpha: float
    limit: int
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


KINDS = {SearchType.KEYWORD: keyword, SearchType.VECTOR: nearest, SearchType.HYBRID: hybrid}


def newest(
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
