"""A locked-down kbus: per-service NATS users and a Weaviate API key, on real servers.

The four services run with only the permissions the generated nats-server configuration grants
them, streams are created by the setup job's admin user, and Weaviate accepts only its key.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import nats
import pytest
import weaviate
from kbus_client import KbClient
from kbus_contract.topology import Topology
from kbus_dev.natsauth import generate_passwords, inbox, server_config
from kbus_dev.servers import Server, start_nats, start_weaviate
from kbus_dev.services import SERVICES, start_service, wait_healthy
from nats.aio.client import Client

TOPOLOGY = Topology()
WEAVIATE_KEY = "test-weaviate-key-7f1c0b2e"


@dataclass(frozen=True)
class Locked:
    nats_url: str
    passwords: dict[str, str]
    weaviate_http: int
    weaviate_grpc: int
    logs: Path


def _service_env(locked: Locked, user: str) -> dict[str, str]:
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
    }


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Locked]:
    root = tmp_path_factory.mktemp("locked")
    passwords = generate_passwords()
    servers: list[Server] = []
    try:
        nats_server = start_nats(root / "nats", extra_config=server_config(TOPOLOGY, passwords))
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
            env=_service_env(state, "admin"),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert setup.returncode == 0, setup.stderr
        services = [start_service(name, _service_env(state, name), state.logs) for name in SERVICES]
        servers.extend(services)
        wait_healthy(services)
        yield state
    finally:
        for server in reversed(servers):
            server.stop()


@pytest.fixture
async def violations() -> list[str]:
    return []


async def _connect(
    locked: Locked, user: str, errors: list[str], inbox_prefix: str | None = None
) -> Client:
    async def on_error(exc: Exception) -> None:
        errors.append(str(exc))

    return await nats.connect(
        locked.nats_url,
        user=user,
        password=locked.passwords[user],
        inbox_prefix=inbox_prefix or inbox(user),
        error_cb=on_error,
        max_reconnect_attempts=0,
    )


@pytest.fixture
async def client(locked: Locked) -> AsyncIterator[KbClient]:
    kb = await KbClient.connect(
        locked.nats_url,
        tenant="secure",
        user="client",
        password=locked.passwords["client"],
        inbox_prefix=inbox("client"),
    )
    async with kb:
        yield kb


async def test_the_pipeline_works_with_only_the_granted_permissions(client: KbClient) -> None:
    result = await client.publish_document(
        library="vault",
        document_id="policy",
        title="Key policy",
        text="Rotate the signing keys every ninety days and keep the old key for a week.",
        wait=True,
        timeout_s=120,
    )
    assert result.receipt is not None
    reply = await client.search("how often are keys rotated?", libraries=["vault"])
    assert reply.results[0].document_id == "policy"
    removed = await client.delete_document(library="vault", document_id="policy", wait=True)
    assert removed is not None
    assert removed.chunks_deleted == 1


async def test_a_claim_checked_document_needs_no_more_than_the_granted_permissions(
    client: KbClient,
) -> None:
    client.claim_check_bytes = 256  # every document goes through the object store
    result = await client.publish_document(
        library="vault",
        document_id="large",
        title="Retention",
        text="Audit logs are kept for seven years in the cold archive. " * 20,
        wait=True,
        timeout_s=120,
    )
    assert result.receipt is not None
    reply = await client.search("how long are audit logs kept?", libraries=["vault"])
    assert reply.results[0].document_id == "large"


async def _violation(errors: list[str]) -> str:
    for _ in range(50):
        if errors:
            return errors[-1]
        await asyncio.sleep(0.05)
    return ""


async def test_a_service_cannot_publish_or_subscribe_outside_its_stage(
    locked: Locked, violations: list[str]
) -> None:
    nc = await _connect(locked, "ingestor", violations)
    try:
        await nc.publish(TOPOLOGY.embeddings_ready, b"{}")
        await nc.flush()
        assert "permissions violation for publish" in (await _violation(violations)).lower()
        violations.clear()
        await nc.subscribe(TOPOLOGY.search)
        await nc.flush()
        assert "permissions violation for subscription" in (await _violation(violations)).lower()
        violations.clear()
        # Nor can it manage streams: creating one is refused.
        with pytest.raises(Exception):  # noqa: B017, PT011 - a timeout or a permission error
            await nc.jetstream(timeout=2).add_stream(name="ROGUE", subjects=["rogue.>"])
    finally:
        await nc.close()


async def test_a_client_cannot_read_another_clients_replies(
    locked: Locked, violations: list[str]
) -> None:
    nc = await _connect(locked, "client", violations)
    try:
        for others in (f"{inbox('searcher')}.>", "_INBOX.>", f"{inbox('embedder')}.>"):
            violations.clear()
            await nc.subscribe(others)
            await nc.flush()
            assert (
                "permissions violation for subscription" in (await _violation(violations)).lower()
            )
    finally:
        await nc.close()
    # A client that does not use its own inbox prefix gets no replies at all.
    violations.clear()
    wrong = await _connect(locked, "client", violations, inbox_prefix="_INBOX")
    try:
        with pytest.raises(Exception):  # noqa: B017, PT011 - subscription to its inbox is refused
            await wrong.request(TOPOLOGY.stats, b'{"tenant": "secure"}', timeout=2)
    finally:
        await wrong.close()


async def _list_collections(client: weaviate.WeaviateAsyncClient) -> None:
    await client.connect()
    await client.collections.list_all()


async def test_weaviate_refuses_a_wrong_key_and_no_key(locked: Locked) -> None:
    for key in ("not-the-key", None):
        auth = weaviate.classes.init.Auth.api_key(key) if key else None
        client = weaviate.use_async_with_local(
            port=locked.weaviate_http,
            grpc_port=locked.weaviate_grpc,
            auth_credentials=auth,
            skip_init_checks=True,
        )
        try:
            with pytest.raises(weaviate.exceptions.WeaviateBaseError):
                await _list_collections(client)
        finally:
            await client.close()
    good = weaviate.use_async_with_local(
        port=locked.weaviate_http,
        grpc_port=locked.weaviate_grpc,
        skip_init_checks=True,
        auth_credentials=weaviate.classes.init.Auth.api_key(WEAVIATE_KEY),
    )
    await good.connect()
    try:
        assert await good.alias.get(alias_name="Locked") is not None
    finally:
        await good.close()


def test_secrets_never_appear_in_logs(locked: Locked) -> None:
    logs = "".join(p.read_text(errors="replace") for p in locked.logs.glob("*.log"))
    assert logs, "the services wrote no logs"
    for secret in (*locked.passwords.values(), WEAVIATE_KEY):
        assert secret not in logs


def test_no_service_is_refused_what_it_does(locked: Locked) -> None:
    """Every subscription and publication of every service was granted (the server refuses
    the rest without failing the request that needed it: only the logs say)."""
    logs = sorted(locked.logs.glob("*.log"))
    assert {log.stem for log in logs} >= set(SERVICES)
    for log in logs:
        assert "permissions violation" not in log.read_text(errors="replace").lower(), log.name
