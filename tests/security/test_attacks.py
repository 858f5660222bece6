"""A hostile tenant with a valid credential and the raw NATS and JetStream API gets nothing of
another tenant's, and cannot reach kbus's own subjects.

Each attack is one a tenant tried (docs/security.md, "Attacks"): it is made with nats-py here
and with the official ``nats`` command line in ``test_attacks_cli.py``; an observer in kbus's
account (a test-only user that hears every subject there) and the victim's own view say
whether anything landed. The victim is tenant t2; the attackers t1 and t3, each as the
credential of one library (``-a``) or of the whole tenant (``-all``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

import pytest
from kbus_client import KbClient
from kbus_contract import BodyPart, DocumentAdded, DocumentDeleted
from kbus_contract.intake import BODY_PART_BYTES
from kbus_contract.lanes import Lane
from nats.aio.client import Client

from tests.security.conftest import (
    LIBRARY,
    TOPOLOGY,
    VICTIM,
    VICTIMS,
    Locked,
    Observer,
    attempt,
    connect,
    granted,
    still_readable,
    victim_finds,
    victim_publishes,
)

T = TOPOLOGY
#: kbus's own streams, every one of which an attack tried to source, mirror or read.
STREAMS = [s.name for s in T.streams] + [f"KV_{b.bucket}" for b in T.buckets]


def _evil_stream(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "storage": "file", "num_replicas": 1, **extra}


BODIES = T.bodies_stream.name
CAPTURE = _evil_stream(
    BODIES,
    subjects=["kb.>", "_INBOX_t2-all.>", f"{T.accepted('document.body')}.>"],
    no_ack=True,
    allow_direct=True,
    max_bytes=-1,
    sources=[{"name": name} for name in STREAMS],
)


async def test_no_stream_can_be_created_or_changed_to_capture_others(
    locked: Locked, victim: KbClient, observer: Observer
) -> None:
    """Attacks 1 and 3: a stream (even the shared store of large texts, where the tenant's own
    share is) created or updated with other subjects, sources, a mirror, or no limits."""
    nc = await connect(locked, "t3-a")
    before = await observer.stream(BODIES)
    try:
        answers = [
            await attempt(nc, f"$JS.API.STREAM.CREATE.{BODIES}", CAPTURE),
            await attempt(nc, f"$JS.API.STREAM.UPDATE.{BODIES}", CAPTURE),
            await attempt(
                nc,
                "$JS.API.STREAM.CREATE.EVIL",
                _evil_stream("EVIL", mirror={"name": T.documents_stream.name}),
            ),
            await attempt(
                nc, "$JS.API.STREAM.CREATE.EVIL2", _evil_stream("EVIL2", subjects=["evil.>"])
            ),
        ]
    finally:
        await nc.close()
    after = await observer.stream(BODIES)
    assert before is not None
    assert after is not None
    assert after["config"] == before["config"]
    assert not after["config"].get("sources")
    assert after["config"]["max_bytes"] > 0
    assert await observer.stream("EVIL") is None
    assert await observer.stream("EVIL2") is None
    assert not any(granted(a) for a in answers), answers
    assert await still_readable(victim)


async def _plant(nc: Client, tenant: str, name: str, body: bytes) -> str:
    """Send ``body`` as a part of a large text into the tenant's own share (the gate's way):
    the gate's answer."""
    part = BodyPart.of(name, len(body), 0, body)
    return await attempt(
        nc, T.subject("document.body", tenant=tenant, library=LIBRARY), part.model_dump(mode="json")
    )


async def test_no_republish_writes_or_deletes_in_another_tenant(
    locked: Locked, victim: KbClient, observer: Observer
) -> None:
    """Attack 2: the store of large texts republishing what it stores onto another tenant's
    document.added and document.deleted subjects."""
    nc = await connect(locked, "t1-a")
    republish = {
        "src": f"{T.accepted('document.body')}.>",
        "dest": f"document.added.{VICTIM}.{LIBRARY}",
    }
    config = _evil_stream(
        BODIES, subjects=[f"{T.accepted('document.body')}.>"], republish=republish
    )
    injected = DocumentAdded(
        tenant=VICTIM,
        library=LIBRARY,
        document_id="injected",
        title="Injected",
        text="republishedword planted by t1",
    )
    deletion = DocumentDeleted(tenant=VICTIM, library=LIBRARY, document_id="victim-doc")
    try:
        answers = [
            await attempt(nc, f"$JS.API.STREAM.CREATE.{BODIES}", config),
            await attempt(nc, f"$JS.API.STREAM.UPDATE.{BODIES}", config),
        ]
        await _plant(nc, "t1", "a" * 64, injected.model_dump_json().encode())
        await _plant(nc, "t1", "b" * 64, deletion.model_dump_json().encode())
    finally:
        await nc.close()
    await asyncio.sleep(5)  # the pipeline's time to index or delete what landed
    assert await victim_finds(victim, "republishedword") == []
    assert await still_readable(victim)
    assert observer.landed(*VICTIMS) == []
    assert not any(granted(a) for a in answers), answers


