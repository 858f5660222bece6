"""From candidates to the hits of a reply: the order, and every score named for what it is."""

from __future__ import annotations

import json
from collections.abc import Sequence

from kbus_contract import Scores, SearchHit, SearchType
from kbus_runtime.passages import passage_text

from kbus_searcher.store import Candidate


def passage(c: Candidate) -> str:
    """A candidate as the reranker reads it: title and headings, then the text."""
    p = c.properties
    return passage_text(p.get("title") or "", p.get("heading_path") or (), p.get("text") or "")


def prior(c: Candidate, search_type: SearchType) -> float | None:
    """The first-stage score a reranker may blend with its own (0..1), if there is one."""
    if search_type is SearchType.HYBRID:
        return c.fused
    if search_type is SearchType.VECTOR:
        return c.vector
    return None


def score_kind(search_type: SearchType, reranked: bool) -> str:
    """What a reply's ``final`` scores are."""
    if reranked:
        return "rerank"
    return {SearchType.HYBRID: "fused", SearchType.VECTOR: "cosine", SearchType.KEYWORD: "bm25"}[
        search_type
    ]


def _first_stage(c: Candidate, search_type: SearchType) -> float:
    score = {
        SearchType.HYBRID: c.fused,
        SearchType.VECTOR: c.vector,
        SearchType.KEYWORD: c.keyword,
    }[search_type]
    return float(score or 0.0)


def best_per_document(hits: list[SearchHit]) -> list[SearchHit]:
    """Each document once, at the rank of its best chunk."""
    seen: set[tuple[str, str]] = set()
    best = []
    for hit in hits:
        key = (hit.library, hit.document_id)
        if key not in seen:
            seen.add(key)
            best.append(hit)
    return best


def rank(
    candidates: Sequence[Candidate], rerank: list[float] | None, search_type: SearchType
) -> list[SearchHit]:
    """Reranked candidates by their reranker score, then the rest in first-stage order.

    Beyond the rerank depth a hit keeps its first-stage score as ``final`` and its place after
    every reranked hit.
    """
    scored = rerank or []
    reranked: list[SearchHit] = []
    rest: list[SearchHit] = []
    for i, c in enumerate(candidates):
        has_rerank = i < len(scored)
        scores = Scores(
            keyword=c.keyword,
            vector=c.vector,
            fused=c.fused,
            rerank=scored[i] if has_rerank else None,
            final=scored[i] if has_rerank else _first_stage(c, search_type),
        )
        (reranked if has_rerank else rest).append(_hit(c, scores))
    # Stable sorts: ties keep the first stage's order.
    reranked.sort(key=lambda h: -h.scores.final)
    rest.sort(key=lambda h: -h.scores.final)
    return reranked + rest


def _hit(c: Candidate, scores: Scores) -> SearchHit:
    p = c.properties
    return SearchHit(
        chunk_id=c.uuid,
        document_id=p["document_id"],
        library=p["library"],
        title=p.get("title") or "",
        text=p.get("text") or "",
        heading_path=tuple(p.get("heading_path") or ()),
        source_uri=p.get("source_uri") or "",
        char_start=int(p.get("char_start") or 0),
        char_end=int(p.get("char_end") or 0),
        position=int(p.get("position") or 0),
        version=p.get("version") or "",
        metadata=json.loads(p.get("metadata_json") or "{}"),
        scores=scores,
    )
