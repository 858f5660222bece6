"""The gateway: the one way a tenant's messages enter kbus's streams (a NATS micro service)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from faststream.asgi import AsgiFastStream
from kbus_runtime.service import Service
from kbus_runtime.usage import Usage
from nats.js import JetStreamContext

from kbus_gateway.admission import Admission
from kbus_gateway.gate import Gate
from kbus_gateway.handlers import register
from kbus_gateway.replays import Replays
from kbus_gateway.settings import GatewaySettings


def create_app(settings: GatewaySettings | None = None) -> AsgiFastStream:
    """Build the gateway app; it declares the streams it stores into."""
    settings = settings or GatewaySettings()
    service = Service("gateway", settings)
    stage = service.stage()

    def js() -> JetStreamContext:
        return service.broker.connection.jetstream()

    usage = Usage(js)
    admission = Admission(
        service.topology, service.budgets, usage, js, settings.bus.max_document_bytes
    )
    gate = Gate(stage, admission, Replays(service.topology, js), settings.store_bound_s)
    register(service, gate, settings)

    @asynccontextmanager
    async def start_up() -> AsyncIterator[None]:
        await service.withdrawals.open(service.broker.connection, reading=False)
        yield

    return service.app(start_up)
