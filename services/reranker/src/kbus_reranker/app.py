"""The reranker: ``kb.rerank`` request-reply (a NATS micro service)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version

from faststream.asgi import AsgiFastStream
from kbus_shared.answering import Served
from kbus_shared.bus import make_app, make_broker
from kbus_shared.consuming import Stage, StageMetrics
from kbus_shared.logs import configure_logging
from prometheus_client import CollectorRegistry

from kbus_reranker.handlers import register_rerank_service
from kbus_reranker.reranking import Reranker
from kbus_reranker.scoring import create_scorer
from kbus_reranker.settings import RerankerSettings

log = logging.getLogger("kbus.reranker")


def create_app(settings: RerankerSettings | None = None) -> AsgiFastStream:
    """Build the reranker app; the model loads in the lifespan, never at import."""
    settings = settings or RerankerSettings()
    configure_logging(settings.log_level)
    registry = CollectorRegistry()
    broker = make_broker(settings.bus, registry, app_name="reranker", log_level=settings.log_level)
    topology = settings.bus.topology
    stage = Stage("reranker", broker, topology, StageMetrics.create(registry))
    reranker = Reranker(
        stage,
        lambda: create_scorer(settings),
        prior_weight=settings.prior_weight,
        max_candidates=settings.max_candidates,
        registry=registry,
    )
    services: list[Served] = []

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        reranker.load()
        log.info("reranking with %s", reranker.model_name)
        await broker.connect()
        services.append(
            await register_rerank_service(
                broker.connection,
                topology,
                reranker,
                version("kbus-reranker"),
                settings.request_concurrency,
            )
        )
        yield

    return make_app(broker, registry, lifespan, served=services)
