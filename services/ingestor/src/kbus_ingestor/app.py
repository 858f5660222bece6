"""The ingestor: ``document.added`` in, ``chunks.ready`` out."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from faststream.asgi import AsgiFastStream
from kbus_runtime.service import Service

from kbus_ingestor.chunking import ChunkingConfig
from kbus_ingestor.fetching import AddressPolicy, PageFetcher
from kbus_ingestor.handlers import register
from kbus_ingestor.ingesting import Ingestor
from kbus_ingestor.parsing import Limits
from kbus_ingestor.profiles import Profiles
from kbus_ingestor.sandbox import ParserPool
from kbus_ingestor.settings import IngestorSettings


def create_app(settings: IngestorSettings | None = None) -> AsgiFastStream:
    """Build the ingestor app from settings (the environment when none are given); the parser
    workers start in the lifespan, never at import."""
    settings = settings or IngestorSettings()
    service = Service("ingestor", settings)
    parser = ParserPool(
        settings.parse_workers,
        settings.parse_timeout_s,
        settings.parse_memory_bytes,
        Limits(settings.max_unpacked_bytes, settings.max_records),
    )
    fetcher = PageFetcher(
        AddressPolicy(tuple(settings.fetch_allow)),
        max_bytes=settings.bus.max_document_bytes,
        max_redirects=settings.fetch_max_redirects,
        timeout_s=settings.fetch_timeout_s,
        user_agent=settings.user_agent,
    )
    profiles = Profiles(
        service.stage("profiles"),
        service.topology.profiles_kv,
        ChunkingConfig(size=settings.chunk_size, overlap=settings.chunk_overlap),
    )
    ingestor = Ingestor(
        service.stage(),
        profiles,
        max_document_bytes=settings.bus.max_document_bytes,
        max_chunks=settings.max_chunks,
        registry=service.registry,
        parser=parser,
        fetcher=fetcher,
        keyword_window=settings.keyword_window,
        part_chunks=settings.part_chunks,
    )
    register(service, ingestor, profiles, settings)

    @asynccontextmanager
    async def start_up() -> AsyncIterator[None]:
        js = service.broker.connection.jetstream()
        await profiles.open(js, create=service.topology.declare)
        await service.withdrawals.open(service.broker.connection)
        await parser.warm()
        try:
            yield
        finally:
            parser.close()

    return service.app(start_up)