async def test_a_tenant_cannot_fill_the_store_past_its_budget(
    locked: Locked, observer: Observer
) -> None:
    """Attack 3: the shared store of large texts filled: refused at the tenant's budget (an
    eighth of the store), whatever it sends; the store itself cannot be made unlimited."""
    nc = await connect(locked, "t0-all")
    unlimited = _evil_stream(BODIES, subjects=[">"], max_bytes=-1, discard="old")
    refusals: list[str] = []
    try:
        answer = await attempt(nc, f"$JS.API.STREAM.CREATE.{BODIES}", unlimited)
        chunk = b"x" * BODY_PART_BYTES
        for number in range(80):  # 20 MiB against an 8 MiB budget
            name = hashlib.sha256(f"flood{number}".encode()).hexdigest()
            answered = await _plant(nc, "t0", name, chunk)
            if "error" in answered:
                refusals.append(answered)
    finally:
        await nc.close()
    held = await observer.stream_subjects(BODIES, T.bodies_of("t0"))
    stored = sum(held.values()) * BODY_PART_BYTES
    # The store stays usable for the other tests.
    for subject in held:
        await observer.nc.request(
            f"$JS.API.STREAM.PURGE.{BODIES}", json.dumps({"filter": subject}).encode(), timeout=5
        )
    assert stored <= 8 * 1024**2, f"{stored} bytes of t0's in the store"
    assert refusals, "never refused"
    assert all("quota_exceeded" in r and "body_bytes" in r for r in refusals), refusals[:2]
    assert not granted(answer), answer


async def test_a_publish_cannot_be_squatted_by_another_tenant(
    locked: Locked, victim: KbClient
) -> None:
    """Attack 4: the message id the victim's publish would carry, published first by another
    tenant on its own subject, must not make the victim's publish a silent duplicate."""
    attacker = await connect(locked, "t1-all")
    doc = DocumentAdded(
        tenant=VICTIM,
        library=LIBRARY,
        document_id="squatted",
        title="Squatted",
        text="squattedword must be indexed for its owner",
    )
    try:
        own = doc.model_copy(update={"tenant": "t1"}).model_dump_json().encode()
        for msg_id in (doc.message_id(), f"{doc.message_id()}/after-0"):
            await attacker.jetstream().publish(
                T.added("t1", LIBRARY), own, headers={"Nats-Msg-Id": msg_id}
            )
    finally:
        await attacker.close()
    await victim_publishes(victim, doc)
    assert await victim_finds(victim, "squattedword") == ["squatted"]


async def test_no_consumer_of_another_tenant_or_of_kbus_can_be_read_moved_or_deleted(
    locked: Locked, victim: KbClient, observer: Observer
) -> None:
    """Attack 5: every consumer on kbus's streams (the services', and any a victim's client
    holds while it waits), by name: read, re-pointed, deleted, acked."""
    await victim._receipts.start(VICTIM)  # whatever a waiting client holds
    consumers = {
        (stream, c["name"]): c for stream in STREAMS for c in await observer.consumers(stream)
    }
    assert consumers, "kbus's services hold consumers"
    errors: list[str] = []
    nc = await connect(locked, "t1-all", errors)
    answers: list[str] = []
    try:
        for stream, name in consumers:
            filtered = T.indexed_of("t1")
            answers.append(await attempt(nc, f"$JS.API.CONSUMER.INFO.{stream}.{name}"))
            answers.append(
                await attempt(
                    nc,
                    f"$JS.API.CONSUMER.CREATE.{stream}.{name}.{filtered}",
                    {"stream_name": stream, "config": {"name": name, "filter_subject": filtered}},
                )
            )
            answers.append(await attempt(nc, f"$JS.API.CONSUMER.DELETE.{stream}.{name}"))
            await nc.publish(f"$JS.ACK.{stream}.{name}.1.1.1.0.0", b"+ACK")
        await nc.flush()
        await asyncio.sleep(0.5)
    finally:
        await nc.close()
    assert not any(granted(a) for a in answers), [a for a in answers if granted(a)][:3]
    for (stream, name), before in consumers.items():
        now = {c["name"]: c for c in await observer.consumers(stream)}
        assert name in now, f"{stream}/{name} was deleted"
        assert now[name]["config"] == before["config"], f"{stream}/{name} was changed"
    acks = [e for e in errors if 'permissions violation for publish to "$js.ack.' in e.lower()]
    assert len(acks) == len(consumers), errors[:3]  # every guessed ack refused


REPLY_TARGETS = (
    T.added(VICTIM, LIBRARY),
    T.deleted(VICTIM, LIBRARY),
    T.in_lane("chunks.ready", Lane.BULK, tenant=VICTIM),
    T.in_lane("embeddings.ready", Lane.INTERACTIVE, tenant=VICTIM),
    T.asked("kb.search", VICTIM),
)


