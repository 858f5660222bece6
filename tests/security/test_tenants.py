"""A tenant's credential reaches that tenant only, and of it only its libraries.

Every refusal is checked for its reason: the server's permissions violation naming the subject,
or kbus's error reply (tenant_mismatch, library_not_granted, quota_exceeded). Every grant is
checked too, with the same operations on a credential's own tenant and libraries, so the
refusals cannot pass for a test that refuses everything.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kbus_client import KbClient, KbError
from kbus_contract import Chunker, LibraryProfile
from kbus_contract.claimcheck import body_parts, body_ref
from kbus_contract.intake import REPLAY_OF
from kbus_contract.tenancy import GRANT_ALL
from kbus_dev.natsauth import Credential
from kbus_searcher.state.quotas import BURST_S
from nats.aio.client import Client
from nats.errors import Error as NatsError
from nats.js.errors import APIError

from tests.security.conftest import (
    CREDENTIALS,
    FLOODER,
    LIBRARIES,
    LIMITED,
    RATE,
    TENANTS,
    TOPOLOGY,
    Locked,
    client_for,
    connect,
    credential,
)

T = TOPOLOGY
OPERATIONS = (
    "search",
    "search-subject",
    "stats-subject",
    "profile",
    "profile-subject",
    "profile-read",
    "profile-read-subject",
    "publish",
    "delete",
    "receipts",
    "dead-letters",
    "feed",
    "feed-subject",
    "bodies",
)


def marker(tenant: str, library: str) -> str:
    """A word only this tenant's library holds."""
    return f"marker{tenant}{library.replace('-', '')}"


#: The tenants seeded and read back: not the flooder, which the budget tests (on the same
#: installation) leave past its budgets, its own requests kept waiting.
QUIET = [t for t in TENANTS if t != FLOODER]


@pytest.fixture(scope="module")
async def seeded(locked: Locked) -> Locked:
    """Every tenant's libraries hold a document with their own marker word (and each tenant's
    store of large texts exists: one document of each tenant goes by claim check)."""
    for tenant in QUIET:
        kb = await client_for(locked, f"{tenant}-all")
        async with kb:
            for library in LIBRARIES:
                kb.claim_check_bytes = 200 if library == "lib-a" else None
                word = marker(tenant, library)
                await kb.publish_document(
                    library=library,
                    document_id=f"seed-{library}",
                    title=f"{tenant} {library}",
                    text=f"The {word} is kept here. " * (12 if library == "lib-a" else 1),
                    wait=True,
                    timeout_s=120,
                )
    return locked


@dataclass
class Attempt:
    credential: Credential
    operation: str
    tenant: str
    library: str
    number: int

    @property
    def readable(self) -> bool:
        c = self.credential
        return self.tenant == c.tenant and (c.libraries is None or self.library in c.libraries)

    @property
    def allowed(self) -> bool:
        c = self.credential
        if self.operation in ("publish", "delete", "bodies"):
            # A large text goes into its library's share: a library's writer writes its own.
            return c.write and self.readable
        if self.operation in (
            "search-subject",
            "stats-subject",
            "profile-read-subject",
            "feed-subject",
        ):
            # The whole tenant's plain grant (a credential that acts for people has another).
            return self.tenant == c.tenant and c.grant == GRANT_ALL
        if self.operation == "profile":
            return c.write and self.readable
        if self.operation == "profile-subject":
            return c.write and self.tenant == c.tenant and c.grant == GRANT_ALL
        return self.readable


@dataclass
class Outcome:
    ok: bool
    reason: str = ""
    foreign_hits: int = 0


