"""A locked-down kbus on real servers: per-service NATS users, tenants' credentials, and a
Weaviate API key.

The four services run with only the permissions the generated nats-server configuration grants
them, streams are created by the setup job's admin user, and Weaviate accepts only its key.
Five tenants each hold four credentials: every library (read and write), one library (read and
write), every library read-only, and one library read-only; t0 also holds two read-only ones
that may act for people (ten groups; anyone). Tenant t4 may search twice a second.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
import pytest
from kbus_client import KbClient
from kbus_contract import DocumentAdded
from kbus_contract.topology import Topology
from kbus_dev.natsauth import KBUS_ACCOUNT, Credential, accounts, generate_passwords, inbox
from kbus_dev.servers import Server, start_nats, start_weaviate
from kbus_dev.services import SERVICES, start_service, wait_healthy
from nats.aio.client import Client
from nats.aio.msg import Msg

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
#: Whom a search may claim to act for (tests/security/test_access.py): a support bot bound to
#: ten of the hundred groups, and an operator's tool that may act for anyone.
GROUPS = [f"g{i:02d}" for i in range(100)]
BOT_GROUPS = tuple(GROUPS[:10])
CREDENTIALS += [
    Credential("t0-bot", "t0", write=False, acts_for=BOT_GROUPS),
    Credential("t0-ops", "t0", write=False, acts_for=None),
]


#: A test-only user of kbus's account that listens to every subject there: it sees what an
#: attack makes land (no installation has it).
OBSERVER = "observer"


@dataclass(frozen=True)
class Locked:
    nats_url: str
    passwords: dict[str, str]
    weaviate_http: int
    weaviate_grpc: int
    logs: Path
    #: The server's accounts file (included by its configuration) and the server itself.
    auth: Path
    nats: Server


def auth_config(passwords: dict[str, str], credentials: list[Credential]) -> str:
    """The accounts block for these credentials, with the observer in kbus's account."""
    block = accounts(TOPOLOGY, passwords, credentials)
    block[KBUS_ACCOUNT]["users"].append(
        {
            "user": OBSERVER,
            "password": passwords[OBSERVER],
            "permissions": {
                "publish": {"allow": ["$JS.API.>", f"{inbox(OBSERVER)}.>"]},
                "subscribe": {"allow": [">"]},
            },
        }
    )
    return "accounts: " + json.dumps(block, indent=2) + "\n"


def service_env(locked: Locked, user: str) -> dict[str, str]:
    return {
        **os.environ,
        "KBUS_NATS_URL": locked.nats_url,
        "KBUS_NATS_USER": user,
        "KBUS_NATS_PASSWORD": locked.passwords[user],
        "KBUS_INBOX_PREFIX": inbox(user),
        "KBUS_DECLARE_STREAMS": "false",
        "KBUS_STREAM_MAX_BYTES": str(64 * 1024**2),
        "KBUS_WEAVIATE_HOSTS": f"127.0.0.1:{locked.weaviate_http}:{locked.weaviate_grpc}",
        "KBUS_WEAVIATE_API_KEY": WEAVIATE_KEY,
        "KBUS_WEAVIATE_COLLECTION": "Locked",
        "KBUS_TENANT_BUDGETS": json.dumps({LIMITED: {"searches_per_second": RATE}}),
    }


@pytest.fixture(scope="session")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Locked]:
    root = tmp_path_factory.mktemp("locked")
    passwords = {**generate_passwords(CREDENTIALS), OBSERVER: "observer-password-1c9e"}
    servers: list[Server] = []
    try:
        auth = root / "nats" / "auth.conf"
        auth.parent.mkdir(parents=True)
        auth.write_text(auth_config(passwords, CREDENTIALS))
        nats_server = start_nats(root / "nats", extra_config=f'include "{auth.name}"\n')
        servers.append(nats_server)
        weaviate_server = start_weaviate(root / "weaviate", api_key=WEAVIATE_KEY)
        servers.append(weaviate_server)
        state = Locked(
            f"nats://127.0.0.1:{nats_server.ports['client']}",
            passwords,
            weaviate_server.ports["http"],
            weaviate_server.ports["grpc"],
            root / "logs",
            auth,
            nats_server,
        )
        setup = subprocess.run(
            [sys.executable, "-m", "kbus_searcher.jobs.setup"],
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
        acts_for=held.acts_for,
        user=name,
        password=locked.passwords[name],
        inbox_prefix=inbox(name),
    )


@pytest.fixture
async def client(locked: Locked) -> AsyncIterator[KbClient]:
    kb = await client_for(locked, "t0-all")
    async with kb:
        yield kb


# -- what the attack suites share -----------------------------------------------------------

#: The tenant attacked, the library holding its secret, and the word only it holds.
VICTIM, LIBRARY = "t2", "lib-a"
WORD = "victimsecretword"


