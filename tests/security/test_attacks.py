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
from typing import Any

import pytest
from kbus_client import KbClient
from kbus_contract import DocumentAdded, DocumentDeleted
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


CAPTURE = _evil_stream(
    f"OBJ_{T.bodies_bucket('t3')}",
    subjects=[
        "kb.>",
        "_INBOX_t2-all.>",
        f"$O.{T.bodies_bucket('t3')}.>",
    ],
    no_ack=True,
    allow_direct=True,
    max_bytes=-1,
    sources=[{"name": name} for name in STREAMS],
)


async def test_no_stream_can_be_created_or_changed_to_capture_others(
    locked: Locked, victim: KbClient, observer: Observer
) -> None:
    """Attacks 1 and 3: a stream (even the tenant's own store) created or updated with other
    subjects, sources, a mirror, or no limits."""
    nc = await connect(locked, "t3-a")
    store = f"OBJ_{T.bodies_bucket('t3')}"
    before = await observer.stream(store)
    try:
        answers = [
            await attempt(nc, f"$JS.API.STREAM.CREATE.{store}", CAPTURE),
            await attempt(nc, f"$JS.API.STREAM.UPDATE.{store}", CAPTURE),
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
    after = await observer.stream(store)
    assert after is not None
    config = after["config"]
    assert not config.get("sources"), f"the store sources {len(config['sources'])} streams"
    prefix = f"$O.{T.bodies_bucket('t3')}."
    assert all(s.startswith(prefix) for s in config["subjects"]), config["subjects"]
    assert config["max_bytes"] > 0
    assert not config.get("no_ack")
    assert before is not None
    assert config == before["config"]
    assert await observer.stream("EVIL") is None
    assert await observer.stream("EVIL2") is None
    assert not any(granted(a) for a in answers), answers
    assert await still_readable(victim)


async def _plant(nc: Client, tenant: str, token: str, body: bytes) -> bool:
    """Publish ``body`` into the tenant's own store as an object's chunk would go."""
    try:
        await nc.jetstream(timeout=2).publish(f"$O.{T.bodies_bucket(tenant)}.C.{token}", body)
    except Exception:
        return False
    return True


async def test_no_republish_writes_or_deletes_in_another_tenant(
    locked: Locked, victim: KbClient, observer: Observer
) -> None:
    """Attack 2: the tenant's store republishing what it stores onto another tenant's
    document.added and document.deleted subjects."""
    nc = await connect(locked, "t1-a")
    bucket = T.bodies_bucket("t1")
    store = f"OBJ_{bucket}"
    republish = {
        "src": f"$O.{bucket}.C.*.*",
        "dest": f"document.{{{{wildcard(1)}}}}.{VICTIM}.{LIBRARY}",
    }
    config = _evil_stream(store, subjects=[f"$O.{bucket}.>"], republish=republish)
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
            await attempt(nc, f"$JS.API.STREAM.CREATE.{store}", config),
            await attempt(nc, f"$JS.API.STREAM.UPDATE.{store}", config),
        ]
        await _plant(nc, "t1", "added.1", injected.model_dump_json().encode())
        await _plant(nc, "t1", "deleted.1", deletion.model_dump_json().encode())
    finally:
        await nc.close()
    await asyncio.sleep(5)  # the pipeline's time to index or delete what landed
    assert await victim_finds(victim, "republishedword") == []
    assert await still_readable(victim)
    assert observer.landed(*VICTIMS) == []
    assert not any(granted(a) for a in answers), answers


async def test_a_tenant_cannot_fill_the_disk_past_its_store(
    locked: Locked, observer: Observer
) -> None:
    """Attack 3: a store without limits, and more written than its limit."""
    nc = await connect(locked, "t0-all")
    bucket = T.bodies_bucket("t0")
    store = f"OBJ_{bucket}"
    unlimited = _evil_stream(store, subjects=[f"$O.{bucket}.>"], max_bytes=-1, discard="old")
    written = 0
    try:
        answer = await attempt(nc, f"$JS.API.STREAM.CREATE.{store}", unlimited)
        chunk = b"x" * (1024 * 1024 - 4096)
        js = nc.jetstream(timeout=2)
        for number in range(80):  # 80 MB against a 64 MiB limit
            try:
                await js.publish(f"$O.{bucket}.C.flood", chunk, headers={"n": str(number)})
            except Exception:
                break
            written += len(chunk)
    finally:
        await nc.close()
    info = await observer.stream(store)
    # The store stays usable for the other tests.
    await observer.nc.request(f"$JS.API.STREAM.PURGE.{store}", b"{}", timeout=5)
    assert info is not None
    limit = info["config"]["max_bytes"]
    assert 0 < limit <= 64 * 1024**2, f"{written} bytes written to a store of limit {limit}"
    assert info["state"]["bytes"] <= limit
    assert written <= limit  # refused once full, not evicting: no more landed than the limit
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
        for msg_id in (doc.message_id(), f"{doc.message_id()}/after-0"):
            await attacker.jetstream().publish(
                T.added("t1", LIBRARY), b"{}", headers={"Nats-Msg-Id": msg_id}
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
    bucket = T.bodies_bucket("t4")
    store = f"OBJ_{bucket}"
    planted = DocumentAdded(
        tenant=VICTIM,
        library=LIBRARY,
        document_id="replied",
        title="Replied",
        text="repliedword planted through a reply subject",
    ).model_dump_json()
    own = T.added("t4", LIBRARY)
    readable = _evil_stream(store, subjects=[f"$O.{bucket}.>"], allow_direct=True)
    try:
        await attempt(nc, f"$JS.API.STREAM.CREATE.{store}", readable)
        await _plant(nc, "t4", "planted", planted.encode())
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
                (f"$JS.API.DIRECT.GET.{store}.$O.{bucket}.C.planted", b""),
                (f"$JS.API.STREAM.MSG.GET.{store}", {"last_by_subj": f"$O.{bucket}.C.planted"}),
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
