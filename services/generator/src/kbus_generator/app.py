"""The generator: ``chunks.generate`` in, ``chunks.ready`` out (a stage of the pipeline)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from faststream.asgi import AsgiFastStream
from kbus_runtime.chat import create_chat
from kbus_runtime.service import Service

from kbus_generator.generating import GeneratedCache, Generator
from kbus_generator.handlers import register
from kbus_generator.settings import GeneratorSettings

log = logging.getLogger("kbus.generator")


def create_app(settings: GeneratorSettings | None = None) -> AsgiFastStream:
    """Build the generator app; it connects to the bus in the lifespan, never at import, and
    calls the chat model only when a library's chunks ask for it."""
    settings = settings or GeneratorSettings()
    service = Service("generator", settings)
    chat = create_chat(settings.backend, settings.llm, settings.cohere, "the generator")
    cache = GeneratedCache(service.topology.generated_kv) if settings.cache else None
    generator = Generator(
        service.stage(), chat, service.registry, cache, settings.calls, settings.bus.tenant_weights
    )
    register(service, generator, settings)

    @asynccontextmanager
    async def start_up() -> AsyncIterator[None]:
        if cache is not None:
            await cache.open(service.broker.connection, create=service.topology.declare)
        await service.withdrawals.open(service.broker.connection)
        log.info("writing matching texts with %s", chat.name)
        yield

    return service.app(start_up)