class Connections:
    """One connection per credential, and the permission errors the server sent it."""

    def __init__(self, locked: Locked) -> None:
        self.locked = locked
        self.clients: dict[str, Client] = {}
        self.errors: dict[str, list[str]] = {}
        self._opening = asyncio.Lock()

    async def of(self, name: str) -> Client:
        async with self._opening:  # one connection per credential, however many ask at once
            if name not in self.clients:
                self.errors[name] = []
                self.clients[name] = await connect(self.locked, name, self.errors[name])
        return self.clients[name]

    async def violation(self, name: str, subject: str) -> str:
        for _ in range(40):
            # nats-py reports the server's error in lower case.
            found = [e for e in self.errors[name] if subject.lower() in e.lower()]
            if found:
                return found[0]
            await asyncio.sleep(0.05)
        return ""

    async def close(self) -> None:
        for nc in self.clients.values():
            await nc.close()


async def _request(nc: Client, subject: str, body: dict[str, Any]) -> dict[str, Any]:
    reply = await nc.request(subject, json.dumps(body).encode(), timeout=2)
    result: dict[str, Any] = json.loads(reply.data)
    return result


def _error(reply: dict[str, Any]) -> str:
    return str(reply.get("error", {}).get("code", ""))


async def _search(nc: Client, a: Attempt, subject: str) -> Outcome:
    body = {
        "tenant": a.tenant,
        "libraries": [a.library],
        "query": marker(a.tenant, a.library),
        "search_type": "keyword",
        "rerank": False,
        "k": 20,
    }
    reply = await _request(nc, subject, body)
    if reply["kind"] == "error":
        return Outcome(False, f"{reply['error']['code']}: {reply['error']['message']}")
    own = {marker(a.credential.tenant, lib) for lib in LIBRARIES}
    foreign = sum(1 for hit in reply["results"] if not any(m in hit["text"] for m in own))
    return Outcome(True, foreign_hits=foreign)


async def _listen(nc: Client, subject: str, errors: list[str]) -> Outcome:
    """Subscribe (the server refuses a subject the credential may not read, asynchronously)."""
    sub = await nc.subscribe(subject)
    await nc.flush()
    await asyncio.sleep(0.3)
    await sub.unsubscribe()
    refused = [e for e in errors if subject.lower() in e.lower()]
    return Outcome(not refused, refused[0] if refused else "")


async def _feed(nc: Client, a: Attempt, subject: str) -> Outcome:
    body = {"tenant": a.tenant, "library": a.library, "kind": "dead_letters"}
    reply = await _request(nc, subject, body)
    if reply["kind"] == "error":
        return Outcome(False, f"{reply['error']['code']}: {reply['error']['message']}")
    foreign = sum(1 for e in reply["entries"] if e["message"].get("tenant") != a.credential.tenant)
    return Outcome(True, foreign_hits=foreign)


async def _store(nc: Client, a: Attempt) -> Outcome:
    """Send a large text's part into the target tenant's library's share, as a credential can:
    to the gate."""
    data = f"stored by {a.credential.name} ".encode() * 20
    ref = body_ref(f"probe-{a.number}", data)
    [part] = body_parts(ref, data)
    subject = T.subject("document.body", tenant=a.tenant, library=a.library)
    await nc.jetstream(timeout=2).publish(subject, part.model_dump_json().encode())
    return Outcome(True)


