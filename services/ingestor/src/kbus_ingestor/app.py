"""The ingestor: ``document.added`` in, ``chunks.ready`` out."""

from __future__ import annotations

from faststream.asgi import AsgiFastStream
from kbus_runtime.service import Service

from kbus_ingestor.chunking import ChunkingConfig
from kbus_ingestor.handlers import register
from kbus_ingestor.ingesting import Ingestor
from kbus_ingestor.settings import IngestorSettings


def create_app(settings: IngestorSettings | None = None) -> AsgiFastStream:
    """Build the ingestor app from settings (the environment when none are given)."""
    settings = settings or IngestorSettings()
    service = Service("ingestor", settings)
    ingestor = Ingestor(
        service.stage(),
        ChunkingConfig(size=settings.chunk_size, overlap=settings.chunk_overlap),
        max_document_bytes=settings.max_document_bytes,
        max_chunks=settings.max_chunks,
        registry=service.registry,
        keyword_window=settings.keyword_window,
        part_chunks=settings.part_chunks,
    )
    register(service, ingestor, settings)
    return service.app()
