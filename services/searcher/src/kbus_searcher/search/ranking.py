"""The first stage's order: what a search's candidates are ranked by before any reranker
(the fused score, the cosine or BM25, blended with the document score)."""

from __future__ import annotations

from collections.abc import Sequence

from kbus_contract import SearchType

from kbus_searcher.store import Candidate


def first_order(
    candidates: Sequence[Candidate], search_type: SearchType, document_weight: float
) -> tuple[list[Candidate], list[float]]:
    """The candidates in the first stage's order, with the score each is ordered by."""
    firsts = first_stage(candidates, search_type, document_weight)
    positions = order(candidates, firsts)
    return [candidates[i] for i in positions], [firsts[i] for i in positions]


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


def _own(c: Candidate, search_type: SearchType) -> float | None:
    return {
        SearchType.HYBRID: c.fused,
        SearchType.VECTOR: c.vector,
        SearchType.KEYWORD: c.keyword,
    }[search_type]


def first_kind(search_type: SearchType, document_weight: float) -> str:
    """What the first stage's scores are (a reply's ``final`` scores when nothing reranked)."""
    if search_type is not SearchType.KEYWORD and document_weight > 0:
        return "first_stage"
    return {SearchType.HYBRID: "fused", SearchType.VECTOR: "cosine", SearchType.KEYWORD: "bm25"}[
        search_type
    ]