async def _run(nc: Client, a: Attempt, errors: list[str]) -> Outcome:
    c = a.credential
    js = nc.jetstream(timeout=2)
    if a.operation == "search":  # on its own subject, naming the target in the body
        return await _search(nc, a, T.asked("kb.search", c.tenant, c.grant))
    if a.operation == "search-subject":  # claiming the target's whole-tenant subject
        return await _search(nc, a, T.asked("kb.search", a.tenant, GRANT_ALL))
    if a.operation == "stats-subject":
        reply = await _request(nc, T.asked("kb.stats", a.tenant, GRANT_ALL), {"tenant": a.tenant})
        return Outcome(reply["kind"] == "stats", _error(reply))
    if a.operation.startswith("profile"):
        subject = _subject_of(a)
        reply = await _request(nc, subject, {"tenant": a.tenant, "library": a.library})
        return Outcome(reply["kind"] == "library_profile", _error(reply))
    if a.operation == "publish":
        doc = {
            "tenant": a.tenant,
            "library": a.library,
            "document_id": f"written-{a.number}",
            "title": "x",
            "text": f"rndmark written by {c.name}",
        }
        await js.publish(T.added(a.tenant, a.library), json.dumps(doc).encode())
        return Outcome(True)
    if a.operation == "delete":
        # A refused deletion aims at the target's seed document; an allowed one at nothing.
        target = f"ghost-{a.number}" if a.allowed else f"seed-{a.library}"
        deletion = {"tenant": a.tenant, "library": a.library, "document_id": target}
        await js.publish(T.deleted(a.tenant, a.library), json.dumps(deletion).encode())
        return Outcome(True)
    if a.operation == "receipts":
        return await _listen(nc, T.indexed_of(a.tenant, a.library), errors)
    if a.operation == "dead-letters":
        return await _listen(nc, T.dead_letters_of(a.tenant, a.library), errors)
    if a.operation == "feed":  # on its own subject, naming the target in the body
        return await _feed(nc, a, T.asked("kb.feed", c.tenant, c.grant))
    if a.operation == "feed-subject":
        return await _feed(nc, a, T.asked("kb.feed", a.tenant, GRANT_ALL))
    return await _store(nc, a)


async def attempt(connections: Connections, a: Attempt) -> Outcome:
    nc = await connections.of(a.credential.name)
    try:
        return await _run(nc, a, connections.errors[a.credential.name])
    except Exception as exc:
        reason = await connections.violation(a.credential.name, _subject_of(a))
        return Outcome(False, reason or f"{type(exc).__name__}: {exc}")


def _subject_of(a: Attempt) -> str:
    """The subject the server refuses, as its permissions violation names it."""
    return {
        "search-subject": T.asked("kb.search", a.tenant, GRANT_ALL),
        "stats-subject": T.asked("kb.stats", a.tenant, GRANT_ALL),
        "profile": T.asked("kb.profile", a.credential.tenant, a.credential.grant),
        "profile-subject": T.asked("kb.profile", a.tenant, GRANT_ALL),
        "profile-read": T.asked("kb.readprofile", a.credential.tenant, a.credential.grant),
        "profile-read-subject": T.asked("kb.readprofile", a.tenant, GRANT_ALL),
        "publish": T.added(a.tenant, a.library),
        "delete": T.deleted(a.tenant, a.library),
        "receipts": T.indexed_of(a.tenant, a.library),
        "dead-letters": T.dead_letters_of(a.tenant, a.library),
        "feed": T.asked("kb.feed", a.credential.tenant, a.credential.grant),
        "feed-subject": T.asked("kb.feed", a.tenant, GRANT_ALL),
        "bodies": T.subject("document.body", tenant=a.tenant, library=a.library),
    }.get(a.operation, "")


def _expected_reason(outcome: Outcome) -> bool:
    known = ("permissions violation", "tenant_mismatch", "library_not_granted")
    return any(k in outcome.reason.lower() for k in known)


async def test_every_operation_on_another_tenant_is_refused_and_on_its_own_granted(
    seeded: Locked,
) -> None:
    connections = Connections(seeded)
    a, b = credential("t1-all"), credential("t2-all")
    try:
        for operation in OPERATIONS:
            foreign = await attempt(connections, Attempt(a, operation, "t2", "lib-a", 1))
            assert not foreign.ok, operation
            assert _expected_reason(foreign), (operation, foreign.reason)
            own = await attempt(connections, Attempt(b, operation, "t2", "lib-a", 2))
            assert own.ok, (operation, own.reason)
            assert own.foreign_hits == 0
    finally:
        await connections.close()


