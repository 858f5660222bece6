"""Subscriptions and endpoints of the generator: thin, the work is in
:mod:`kbus_generator.generating`."""

from __future__ import annotations

from kbus_runtime.service import Service

from kbus_generator.generating import Generator
from kbus_generator.settings import GeneratorSettings


def register(service: Service, generator: Generator, settings: GeneratorSettings) -> None:
    """Consume ``chunks.generate``; serve ``kb.chat.generator`` as the NATS micro service
    ``kbus-generate``."""
    service.consume(
        "generator",
        generator.handle,
        concurrency=settings.concurrency,
        description="Write each chunk's matching texts; publish the chunks on chunks.ready.",
    )
    service.answer(
        {"kb.chat.generator": generator.state},
        description="kbus generator: whether its chat model answers",
        concurrency=1,
    )
