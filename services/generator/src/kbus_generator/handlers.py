"""Subscriptions of the generator: thin, the work is in :mod:`kbus_generator.generating`."""

from __future__ import annotations

from kbus_runtime.bus import BusMessage
from kbus_runtime.service import Service

from kbus_generator.generating import Generator
from kbus_generator.settings import GeneratorSettings


def register(service: Service, generator: Generator, settings: GeneratorSettings) -> None:
    """Consume ``chunks.generate``."""
    topology = service.topology

    @service.consume(
        topology.chunks_generate,
        topology.chunks_stream,
        topology.generator_durable,
        concurrency=settings.concurrency,
        title="generator:chunks.generate",
        description="Write each chunk's matching texts; publish the chunks on chunks.ready.",
    )
    async def on_chunks_generate(message: BusMessage) -> None:
        await generator.handle(message)