async def test_a_library_credential_reaches_its_library_only(seeded: Locked) -> None:
    connections = Connections(seeded)
    limited = credential("t1-a")
    try:
        for operation in (
            "search",
            "profile",
            "profile-read",
            "publish",
            "delete",
            "receipts",
            "dead-letters",
            "feed",
        ):
            other = await attempt(connections, Attempt(limited, operation, "t1", "lib-b", 3))
            assert not other.ok, operation
            assert _expected_reason(other), (operation, other.reason)
            own = await attempt(connections, Attempt(limited, operation, "t1", "lib-a", 4))
            assert own.ok, (operation, own.reason)
        refused = await attempt(connections, Attempt(limited, "search", "t1", "lib-b", 5))
        assert "library_not_granted" in refused.reason
        assert "'lib-b'" in refused.reason  # the library is named, not silently left out
    finally:
        await connections.close()


async def test_a_thousand_random_attempts_reach_nothing_of_another_tenant(
    seeded: Locked,
) -> None:
    rng = random.Random(27)
    attempts = []
    # The limited tenant's credentials are left out (their searches may meet its quota), and
    # the flooder's; every tenant is a target.
    holders = [c for c in CREDENTIALS if c.tenant in QUIET and c.tenant != LIMITED]
    for number in range(1_000):
        held = rng.choice(holders)
        tenant = held.tenant if rng.random() < 0.4 else rng.choice(TENANTS)
        attempts.append(
            Attempt(held, rng.choice(OPERATIONS), tenant, rng.choice(LIBRARIES), 1_000 + number)
        )
    connections = Connections(seeded)
    limit = asyncio.Semaphore(32)

    async def one(a: Attempt) -> Outcome:
        async with limit:
            return await attempt(connections, a)

    try:
        outcomes = await asyncio.gather(*(one(a) for a in attempts))
    finally:
        await connections.close()
    tally = Counter((a.allowed, o.ok) for a, o in zip(attempts, outcomes, strict=True))
    print(f"\n1,000 attempts: {dict(tally)}")
    assert tally[(True, False)] == 0, [
        (a, o) for a, o in zip(attempts, outcomes, strict=True) if a.allowed and not o.ok
    ][:5]
    assert tally[(False, True)] == 0
    assert tally[(False, False)] > 300  # both kinds were tried
    assert tally[(True, True)] > 200
    unexplained = [
        (a.operation, o.reason)
        for a, o in zip(attempts, outcomes, strict=True)
        if not o.ok and not _expected_reason(o)
    ]
    assert not unexplained, unexplained[:5]
    assert sum(o.foreign_hits for o in outcomes) == 0
    await _nothing_foreign_was_written_or_deleted(seeded, attempts)


async def _nothing_foreign_was_written_or_deleted(locked: Locked, attempts: list[Attempt]) -> None:
    written = {
        (a.tenant, a.library, f"written-{a.number}")
        for a in attempts
        if a.operation == "publish" and a.allowed
    }
    for tenant in QUIET:
        kb = await client_for(locked, f"{tenant}-all")
        async with kb:
            for library in LIBRARIES:
                expected = {doc for t, lib, doc in written if (t, lib) == (tenant, library)}
                found = await _documents(kb, library, expected)
                # (Documents the other tests wrote have numbers under 1,000.)
                ours = {d for d in found if d.startswith("seed-") or int(d.split("-")[1]) >= 1_000}
                assert ours == expected | {f"seed-{library}"}, (tenant, library)


async def _documents(kb: Any, library: str, expected: set[str]) -> set[str]:
    """The documents of a library that hold the random run's word, and its seed (waiting a
    while for the allowed publishes to be indexed)."""
    found: set[str] = set()
    for _ in range(60):
        try:
            reply = await kb.search(
                "rndmark", libraries=[library], search_type="keyword", k=100, group_by_document=True
            )
            seed = await kb.search(
                marker(kb.tenant, library), libraries=[library], search_type="keyword", k=5
            )
        except KbError as exc:  # the limited tenant's rate: ask again in a second
            if exc.code != "quota_exceeded":
                raise
        else:
            found = {h.document_id for h in (*reply.results, *seed.results)}
            if expected <= found:
                return found
        await asyncio.sleep(1)
    return found


