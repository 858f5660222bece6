"""Answering ``kb.rerank``: score candidates, optionally blended with their first-stage score."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from contextlib import nullcontext
from functools import partial

import numpy as np
from kbus_contract import (
    ErrorReply,
    QueryStates,
    RerankReply,
    RerankRequest,
)
from kbus_contract.errors import ErrorCode, PermanentError, TransientError
from kbus_runtime.answering import Inbound
from kbus_runtime.background import Background
from kbus_runtime.deadlines import Deadline
from kbus_runtime.stage import Stage
from kbus_runtime.token_states import TokenStateStore, unpack
from prometheus_client import CollectorRegistry, Counter, Histogram

from kbus_reranker.prompting import PromptedScorer
from kbus_reranker.scoring import MaxSimScorer, Scorer, score_async

#: Query tokens times candidates past which a request's scoring is costly (an ordinary search:
#: 5 candidates of a query of about 12 tokens).
COSTLY_PRODUCTS = 64 * 10


class Reranker:
    """Scores (query, candidates) with the configured scorer."""

    def __init__(
        self,
        stage: Stage,
        load: Callable[[], Scorer],
        *,
        max_candidates: int,
        registry: CollectorRegistry,
        tokens: TokenStateStore | None = None,
        query_states: bool = True,
        prompted: PromptedScorer | None = None,
    ) -> None:
        self.stage = stage
        self._load = load
        self.prompted = prompted
        self.tokens = tokens
        self.query_states = query_states
        self._scorer: Scorer | None = None
        self._lock = asyncio.Lock()
        self.max_candidates = max_candidates
        #: Where a costly request's scoring runs (kbus_runtime.background).
        self.background = Background(name="rerank-costly")
        self.seconds = Histogram(
            "kbus_rerank_seconds", "Time to rerank one request", registry=registry
        )
        self.passages = Counter(
            "kbus_rerank_passages",
            "Passages scored (stored: from the token states the embedder kept; encoded: read "
            "by the scorer's model)",
            ["states"],
            registry=registry,
        )
        self.queries = Counter(
            "kbus_rerank_queries",
            "Queries MaxSim scored (sent: with the token states the embedder sent; encoded: read "
            "by the scorer's model)",
            ["states"],
            registry=registry,
        )

    def load(self) -> Scorer:
        """Load the scorer's model (in the app's lifespan)."""
        self._scorer = self._load()
        return self._scorer

    @property
    def scorer(self) -> Scorer:
        if self._scorer is None:
            raise TransientError("the reranker model is not loaded yet", code=ErrorCode.NOT_READY)
        return self._scorer

    @property
    def model_name(self) -> str:
        return self.scorer.name

    async def answer(self, inbound: Inbound) -> RerankReply | ErrorReply:
        """Answer one ``kb.rerank`` request."""
        return await self.stage.answer(
            inbound.body,
            RerankRequest,
            lambda request: self.rerank(request, inbound.deadline(request.budget_ms)),
        )

    async def rerank(self, request: RerankRequest, deadline: Deadline | None = None) -> RerankReply:
        """The scorer's own scores, in the request's order (none once ``deadline`` has passed);
        the searcher blends them with the first stage's."""
        if len(request.candidates) > self.max_candidates:
            raise PermanentError(
                f"{len(request.candidates)} candidates; the limit is {self.max_candidates}",
                code=ErrorCode.TOO_MANY_CANDIDATES,
            )
        if not request.candidates:
            return RerankReply(model=self.model_name, scores=())
        started = time.perf_counter()
        passages = [c.text for c in request.candidates]
        if request.instruction is not None:
            scorer = self._prompted()
            async with deadline.bound("prompted reranking") if deadline else nullcontext():
                scores = await scorer.score(request.instruction, request.query, passages)
            name = scorer.name
        else:
            scores = await self._score(request.query, passages, deadline, request.query_states)
            name = self.scorer.name
        self.seconds.observe(time.perf_counter() - started)
        return RerankReply(model=name, scores=tuple(float(s) for s in scores))

    def _prompted(self) -> PromptedScorer:
        if self.prompted is None:
            raise PermanentError(
                "this reranker has no chat model for prompted reranking (set "
                "KBUS_RERANKER_PROMPTED to openai or cohere)",
                code=ErrorCode.RERANK_UNCONFIGURED,
            )
        return self.prompted

    async def _score(
        self,
        query: str,
        passages: list[str],
        deadline: Deadline | None,
        query_states: QueryStates | None = None,
    ) -> np.ndarray:
        """The scorer's scores; MaxSim with the token states the embedder kept or sent, where it
        did: with every state at hand, no encoder runs."""
        scorer = self.scorer
        if not (isinstance(scorer, MaxSimScorer) and self.tokens is not None):
            self.passages.labels("encoded").inc(len(passages))
            return await score_async(
                scorer, self._lock, partial(scorer.score, query, passages), deadline
            )
        await self.tokens.reopen(self.stage.broker.connection)
        states = await self.tokens.get_many(scorer.model, passages, scorer.dimension)
        stored = sum(s is not None for s in states)
        self.passages.labels("stored").inc(stored)
        self.passages.labels("encoded").inc(len(passages) - stored)
        query_tokens = self._query_tokens(scorer, query_states)
        kept = [s for s in states if s is not None]
        if query_tokens is not None and len(kept) == len(passages):
            if len(query_tokens) * len(kept) <= COSTLY_PRODUCTS:
                return scorer.maxsim(query_tokens, kept)
            # A long query against many candidates: at a lower priority, so that another
            # request's few products go first (numpy lets go of the interpreter meanwhile).
            return await self.background.run(scorer.maxsim, query_tokens, kept)
        call = partial(scorer.score_states, query, passages, states, query_tokens)
        return await score_async(scorer, self._lock, call, deadline, alone=stored < len(passages))

    def _query_tokens(
        self, scorer: MaxSimScorer, query_states: QueryStates | None
    ) -> np.ndarray | None:
        """The query's token states as sent, if the embedder ran the scorer's model."""
        if not self.query_states or query_states is None or query_states.model != scorer.model:
            self.queries.labels("encoded").inc()
            return None
        tokens = unpack(query_states.states, scorer.dimension)
        self.queries.labels("encoded" if tokens is None else "sent").inc()
        return tokens
