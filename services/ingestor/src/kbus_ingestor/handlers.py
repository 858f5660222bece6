"""Subscriptions of the ingestor: thin, everything happens in :mod:`kbus_ingestor.ingesting`."""

from __future__ import annotations

from kbus_runtime.service import Service

from kbus_ingestor.ingesting import Ingestor
from kbus_ingestor.profiles import Profiles
from kbus_ingestor.settings import IngestorSettings


def register(
    service: Service, ingestor: Ingestor, profiles: Profiles, settings: IngestorSettings
) -> None:
    """Consume ``document.added`` through the shared durable pull consumer; answer
    ``kb.profile`` and ``kb.readprofile``."""
    service.answer(
        {"kb.profile": profiles.answer, "kb.readprofile": profiles.answer_read},
        description="kbus library profiles: read and set how a library's documents are cut",
        concurrency=4,
    )

    service.consume(
        "ingestor",
        ingestor.handle,
        concurrency=settings.concurrency,
        description="Validate and chunk a document; publish its chunks on chunks.ready.",
    )