async def test_a_body_naming_another_tenant_than_its_subject_is_refused_at_the_gate(
    seeded: Locked,
) -> None:
    kb = await client_for(seeded, "t1-all")
    nc = kb.nc
    async with kb:
        body = {
            "tenant": "t2",
            "library": "lib-a",
            "document_id": "smuggled",
            "title": "x",
            "text": "smuggledword in t2's library",
        }
        with pytest.raises(APIError) as refused:
            await nc.jetstream().publish(T.added("t1", "lib-a"), json.dumps(body).encode())
        assert str(refused.value.description).startswith("tenant_mismatch:")
        assert "t2" in str(refused.value.description)  # what it sent, nothing else
    other = await client_for(seeded, "t2-all")
    async with other:
        reply = await other.search("smuggledword", libraries=["lib-a"], search_type="keyword")
        assert reply.results == ()


async def test_the_cli_lists_and_replays_its_tenant_s_dead_letters_with_a_credential(
    seeded: Locked, tmp_path: Path
) -> None:
    """``kbus dlq`` with a tenant's credential file: through kb.feed, its own letters only."""
    kb = await client_for(seeded, "t3-all")
    async with kb:
        # Well-formed (the gate stores it), but no JSON records in it: the ingestor's refusal.
        body: dict[str, Any] = {"tenant": "t3", "library": "lib-a", "title": "x", "text": "y"}
        body |= {"document_id": "cli-letter", "content_type": "application/json"}
        body |= {"template": {"text": "{a}"}}
        await kb.nc.jetstream().publish(T.added("t3", "lib-a"), json.dumps(body).encode())
        await _dead_letter(kb, "cli-letter")
    (tmp_path / "t3.json").write_text((seeded.auth / "credential-t3-all.json").read_text())
    env = {**os.environ, "KBUS_NATS_URL": seeded.nats_url}
    cli = [
        str(Path(sys.executable).with_name("kbus")),
        "--credential",
        str(tmp_path / "t3.json"),
        "dlq",
    ]
    listed = await asyncio.to_thread(_cli, [*cli, "list", "--json"], env)
    assert listed.returncode == 0, listed.stderr
    letters = json.loads(listed.stdout)
    assert {letter["tenant"] for letter in letters} == {"t3"}
    [mine] = [letter for letter in letters if letter["document_id"] == "cli-letter"]
    replayed = await asyncio.to_thread(_cli, [*cli, "replay", str(mine["sequence"])], env)
    assert "replayed 1" in replayed.stdout, replayed.stderr
    # The gate removed it (the credential itself may not): it leaves the list.
    listed = await asyncio.to_thread(_cli, [*cli, "list", "--json"], env)
    assert mine["sequence"] not in {letter["sequence"] for letter in json.loads(listed.stdout)}


def _letter_body(tenant: str, document_id: str) -> bytes:
    """A document the gate stores and the ingestor dead-letters (no JSON records in it)."""
    body: dict[str, Any] = {"tenant": tenant, "library": "lib-a", "title": "x", "text": "y"}
    body |= {"document_id": document_id, "content_type": "application/json"}
    body |= {"template": {"text": "{a}"}}
    return json.dumps(body).encode()


async def _letter_sequences(kb: KbClient) -> set[int]:
    """The sequences of the tenant's dead letters."""
    return {entry.sequence for entry in (await kb.feed("dead_letters", limit=500)).entries}


