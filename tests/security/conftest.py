"""A locked-down kbus on real servers: per-service NATS users, tenants' credentials, and a
Weaviate API key.

The four services run with only the permissions the generated nats-server configuration grants
them, streams are created by the setup job's admin user, and Weaviate accepts only its key.
Five tenants each hold four credentials: every library (read and write), one library (read and
write), every library read-only, and one library read-only. Tenant t4 may search twice a second.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import nats
import pytest
from kbus_client import KbClient
from kbus_contract.topology import Topology
from kbus_dev.natsauth import Credential, generate_passwords, inbox, server_config
from kbus_dev.servers import Server, start_nats, start_weaviate
from kbus_dev.services import SERVICES, start_service, wait_healthy
from nats.aio.client import Client

TOPOLOGY = Topology()
WEAVIATE_KEY = "test-weaviate-key-7f1c0b2e"
TENANTS = [f"t{i}" for i in range(5)]
LIBRARIES = ["lib-a", "lib-b"]
#: The tenant whose searches are limited, and its rate.
LIMITED, RATE = "t4", 2
CREDENTIALS = [
    credential
    for tenant in TENANTS
    for credential in (
        Credential(f"{tenant}-all", tenant),
        Credential(f"{tenant}-a", tenant, ("lib-a",)),
        Credential(f"{tenant}-ro", tenant, write=False),
        Credential(f"{tenant}-ro-b", tenant, ("lib-b",), write=False),
    )
]


@dataclass(frozen=True)
class Locked:
    nats_url: str
    passwords: dict[str, str]
    weaviate_http: int
    weaviate_grpc: int
    logs: Path


def service_env(locked: Locked, user: str) -> dict[str, str]:
    return {
        **os.environ,
        "KBUS_NATS_URL": locked.nats_url,
        "KBUS_NATS_USER": user,
        "KBUS_NATS_PASSWORD": locked.passwords[user],
        "KBUS_INBOX_PREFIX": inbox(user),
        "KBUS_DECLARE_STREAMS": "false",
        "KBUS_STREAM_MAX_BYTES": str(64 * 1024**2),
        "KBUS_WEAVIATE_HTTP_PORT": str(locked.weaviate_http),
        "KBUS_WEAVIATE_GRPC_PORT": str(locked.weaviate_grpc),
        "KBUS_WEAVIATE_API_KEY": WEAVIATE_KEY,
        "KBUS_WEAVIATE_COLLECTION": "Locked",
        "KBUS_SEARCHER_TENANT_LIMITS": json.dumps({LIMITED: {"searches_per_second": RATE}}),
    }


@pytest.fixture(scope="session")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Locked]:
    root = tmp_path_factory.mktemp("locked")
    passwords = generate_passwords(CREDENTIALS)
    servers: list[Server] = []
    try:
        auth = server_config(TOPOLOGY, passwords, CREDENTIALS)
        nats_server = start_nats(root / "nats", extra_config=auth)
        servers.append(nats_server)
        weaviate_server = start_weaviate(root / "weaviate", api_key=WEAVIATE_KEY)
        servers.append(weaviate_server)
        state = Locked(
            f"nats://127.0.0.1:{nats_server.ports['client']}",
            passwords,
            weaviate_server.ports["http"],
            weaviate_server.ports["grpc"],
            root / "logs",
        )
        setup = subprocess.run(
            [sys.executable, "-m", "kbus_searcher.setup"],
            env=service_env(state, "admin"),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert setup.returncode == 0, setup.stderr
        services = [start_service(name, service_env(state, name), state.logs) for name in SERVICES]
        servers.extend(services)
        wait_healthy(services)
        yield state
    finally:
        for server in reversed(servers):
            server.stop()


def credential(name: str) -> Credential:
    [found] = [c for c in CREDENTIALS if c.name == name]
    return found


async def connect(
    locked: Locked, user: str, errors: list[str] | None = None, inbox_prefix: str | None = None
) -> Client:
    """A plain connection as ``user``; permission errors the server reports go to ``errors``."""

    async def on_error(exc: Exception) -> None:
        if errors is not None:
            errors.append(str(exc))

    return await nats.connect(
        locked.nats_url,
        user=user,
        password=locked.passwords[user],
        inbox_prefix=inbox_prefix or inbox(user),
        error_cb=on_error,
        max_reconnect_attempts=0,
    )


async def client_for(locked: Locked, name: str) -> KbClient:
    """A KbClient holding the named credential."""
    held = credential(name)
    return await KbClient.connect(
        locked.nats_url,
        tenant=held.tenant,
        granted=held.libraries,
        user=name,
        password=locked.passwords[name],
        inbox_prefix=inbox(name),
    )


@pytest.fixture
async def client(locked: Locked) -> AsyncIterator[KbClient]:
    kb = await client_for(locked, "t0-all")
    async with kb:
        yield kb
