"""A locked-down kbus on real servers (:mod:`kbus_dev.locked`): per-service NATS users,
tenants' accounts and credentials, and a Weaviate API key.

The services run with only the permissions their credentials grant them, streams are created by
the setup job's admin user, and Weaviate accepts only its key.
Six tenants each hold four credentials: every library (read and write), one library (read and
write), every library read-only, and one library read-only; t0 also holds two read-only ones
that may act for people (ten groups; anyone). Tenant t4 may search twice a second; t5 is the
flooder, the one tenant the tests drive past its budgets.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from kbus_client import CredentialFile, KbClient
from kbus_contract import DocumentAdded
from kbus_contract.topology import Topology
from kbus_dev.locked import WEAVIATE_KEY as WEAVIATE_KEY
from kbus_dev.locked import Locked as Locked
from kbus_dev.locked import start_locked
from kbus_dev.natsauth import KBUS_ACCOUNT, Credential, Keys, Permissions, inbox, user_creds
from kbus_dev.services import start_service, wait_healthy
from nats.aio.client import Client, RawCredentials
from nats.aio.msg import Msg

TOPOLOGY = Topology()
TENANTS = [f"t{i}" for i in range(6)]
LIBRARIES = ["lib-a", "lib-b"]
#: The tenant whose searches are limited, and its rate.
LIMITED, RATE = "t4", 2
#: The tenant floods drive past its budgets (its documents and syncs stay waiting for minutes
#: afterwards): no other test publishes or asks as it, so none is refused or kept waiting
#: meanwhile (every security test shares one installation).
FLOODER = "t5"
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


def creds_file(locked: Locked, user: str) -> Path:
    """The user's credentials as a file (for the nats command line)."""
    path = locked.auth / f"{user}.test.creds"
    path.write_text(locked.creds[user])
    path.chmod(0o600)
    return path


def seeds(locked: Locked) -> list[str]:
    """Every user's seed: the secret half of its credentials."""
    return [
        line for text in locked.creds.values() for line in text.splitlines() if line[:2] == "SU"
    ]


def observer_creds(locked: Locked) -> str:
    """A user of kbus's account that listens to every subject there (tests only: no
    installation has it, and nats-auth does not know it)."""
    keys = Keys.load(locked.auth / "keys.json")
    keys.user(OBSERVER, KBUS_ACCOUNT)
    listens = Permissions(publish=["$JS.API.>", f"{inbox(OBSERVER)}.>"], subscribe=[">"])
    return user_creds(keys, OBSERVER, listens)


#: The services' settings besides their credentials and the servers' addresses.
SETTINGS = {
    "KBUS_STREAM_MAX_BYTES": str(64 * 1024**2),
    "KBUS_WEAVIATE_COLLECTION": "Locked",
    "KBUS_TENANT_BUDGETS": json.dumps({LIMITED: {"search_cost_per_second": RATE}}),
    # The other tenants' searches test what they reach, as fast as they can ask: not held to
    # the default rate of a shared deployment (the limited tenant and the neighbour bench are).
    "KBUS_DEFAULT_BUDGET": json.dumps({"search_cost_per_second": 0}),
}


@pytest.fixture(scope="session")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Locked]:
    state = start_locked(tmp_path_factory.mktemp("locked"), CREDENTIALS, SETTINGS)
    try:
        state.creds[OBSERVER] = observer_creds(state)
        yield state
    finally:
        state.stop()


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
        user_credentials=RawCredentials(locked.creds[user]),
        inbox_prefix=inbox_prefix or inbox(user),
        error_cb=on_error,
        max_reconnect_attempts=0,
    )


async def client_for(locked: Locked, name: str) -> KbClient:
    """A KbClient holding the named credential."""
    held = CredentialFile.read(locked.auth / f"credential-{name}.json")
    return await KbClient.connect(locked.nats_url, credential=held)


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


@pytest.fixture(scope="session")
def console(locked: Locked, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The console on 127.0.0.1, reaching the locked bus; its base URL."""
    # Four requests of a tenant at once (tests/security/test_http.py floods past them).
    env = {**os.environ, "KBUS_NATS_URL": locked.nats_url, "KBUS_CONSOLE_TENANT_REQUESTS": "4"}
    server = start_service("console", env, tmp_path_factory.mktemp("console"))
    try:
        wait_healthy([server])
        yield f"http://127.0.0.1:{server.ports['http']}"
    finally:
        server.stop()
