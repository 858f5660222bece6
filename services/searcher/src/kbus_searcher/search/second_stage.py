"""The second stage of a search: the reranker, asked only when its answer can come in time.

Reranking refines an order the first stage already gave. A request that did not insist on it
(``rerank`` unset) gets the first stage's order, marked degraded with the reason, when the
reranker would not fit in what is left of the budget, did not answer in it, or is not running.
A request that set ``rerank: true`` gets the reranker's answer or its error.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from kbus_contract import (
    DegradedReason,
    QueryStates,
    RerankCandidate,
    RerankerKind,
    RerankReply,
    RerankRequest,
    SearchRequest,
)
from kbus_contract.errors import ErrorCode, KbusError, PermanentError, TransientError
from kbus_runtime.deadlines import Deadline
from kbus_runtime.passages import passage_text
from kbus_runtime.stage import Stage

from kbus_searcher.search.budgeting import RerankCost
from kbus_searcher.search.chains import Chain
from kbus_searcher.settings import SearcherSettings
from kbus_searcher.store import Candidate

log = logging.getLogger("kbus.searcher")


@dataclass(frozen=True)
class Reranked:
    """The reranker's scores for the first candidates (None: first-stage order stands)."""

    scores: list[float] | None = None
    model: str = ""
    degraded: DegradedReason | None = None
    waited_s: float = 0.0  # time spent asking the reranker (0: it was not asked)


class SecondStage:
    """Asks ``kb.rerank`` for the first candidates' scores, within a search's deadline."""

    def __init__(self, stage: Stage, settings: SearcherSettings) -> None:
        self.stage = stage
        self.settings = settings
        # A prompted model and the local scorer cost very different times per candidate.
        self.costs = {RerankerKind.DEFAULT: RerankCost(), RerankerKind.PROMPTED: RerankCost()}

    async def rerank(
        self,
        req: SearchRequest,
        chain: Chain,
        query: str,
        found: Sequence[Candidate],
        deadline: Deadline,
        query_states: QueryStates | None = None,
    ) -> Reranked:
        """The reranker's own scores for the first candidates of ``found`` (in first-stage
        order), by the reranker the chain names; :mod:`.ranking` makes the order from them."""
        if not (chain.rerank and found):
            return Reranked()
        candidates = self._candidates(req, chain, found)
        reserve_s = self.settings.reserve_ms / 1000.0
        left_s = deadline.left_s() - reserve_s
        cost = self.costs[RerankerKind.PROMPTED if chain.instruction else RerankerKind.DEFAULT]
        if req.rerank is None and not cost.fits(len(candidates), left_s):
            return Reranked(degraded=DegradedReason.RERANK_OVER_BUDGET)
        request = RerankRequest(
            query=query,
            candidates=candidates,
            query_states=None if chain.instruction else query_states,
            instruction=chain.instruction,
        )
        return await self._ask(req, request, deadline, reserve_s, cost)

    def _candidates(
        self,
        req: SearchRequest,
        chain: Chain,
        found: Sequence[Candidate],
    ) -> tuple[RerankCandidate, ...]:
        depth = req.rerank_depth or chain.depth or self.settings.rerank_depth
        return tuple(RerankCandidate(id=c.uuid, text=passage(c)) for c in found[:depth])

    async def _ask(
        self,
        req: SearchRequest,
        request: RerankRequest,
        deadline: Deadline,
        reserve_s: float,
        cost: RerankCost,
    ) -> Reranked:
        timeout_s = deadline.cap(self.settings.rerank_timeout_s, reserve_s)
        candidates = request.candidates
        started = time.perf_counter()
        try:
            reply = await self.stage.ask(
                self.stage.topology.subject("kb.rerank", tenant=req.tenant),
                request.model_copy(update={"budget_ms": max(1, int(timeout_s * 1000))}),
                RerankReply,
                stage="reranker",
                timeout_s=timeout_s,
            )
        except (TransientError, PermanentError) as exc:
            waited_s = time.perf_counter() - started
            reason = _reason(exc)
            if reason is DegradedReason.RERANK_TIMEOUT:
                cost.observe(len(candidates), waited_s)
            if req.rerank or reason is None:
                raise
            log.warning("answering in first-stage order: %s", exc)
            return Reranked(degraded=reason, waited_s=waited_s)
        waited_s = time.perf_counter() - started
        cost.observe(len(candidates), waited_s)
        return Reranked(list(reply.scores), reply.model, waited_s=waited_s)


def _reason(exc: KbusError) -> DegradedReason | None:
    """Why the first stage's order stands (None: the request itself is wrong)."""
    if exc.code in (ErrorCode.RERANKER_TIMEOUT, ErrorCode.DEADLINE_EXCEEDED):
        return DegradedReason.RERANK_TIMEOUT
    if exc.code == ErrorCode.RERANK_MALFORMED:
        return DegradedReason.RERANK_MALFORMED
    if isinstance(exc, TransientError) or exc.code == ErrorCode.RERANK_UNCONFIGURED:
        return DegradedReason.RERANK_UNAVAILABLE
    return None


def passage(c: Candidate) -> str:
    """A candidate as the reranker reads it: title and headings, then the text."""
    p = c.properties
    return passage_text(p.get("title") or "", p.get("heading_path") or (), p.get("text") or "")