@pytest.fixture(scope="session")
async def victim(locked: Locked) -> AsyncIterator[KbClient]:
    """Tenant t2 holds a document only it may read."""
    kb = await client_for(locked, f"{VICTIM}-all")
    await kb.publish_document(
        library=LIBRARY,
        document_id="victim-doc",
        title="Payroll",
        text=f"The {WORD} opens the payroll vault.",
        wait=True,
        timeout_s=120,
    )
    yield kb
    await kb.close()


class Observer:
    """Hears every subject of kbus's account and reads its streams' state."""

    def __init__(self, nc: Client) -> None:
        self.nc = nc
        self.heard: list[tuple[str, bytes]] = []

    @classmethod
    async def open(cls, locked: Locked) -> Observer:
        observer = cls(await connect(locked, OBSERVER))
        await observer.nc.subscribe(">", cb=observer._on)
        await observer.nc.flush()
        return observer

    async def _on(self, msg: Msg) -> None:
        self.heard.append((msg.subject, msg.data))

    def landed(self, *patterns: str) -> list[str]:
        """Subjects heard that match any of these (NATS wildcards)."""
        return [s for s, _ in self.heard_on(*patterns)]

    def heard_on(self, *patterns: str) -> list[tuple[str, bytes]]:
        """Messages heard on subjects that match any of these (NATS wildcards)."""
        return [(s, d) for s, d in self.heard if any(_matches(s, p) for p in patterns)]

    async def stream(self, name: str) -> dict[str, Any] | None:
        reply = await self.nc.request(f"$JS.API.STREAM.INFO.{name}", b"", timeout=5)
        info: dict[str, Any] = json.loads(reply.data)
        return None if "error" in info else info

    async def stream_subjects(self, name: str, subjects: str) -> dict[str, int]:
        """Messages per subject a stream holds of those matching ``subjects``."""
        request = json.dumps({"subjects_filter": subjects}).encode()
        reply = await self.nc.request(f"$JS.API.STREAM.INFO.{name}", request, timeout=5)
        found: dict[str, int] = json.loads(reply.data).get("state", {}).get("subjects") or {}
        return found

    async def consumers(self, stream: str) -> list[dict[str, Any]]:
        reply = await self.nc.request(f"$JS.API.CONSUMER.LIST.{stream}", b"{}", timeout=5)
        found: list[dict[str, Any]] = json.loads(reply.data).get("consumers") or []
        return found

    async def close(self) -> None:
        await self.nc.close()


@pytest.fixture
async def observer(locked: Locked) -> AsyncIterator[Observer]:
    watching = await Observer.open(locked)
    yield watching
    await watching.close()


def _matches(subject: str, pattern: str) -> bool:
    tokens, wanted = subject.split("."), pattern.split(".")
    for index, want in enumerate(wanted):
        if want == ">":
            return len(tokens) > index
        if index >= len(tokens) or want not in ("*", tokens[index]):
            return False
    return len(tokens) == len(wanted)


#: Every subject of the victim's: documents, deletions and syncs (as sent to the gate and as
#: stored), its large texts, receipts, dead letters.
VICTIMS = [
    f"{stored}document.{kind}.{VICTIM}.>"
    for kind in ("added", "deleted", "synced", "body")
    for stored in ("", "accepted.")
] + [
    TOPOLOGY.deleted(VICTIM),
    TOPOLOGY.accepted(TOPOLOGY.deleted(VICTIM)),
    f"deadletter.*.{VICTIM}.>",
]


async def attempt(nc: Client, subject: str, body: Any = b"", reply: str = "") -> str:
    """Send ``body`` as the attacker: the answer, or how it was refused."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    if reply:
        await nc.publish(subject, data, reply=reply)
        await nc.flush()
        return "sent"
    try:
        answer = await nc.request(subject, data, timeout=1.5)
    except Exception as exc:  # no responders, a timeout: nothing answered
        return f"refused: {type(exc).__name__}"
    return answer.data.decode(errors="replace")


def granted(answer: str) -> bool:
    """Whether the JetStream API (or a service) answered without an error."""
    if answer.startswith(("refused", "sent")):
        return False
    try:
        return "error" not in json.loads(answer)
    except ValueError:
        return True


async def still_readable(victim: KbClient) -> bool:
    reply = await victim.search(WORD, libraries=[LIBRARY], search_type="keyword")
    return [h.document_id for h in reply.results] == ["victim-doc"]


async def victim_publishes(victim: KbClient, doc: DocumentAdded) -> None:
    """The victim publishes ``doc`` (the very document an attacker squatted on) and it is
    indexed: not dropped as a duplicate."""
    result = await victim.publish_document(
        library=doc.library,
        document_id=doc.document_id,
        title=doc.title,
        text=doc.text,
        wait=True,
        timeout_s=60,
    )
    assert not result.duplicate
    assert result.receipt is not None


async def victim_finds(victim: KbClient, word: str) -> list[str]:
    reply = await victim.search(word, libraries=[LIBRARY], search_type="keyword")
    return [h.document_id for h in reply.results]
