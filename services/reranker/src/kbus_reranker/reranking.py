"""Answering ``kb.rerank``: score candidates, optionally blended with their first-stage score."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from faststream.nats.message import NatsMessage
from kbus_shared.consuming import Stage
from kbus_shared.contracts import ErrorReply, RerankReply, RerankRequest
from kbus_shared.errors import PermanentError, TransientError
from prometheus_client import CollectorRegistry, Histogram

from kbus_reranker.scoring import Scorer, score_async


class Reranker:
    """Scores (query, candidates) with the configured scorer."""

    def __init__(
        self,
        stage: Stage,
        load: Callable[[], Scorer],
        *,
        prior_weight: float,
        max_candidates: int,
        registry: CollectorRegistry,
    ) -> None:
        self.stage = stage
        self._load = load
        self._scorer: Scorer | None = None
        self._lock = asyncio.Lock()
        self.prior_weight = prior_weight
        self.max_candidates = max_candidates
        self.seconds = Histogram("kbus_rerank_seconds", "Time to rerank one request",
                                 registry=registry)

    def load(self) -> Scorer:
        """Load the scorer's model (in the app's lifespan)."""
        self._scorer = self._load()
        return self._scorer

    @property
    def scorer(self) -> Scorer:
        if self._scorer is None:
            raise TransientError("the reranker model is not loaded yet", code="not_ready")
        return self._scorer

    @property
    def model_name(self) -> str:
        name = self.scorer.name
        return f"{name}+prior({self.prior_weight:g})" if self.prior_weight else name

    async def handle(self, message: NatsMessage) -> RerankReply | ErrorReply:
        """Answer one ``kb.rerank`` request."""
        return await self.stage.answer(message, RerankRequest, self.rerank)

    async def rerank(self, request: RerankRequest) -> RerankReply:
        """Scores in the request's order."""
        if len(request.candidates) > self.max_candidates:
            raise PermanentError(
                f"{len(request.candidates)} candidates; the limit is {self.max_candidates}",
                code="too_many_candidates",
            )
        if not request.candidates:
            return RerankReply(model=self.model_name, scores=())
        started = time.perf_counter()
        scores = await score_async(self.scorer, self._lock, request.query,
                                   [c.text for c in request.candidates])
        self.seconds.observe(time.perf_counter() - started)
        blended = [
            (1 - self.prior_weight) * float(s) + self.prior_weight * (c.prior or 0.0)
            for s, c in zip(scores, request.candidates, strict=True)
        ]
        return RerankReply(model=self.model_name, scores=tuple(blended))
