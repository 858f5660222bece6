"""One NATS, one Weaviate and every service, started for one bench run and stopped after it."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kbus_dev.servers import Server, ensure_installed, start_nats, start_weaviate
from kbus_dev.services import service_env, start_all, start_deployed


@dataclass(frozen=True)
class BenchStack:
    """Where a bench's client connects: the NATS address and the run's bus prefix."""

    nats_url: str
    prefix: str
    #: The services by name (their processes: memory, CPU, /metrics).
    services: dict[str, Server] = field(default_factory=dict)
    #: NATS and Weaviate, as ``nats`` and ``weaviate``.
    servers: dict[str, Server] = field(default_factory=dict)


@contextlib.contextmanager
def bench_stack(
    name: str, settings: dict[str, str] | None = None, *, deployed: bool = False
) -> Iterator[BenchStack]:
    """The servers and services on their own prefix and collection (``settings``: the
    services' environment besides), in a temporary folder removed at the end; ``deployed``:
    each stage as a deployment runs it (the indexer apart from the query searcher,
    deploy/k8s), else one process per service."""
    ensure_installed()
    root = Path(tempfile.mkdtemp(prefix=f"kbus-{name}-"))
    nats_server, weaviate_server = start_nats(root / "nats"), start_weaviate(root / "weaviate")
    url = f"nats://127.0.0.1:{nats_server.ports['client']}"
    tag = f"{name[:3]}{uuid.uuid4().hex[:6]}"
    env = service_env(
        url,
        weaviate_server.ports["http"],
        weaviate_server.ports["grpc"],
        prefix=tag,
        collection=f"Bench{tag.capitalize()}",
        extra=settings or {},
    )
    services = start_deployed(env, root / "logs") if deployed else start_all(env, root / "logs")
    try:
        yield BenchStack(
            url,
            tag,
            {service.name: service for service in services},
            {"nats": nats_server, "weaviate": weaviate_server},
        )
    finally:
        for service in services:
            service.stop()
        nats_server.stop()
        weaviate_server.stop()
        shutil.rmtree(root, ignore_errors=True)