async def test_no_reply_lands_on_another_tenant_s_or_kbus_s_subjects(
    locked: Locked, victim: KbClient, observer: Observer
) -> None:
    """Every request a tenant may make, with its reply subject set to another tenant's or to
    kbus's own subjects: the server's and the services' answers must not land there, least of
    all a raw read of the tenant's own store, whose answer is what the tenant stored."""
    nc = await connect(locked, "t4-all")
    planted = DocumentAdded(
        tenant=VICTIM,
        library=LIBRARY,
        document_id="replied",
        title="Replied",
        text="repliedword planted through a reply subject",
    ).model_dump_json()
    own = T.added("t4", LIBRARY)
    name = "c" * 64
    part = T.body_subject("t4", LIBRARY, name)
    try:
        await _plant(nc, "t4", name, planted.encode())
        for target in REPLY_TARGETS:
            for subject, body in (
                (own, planted),
                (
                    T.asked("kb.search", "t4"),
                    {"tenant": "t4", "libraries": [LIBRARY], "query": "x"},
                ),
                (T.asked("kb.stats", "t4"), {"tenant": "t4"}),
                (T.asked("kb.feed", "t4"), {"tenant": "t4"}),
                (T.asked("kb.readprofile", "t4"), {"tenant": "t4", "library": LIBRARY}),
                (T.subject("document.body", tenant="t4", library=LIBRARY), planted),
                (f"$JS.API.DIRECT.GET.{BODIES}.{part}", b""),
                (f"$JS.API.STREAM.MSG.GET.{BODIES}", {"last_by_subj": part}),
            ):
                data = body.encode() if isinstance(body, str) else body
                await attempt(nc, subject, data, reply=target)
    finally:
        await nc.close()
    await asyncio.sleep(5)  # the pipeline's time to index what landed
    landed = observer.landed(*REPLY_TARGETS, *VICTIMS)  # before the victim's own search
    assert landed == [], f"{len(landed)} landed: {sorted(set(landed))}"
    assert await victim_finds(victim, "repliedword") == []


async def test_no_consumer_delivers_anywhere(
    locked: Locked, victim: KbClient, observer: Observer
) -> None:
    """A push consumer (or a pull request) whose delivery subject is kbus's or another
    tenant's: the server delivers without checking who may publish there."""
    nc = await connect(locked, "t1-all")
    receipts = T.receipts_stream.name
    own = T.indexed_of("t1")
    answers = []
    try:
        for number, target in enumerate(REPLY_TARGETS):
            name = f"evil{number}"
            config = {"name": name, "deliver_subject": target, "filter_subject": own}
            answers.append(
                await attempt(
                    nc,
                    f"$JS.API.CONSUMER.CREATE.{receipts}.{name}.{own}",
                    {"stream_name": receipts, "config": config},
                )
            )
            await attempt(
                nc, f"$JS.API.CONSUMER.MSG.NEXT.{receipts}.{name}", {"batch": 10}, reply=target
            )
    finally:
        await nc.close()
    await asyncio.sleep(2)
    assert observer.landed(*REPLY_TARGETS, *VICTIMS) == []
    assert not any(granted(a) for a in answers), answers
    assert [c["name"] for c in await observer.consumers(receipts) if "evil" in c["name"]] == []


@pytest.mark.parametrize(
    "subject",
    [">", "document.>", "deadletter.>", "_INBOX.>", "_INBOX_t2-all.>", "$JS.>", "$O.>"],
)
async def test_no_subscription_beyond_the_tenant_s_own(locked: Locked, subject: str) -> None:
    errors: list[str] = []
    nc = await connect(locked, "t1-all", errors)
    try:
        await nc.subscribe(subject)
        await nc.flush()
        for _ in range(40):
            if errors:
                break
            await asyncio.sleep(0.05)
    finally:
        await nc.close()
    assert any("permissions violation for subscription" in e.lower() for e in errors), errors


async def test_jetstream_headers_reach_nothing_of_another_tenant(
    locked: Locked, victim: KbClient, observer: Observer
) -> None:
    """A publish on the tenant's own subject asking JetStream to schedule a message onto
    another tenant's subject, or to roll up (purge) the whole stream."""
    nc = await connect(locked, "t1-all")
    js = nc.jetstream(timeout=2)
    own = T.added("t1", LIBRARY)
    refusals = []
    try:
        for headers in (
            {"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": T.added(VICTIM, LIBRARY)},
            {"Nats-Rollup": "all"},
            {"Nats-Rollup": "sub"},
        ):
            try:
                await js.publish(own, b"{}", headers=headers)
            except Exception as exc:
                refusals.append(str(exc))
    finally:
        await nc.close()
    await asyncio.sleep(3)
    assert len(refusals) == 3, refusals
    assert observer.landed(*VICTIMS) == []
