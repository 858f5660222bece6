"""The reply a search run has come to: the last step of a search."""

from __future__ import annotations

from kbus_contract import NoMatchReason, SearchReply, StageTimings

from kbus_searcher.search.ranking import first_kind
from kbus_searcher.search.runs import SearchRun


def no_match_reason(run: SearchRun, searched: bool) -> NoMatchReason | None:
    """Why the reply holds no hit, if the search ran and found none."""
    if not searched or run.hits:
        return None
    return run.verdict.reason or NoMatchReason.BELOW_MIN_SCORE


def reply_of(run: SearchRun, searched: bool = True) -> SearchReply:
    """The reply ``run`` has come to (``searched``: whether any library was searched)."""
    req = run.request
    return SearchReply(
        results=run.hits,
        searched=searched,
        no_match=searched and not run.hits,
        no_match_reason=no_match_reason(run, searched),
        candidates=run.candidates,
        search_type=req.search_type,
        alpha=run.alpha,
        min_score=run.min_score,
        min_similarity=run.verdict.min_similarity,
        min_evidence=run.verdict.min_evidence,
        best_similarity=run.verdict.best_similarity,
        baseline_similarity=run.verdict.baseline_similarity,
        keyword_coverage=run.verdict.keyword_coverage,
        evidence=run.verdict.evidence,
        document_weight=run.document_weight,
        query=run.query or req.query,
        transformer=run.transformer,
        score_kind=run.score_kind or first_kind(req.search_type, run.document_weight),
        model=run.model,
        reranker=run.reranker,
        degraded=run.degraded_reason is not None,
        degraded_reason=run.degraded_reason,
        budget_ms=run.deadline.budget_ms,
        timings=StageTimings(**run.timings),
        context=run.context,
    )
