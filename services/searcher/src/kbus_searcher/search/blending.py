"""The reply's order: the reranker's scores blended with the first stage's, every score named
for what it is, and the top ``k`` (:func:`blended`, the search's one step here)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from kbus_contract import Scores, SearchHit, SearchType

from kbus_searcher.search.ranking import first_kind
from kbus_searcher.store import Candidate


@dataclass(frozen=True)
class Blended:
    """A search's hits once the reranker's scores are in."""

    #: Every candidate scoring at least the minimum, ranked (what a context fills from).
    ranked: list[SearchHit]
    #: The reply's top k (each document once, at its best chunk, when grouped).
    hits: tuple[SearchHit, ...]
    #: The reranker the reply names, and what its ``final`` scores are.
    reranker: str
    score_kind: str


@dataclass(frozen=True)
class Blend:
    """How a search's hits are made: its kind of search, weights and cut-offs."""

    search_type: SearchType
    prior_weight: float
    document_weight: float
    min_score: float
    by_document: bool
    k: int


def blended(
    candidates: Sequence[Candidate],
    firsts: Sequence[float],
    rerank: Sequence[float] | None,
    model: str,
    how: Blend,
) -> Blended:
    """The hits of a reply from candidates in first-stage order and the reranker's scores of
    the first of them (``model``: the reranker's, "" when none answered)."""
    ranked = ranked_hits(candidates, firsts, rerank, how.prior_weight, how.min_score)
    return Blended(
        ranked=ranked,
        hits=final_hits(ranked, how.by_document, how.k),
        reranker=reranker_name(model, how.prior_weight),
        score_kind=score_kind(how.search_type, bool(model), how.document_weight),
    )


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


def score_kind(search_type: SearchType, reranked: bool, document_weight: float) -> str:
    """What a reply's ``final`` scores are."""
    return "rerank" if reranked else first_kind(search_type, document_weight)


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
