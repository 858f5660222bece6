"""The ingestor: ``document.added`` in, ``chunks.ready`` out."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from faststream.asgi import AsgiFastStream
from kbus_shared.bus import connect_and_declare, make_app, make_broker
from kbus_shared.claimcheck import open_bodies
from kbus_shared.consuming import Stage, StageMetrics
from kbus_shared.logs import configure_logging
from prometheus_client import CollectorRegistry

from kbus_ingestor.chunking import ChunkingConfig
from kbus_ingestor.handlers import register
from kbus_ingestor.ingesting import Ingestor
from kbus_ingestor.settings import IngestorSettings


def create_app(settings: IngestorSettings | None = None) -> AsgiFastStream:
    """Build the ingestor app from settings (the environment when none are given)."""
    settings = settings or IngestorSettings()
    configure_logging(settings.log_level)
    registry = CollectorRegistry()
    broker = make_broker(settings.bus, registry, app_name="ingestor", log_level=settings.log_level)
    topology = settings.bus.topology
    stage = Stage("ingestor", broker, topology, StageMetrics.create(registry))
    ingestor = Ingestor(
        stage,
        ChunkingConfig(size=settings.chunk_size, overlap=settings.chunk_overlap),
        max_document_bytes=settings.max_document_bytes,
        max_chunks=settings.max_chunks,
        registry=registry,
        keyword_window=settings.keyword_window,
        part_chunks=settings.part_chunks,
    )
    register(broker, topology, ingestor)

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        await connect_and_declare(broker, topology)
        ingestor.bodies = await open_bodies(
            broker.connection.jetstream(), topology, create=topology.declare
        )
        yield

    return make_app(broker, registry, lifespan)
