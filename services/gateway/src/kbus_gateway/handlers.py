"""Endpoints of the gateway: thin; the work is in :mod:`kbus_gateway.gate`."""

from __future__ import annotations

from kbus_runtime.service import Service

from kbus_gateway.gate import Gate
from kbus_gateway.settings import GatewaySettings


def register(service: Service, gate: Gate, settings: GatewaySettings) -> None:
    """Serve what tenants send into the streams as the NATS micro service ``kbus-gate``."""
    service.answer(
        gate.answers(),
        description="kbus gate: documents, deletions, syncs and large texts into the streams",
        concurrency=settings.concurrency,
    )
