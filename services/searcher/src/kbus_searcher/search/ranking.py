"""From candidates to the hits of a reply: the order, and every score named for what it is.

Every order a search's hits take is made here: the first stage's (:func:`first_order`) and the
final one with the reranker's scores (:func:`ranked_hits`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from kbus_contract import Scores, SearchHit, SearchType

from kbus_searcher.store import Candidate


def first_order(
    candidates: Sequence[Candidate], search_type: SearchType, document_weight: float
) -> tuple[list[Candidate], list[float]]:
    """The candidates in the first stage's order, with the score each is ordered by."""
    firsts = first_stage(candidates, search_type, document_weight)
    positions = order(candidates, firsts)
    return [candidates[i] for i in positions], [firsts[i] for i in positions]


def ranked_hits(
    candidates: Sequence[Candidate],
    firsts: Sequence[float],
    rerank: Sequence[float] | None,
    prior_weight: float,
    min_score: float,
) -> list[SearchHit]:
    """Every candidate scoring at least ``min_score``, ranked (:func:`rank`)."""
    return [
        h for h in rank(candidates, firsts, rerank, prior_weight) if h.scores.final >= min_score
    ]


def final_hits(hits: list[SearchHit], by_document: bool, k: int) -> tuple[SearchHit, ...]:
    """The reply's top ``k`` of the ranked hits, each document once at its best chunk's place
    when ``by_document``."""
    if by_document:
        hits = best_per_document(hits)
    return tuple(hits[:k])


def first_stage(
    candidates: Sequence[Candidate], search_type: SearchType, document_weight: float
) -> list[float]:
    """What the first stage orders by, per candidate: the fused score (hybrid) or the cosine
    (vector), blended with the document score min-max normalised over the candidates at
    ``document_weight``; the raw BM25 score in keyword search."""
    base = [float(_own(c, search_type) or 0.0) for c in candidates]
    documents = [c.document for c in candidates]
    if search_type is SearchType.KEYWORD or document_weight <= 0 or None in documents:
        return base
    present = [float(d) for d in documents if d is not None]
    lo, hi = min(present), max(present)
    span = hi - lo
    return [
        (1 - document_weight) * b
        + document_weight * ((float(d or 0.0) - lo) / span if span else 1.0)
        for b, d in zip(base, documents, strict=True)
    ]


def order(candidates: Sequence[Candidate], scores: Sequence[float]) -> list[int]:
    """Candidate positions by score, ties in the store's order."""
    return sorted(range(len(candidates)), key=lambda i: -scores[i])


def score_kind(search_type: SearchType, reranked: bool, document_weight: float) -> str:
    """What a reply's ``final`` scores are."""
    if reranked:
        return "rerank"
    if search_type is not SearchType.KEYWORD and document_weight > 0:
        return "first_stage"
    return {SearchType.HYBRID: "fused", SearchType.VECTOR: "cosine", SearchType.KEYWORD: "bm25"}[
        search_type
    ]


def _own(c: Candidate, search_type: SearchType) -> float | None:
    return {
        SearchType.HYBRID: c.fused,
        SearchType.VECTOR: c.vector,
        SearchType.KEYWORD: c.keyword,
    }[search_type]


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


def blend(scores: Sequence[float], priors: Sequence[float], prior_weight: float) -> list[float]:
    """``(1-w) * minmax(scores) + w * prior``; the reranker's own scores when ``w`` is 0.

    Dense re-scorers are blind to exact tokens (part numbers, error codes) that the keyword side
    of the first stage finds; blending keeps that evidence. Both sides are on a 0..1 scale
    relative to this candidate list, as the first stage's relative-score fusion is.
    """
    if prior_weight <= 0:
        return [float(s) for s in scores]
    lo, hi = min(scores), max(scores)
    norm = [(s - lo) / (hi - lo) if hi > lo else 1.0 for s in scores]
    tops = priors[: len(norm)]  # the reranked candidates are the first ones
    return [(1 - prior_weight) * n + prior_weight * p for n, p in zip(norm, tops, strict=True)]


def reranker_name(model: str, prior_weight: float) -> str:
    """The reranker a reply names: its model, and the prior's weight where it was blended."""
    return f"{model}+prior({prior_weight:g})" if model and prior_weight > 0 else model


def rank(
    candidates: Sequence[Candidate],
    firsts: Sequence[float],
    rerank: Sequence[float] | None,
    prior_weight: float = 0.0,
) -> list[SearchHit]:
    """Hits from candidates in first-stage order: the reranked ones (the first
    ``len(rerank)``) by the reranker's score blended with the first stage's at
    ``prior_weight``, then the rest by their first-stage score.

    Beyond the rerank depth a hit keeps its first-stage score as ``final`` and its place after
    every reranked hit.
    """
    scored = blend(rerank, firsts, prior_weight) if rerank else []
    reranked: list[SearchHit] = []
    rest: list[SearchHit] = []
    for i, (c, first) in enumerate(zip(candidates, firsts, strict=True)):
        has_rerank = i < len(scored)
        scores = Scores(
            keyword=c.keyword,
            vector=c.vector,
            fused=c.fused,
            document=c.document,
            first_stage=first,
            rerank=scored[i] if has_rerank else None,
            final=scored[i] if has_rerank else first,
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
        page=int(p.get("page") or 0) or None,
        version=p.get("version") or "",
        metadata=json.loads(p.get("metadata_json") or "{}"),
        scores=scores,
        matched=p.get("matched") or None,
    )
