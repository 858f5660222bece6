"""The reranker: ``kb.rerank`` request-reply (a NATS micro service)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from faststream.asgi import AsgiFastStream
from kbus_runtime.service import Service
from kbus_runtime.token_states import TokenStateStore

from kbus_reranker.handlers import register
from kbus_reranker.prompting import create_prompted
from kbus_reranker.reranking import Reranker
from kbus_reranker.scoring import create_scorer
from kbus_reranker.settings import RerankerSettings

log = logging.getLogger("kbus.reranker")


def create_app(settings: RerankerSettings | None = None) -> AsgiFastStream:
    """Build the reranker app; the model loads in the lifespan, never at import."""
    settings = settings or RerankerSettings()
    service = Service("reranker", settings)
    reranker = Reranker(
        service.stage(),
        lambda: create_scorer(settings),
        max_candidates=settings.max_candidates,
        registry=service.registry,
        tokens=TokenStateStore(service.topology.token_states_kv) if settings.token_states else None,
        query_states=settings.query_states,
        prompted=create_prompted(
            settings.prompted,
            settings.llm,
            settings.cohere,
            settings.prompted_concurrency,
            settings.prompted_passage_chars,
        ),
    )
    register(service, reranker, settings)

    @asynccontextmanager
    async def start_up() -> AsyncIterator[None]:
        reranker.load()
        log.info("reranking with %s", reranker.model_name)
        yield

    # It consumes no stream: nothing to declare.
    return service.app(start_up, declare=False)
