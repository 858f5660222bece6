"""One search on its way through the stages: what it has found out, and its reply."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from kbus_contract import (
    Context,
    DegradedReason,
    NoMatchReason,
    QueryStates,
    SearchHit,
    SearchReply,
    SearchRequest,
    StageTimings,
)
from kbus_runtime.deadlines import Deadline

from kbus_searcher.search.chains import Chain
from kbus_searcher.search.ranking import first_kind
from kbus_searcher.search.relevance import Verdict
from kbus_searcher.settings import SearcherSettings


@dataclass
class SearchRun:
    """What one search has found out so far; becomes the reply."""

    request: SearchRequest
    deadline: Deadline
    started: float
    k: int
    alpha: float
    min_score: float
    document_weight: float
    verdict: Verdict = field(default_factory=Verdict)
    chain: Chain = field(default_factory=Chain)
    query: str = ""
    transformer: str = "none"  # the transformer that produced `query`
    model: str = ""
    query_states: QueryStates | None = None  # the query's token states, from its embedding
    reranker: str = ""
    #: What the hits' ``final`` scores are (set where they are blended).
    score_kind: str = ""
    candidates: int = 0
    degraded_reason: DegradedReason | None = None
    hits: tuple[SearchHit, ...] = ()
    context: Context | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @classmethod
    def start(cls, req: SearchRequest, settings: SearcherSettings, deadline: Deadline) -> SearchRun:
        """A run with the request's choices, the server's defaults where it made none."""

        def chosen(value: float | None, default: float) -> float:
            return default if value is None else value

        return cls(
            req,
            deadline,
            time.perf_counter(),
            k=req.k or settings.k,
            alpha=chosen(req.alpha, settings.alpha),
            min_score=chosen(req.min_score, settings.min_score),
            document_weight=settings.document_weight,
        )

    def no_match_reason(self, searched: bool) -> NoMatchReason | None:
        """Why the reply holds no hit, if the search ran and found none."""
        if not searched or self.hits:
            return None
        return self.verdict.reason or NoMatchReason.BELOW_MIN_SCORE

    def reply(self, searched: bool = True) -> SearchReply:
        """The reply this run has come to (``searched``: whether any library was searched)."""
        run, req = self, self.request
        return SearchReply(
            results=run.hits,
            searched=searched,
            no_match=searched and not run.hits,
            no_match_reason=run.no_match_reason(searched),
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
