"""One search on its way through the stages: what it has found out so far."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from kbus_contract import (
    Context,
    DegradedReason,
    QueryStates,
    SearchHit,
    SearchRequest,
)
from kbus_runtime.deadlines import Deadline

from kbus_searcher.search.chains import Chain
from kbus_searcher.search.relevance import Verdict
from kbus_searcher.settings import SearcherSettings


@dataclass
class SearchRun:
    """What one search has found out so far (``replies`` makes it the reply)."""

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
    #: Candidates the reranker scored.
    reranked: int = 0
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