async def test_a_replay_header_removes_only_the_sender_s_own_letter_replayed_as_it_was(
    seeded: Locked,
) -> None:
    """Random replay headers from the owner, from another library's and a read-only credential
    and from other tenants, with other bodies: the letter stays until its owner sends exactly
    its message again."""
    rng = random.Random(6772)
    owner = await client_for(seeded, "t2-all")
    async with owner:
        original = _letter_body("t2", "replayed-letter")
        await owner.nc.jetstream().publish(T.added("t2", "lib-a"), original)
        letter = await _dead_letter(owner, "replayed-letter")
        [sequence] = [
            entry.sequence
            for entry in (await owner.feed("dead_letters", limit=500)).entries
            if entry.message == letter
        ]
        stored = letter["original"].encode()
        altered = letter["original"].replace('"text":"y"', '"text":"z"').encode()
        assert altered != stored
        names = ["t2-all", "t2-a", "t2-ro-b", "t1-all", "t5-a"]
        headers = [str(sequence), str(sequence + 1), str(sequence - 1), "-1", "x", f"{sequence} 1"]
        for attempt in range(30):
            name, header = rng.choice(names), rng.choice(headers)
            tenant = name.split("-")[0]
            bodies = [_letter_body(tenant, f"other-{attempt}")]
            if tenant == "t2":
                bodies.append(altered)
                if name == "t2-ro-b" or header != str(sequence):
                    bodies.append(stored)  # the very message, but not its owner's replay
            body = rng.choice(bodies)
            kb = await client_for(seeded, name)
            async with kb:
                # A read-only credential is refused; so is a tenant past its budget.
                with contextlib.suppress(APIError, NatsError, TimeoutError):
                    await kb.nc.jetstream().publish(
                        T.added(tenant, "lib-a"), body, headers={REPLAY_OF: header}, timeout=2
                    )
            assert sequence in await _letter_sequences(owner), (name, header, body)
        # As the CLI replays it: the message as stored, which the letter keeps.
        await owner.nc.jetstream().publish(
            T.added("t2", "lib-a"), stored, headers={REPLAY_OF: str(sequence)}
        )
        assert sequence not in await _letter_sequences(owner)


def _cli(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


async def _dead_letter(kb: KbClient, document_id: str) -> dict[str, Any]:
    """The dead letter of a document, read back as its tenant can: kb.feed."""
    for _ in range(60):
        for entry in (await kb.feed("dead_letters", limit=500)).entries:
            if entry.message.get("document_id") == document_id:
                return entry.message
        await asyncio.sleep(0.5)
    raise AssertionError(f"no dead letter for {document_id}")


async def test_a_burst_over_one_tenant_s_search_limit_leaves_the_others_answered(
    seeded: Locked,
) -> None:
    limited = await client_for(seeded, f"{LIMITED}-all")
    other = await client_for(seeded, "t0-all")

    async def search(kb: Any, tenant: str) -> str:
        try:
            await kb.search(
                marker(tenant, "lib-b"), libraries=["lib-b"], search_type="keyword", rerank=False
            )
        except KbError as exc:
            return exc.code
        return "ok"

    # Four times what its bucket holds (BURST_S seconds of its rate), each search about one.
    many = int(4 * RATE * BURST_S)
    async with limited, other:
        await asyncio.sleep(BURST_S + 0.5)  # a full bucket since the tenant's last searches
        assert await search(other, "t0") == "ok"  # another tenant searches here too
        burst = await asyncio.gather(*(search(limited, LIMITED) for _ in range(many)))
        others = await asyncio.gather(*(search(other, "t0") for _ in range(4 * RATE)))
    print(f"\nburst of {len(burst)}: {Counter(burst)}; the other tenant's: {Counter(others)}")
    assert burst.count("quota_exceeded") >= many // 2
    assert burst.count("ok") >= 1  # the limit is a rate, not a ban
    assert set(burst) <= {"ok", "quota_exceeded"}
    assert others == ["ok"] * (4 * RATE)


async def test_a_read_only_credential_reads_its_library_s_profile_and_sets_none(
    seeded: Locked,
) -> None:
    reader = await client_for(seeded, "t1-ro-b")
    async with reader:
        before = await reader.profile("lib-b")
        with pytest.raises(KbError):
            await reader.profile("lib-b", set_to=LibraryProfile(chunker=Chunker(size=300)))
        with pytest.raises(KbError) as other:
            await reader.profile("lib-a")
        assert "library_not_granted" in f"{other.value.code} {other.value}"
    writer = await client_for(seeded, "t1-all")
    async with writer:
        assert (await writer.profile("lib-b")).revision == before.revision
