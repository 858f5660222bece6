"""One tenant's flood fills its own budget and nothing of another's (issue 55, findings 5, 6,
7, 8 and 10): the shared work streams, the dead letters, the sync lists, the syncer and the
deleter, and the feed.

The stack is the locked one of ``conftest.py``: 64 MiB streams, so every budget is an eighth
of that (kbus_runtime.budgets). The attacker is the flooder (t5), with its valid credential
and nats-py; the victim t2 works as a publisher would, through KbClient.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from kbus_client import KbClient
from kbus_contract import DocumentAdded, DocumentDeleted, FeedKind, LibrarySync, SyncEntry
from nats.aio.client import Client
from nats.js.errors import APIError

from tests.security.conftest import (
    FLOODER,
    LIBRARY,
    TOPOLOGY,
    VICTIM,
    Locked,
    Observer,
    connect,
)

T = TOPOLOGY
ATTACKER = FLOODER


def _doc(tenant: str, document_id: str, text: str, **fields: Any) -> bytes:
    doc = DocumentAdded(
        tenant=tenant, library=LIBRARY, document_id=document_id, title=document_id, text=text
    )
    return json.dumps({**doc.model_dump(mode="json"), **fields}).encode()


async def _send(nc: Client, subject: str, body: bytes, **headers: str) -> str:
    """One raw publish as JetStream's publishers send one: ``ok``, or the refusal's code."""
    try:
        await nc.jetstream(timeout=5).publish(subject, body, headers=headers or None)
    except APIError as exc:
        return str(exc.description or exc.code).partition(":")[0]
    except Exception as exc:
        return type(exc).__name__
    return "ok"


async def _victim(locked: Locked) -> KbClient:
    from tests.security.conftest import client_for

    return await client_for(locked, f"{VICTIM}-all")


async def _flood(locked: Locked, seconds: float, refusals: list[str]) -> None:
    """Four publishers of ~900 KB documents on the attacker's own subject, for ``seconds``."""
    text = "floodword " * 90_000

    async def publisher(number: int) -> None:
        nc = await connect(locked, f"{ATTACKER}-all")
        end = time.monotonic() + seconds
        sent = 0
        try:
            while time.monotonic() < end:
                body = _doc(ATTACKER, f"flood-{number}-{sent}", text)
                refusals.append(await _send(nc, T.added(ATTACKER, LIBRARY), body))
                sent += 1
        finally:
            await nc.close()

    await asyncio.gather(*(publisher(n) for n in range(4)))


async def test_a_flood_of_large_documents_delays_and_refuses_only_its_sender(
    locked: Locked,
) -> None:
    """Finding 5: four publishers of 1 MB documents (and the attacker's searches) against a
    victim's small documents and searches: the victim's are never refused, each is searchable
    within 10 s, and the attacker is refused quota_exceeded past its budgets."""
    victim = await _victim(locked)
    refusals: list[str] = []
    flood = asyncio.create_task(_flood(locked, 20.0, refusals))
    took: list[float] = []
    try:
        await asyncio.sleep(3)  # the flood is under way
        for number in range(8):
            started = time.monotonic()
            result = await victim.publish_document(
                library=LIBRARY,
                document_id=f"small-{number}",
                text=f"The smallword{number} note is short.",
                wait=True,
                timeout_s=60,
            )
            assert result.receipt is not None
            took.append(time.monotonic() - started)
            await asyncio.sleep(1)
        await flood
    finally:
        flood.cancel()
        await victim.close()
    assert max(took) <= 10.0, f"the victim waited {max(took):.1f} s (all: {took})"
    assert "quota_exceeded" in refusals, set(refusals)
    assert not set(refusals) - {"ok", "quota_exceeded"}, set(refusals)


async def _failed(victim: KbClient, document_id: str) -> bool:
    """Whether the victim's dead letter of ``document_id`` is stored (read back by its feed)."""
    reply = await victim.feed(FeedKind.DEAD_LETTERS, library=LIBRARY, limit=500)
    while True:
        if any(e.message.get("document_id") == document_id for e in reply.entries):
            return True
        if not reply.more:
            return False
        reply = await victim.feed(
            FeedKind.DEAD_LETTERS, library=LIBRARY, after=reply.last, limit=500
        )


def _told_failed(observer: Observer, document_id: str) -> bool:
    """Whether the victim's document.failed of ``document_id`` was published."""
    told = observer.heard_on(T.failed(VICTIM, LIBRARY))
    return any(document_id.encode() in data for _, data in told)


async def test_the_dead_letters_of_one_tenant_leave_room_for_another_s(
    locked: Locked, observer: Observer
) -> None:
    """Finding 6: 1,200 invalid 67 kB messages, then 150 documents each stage refuses: the
    victim's own failed document still gets its dead letter and its document.failed, and the
    attacker keeps no more letters than its budget."""
    nc = await connect(locked, f"{ATTACKER}-all")
    junk = b"{" + b"x" * 67_000
    answers: list[str] = []
    try:
        for start in range(0, 1_200, 100):
            answers += await asyncio.gather(
                *(_send(nc, T.added(ATTACKER, LIBRARY), junk) for _ in range(start, start + 100))
            )
        template = {"content_type": "application/json", "template": {"text": "{body}"}}
        for number in range(150):
            body = _doc(ATTACKER, f"letter-{number}", "not json at all", **template)
            answers.append(await _send(nc, T.added(ATTACKER, LIBRARY), body))
    finally:
        await nc.close()
    victim = await _victim(locked)
    marker = f"broken-{uuid.uuid4().hex[:6]}"
    try:
        owner = await connect(locked, f"{VICTIM}-all")
        try:
            body = _doc(VICTIM, marker, "not json either", **template)
            await owner.jetstream().publish(T.added(VICTIM, LIBRARY), body)
        finally:
            await owner.close()
        for _ in range(120):
            if await _failed(victim, marker) and _told_failed(observer, marker):
                break
            await asyncio.sleep(0.5)
        assert await _failed(victim, marker), "the victim's dead letter was not stored"
        assert _told_failed(observer, marker), "the victim heard no document.failed"
    finally:
        await victim.close()
    held = await observer.stream_subjects(T.dead_letter_stream.name, f"deadletter.*.{ATTACKER}.>")
    assert sum(held.values()) <= 113, f"the attacker keeps {sum(held.values())} dead letters"
    assert "invalid_message" in answers


# Alone: it bounds the victim's sync behind minutes of the flooder's work, and the parallel
# phase's load on two cores would make that bound the machine's rather than kbus's.
@pytest.mark.alone
async def test_one_tenant_s_syncs_leave_room_for_another_s(locked: Locked) -> None:
    """Finding 7: 300 syncs, each of another source listing 1,000 long ids, then the victim's
    sync: the victim's is applied and its receipt comes."""
    nc = await connect(locked, f"{ATTACKER}-all")
    entries = tuple(SyncEntry(document_id=f"{'x' * 200}-{n}", version="v1") for n in range(1_000))
    answers: list[str] = []
    try:
        for number in range(300):
            sync = LibrarySync(
                tenant=ATTACKER,
                library=LIBRARY,
                source=f"s{number}",
                documents=entries,
                settle_s=0,
            )
            answers.append(
                await _send(nc, T.synced(ATTACKER, LIBRARY), sync.model_dump_json().encode())
            )
    finally:
        await nc.close()
    victim = await _victim(locked)
    started = time.monotonic()
    try:
        kept = [{"document_id": "synced-doc", "text": "The syncedword note."}]
        result = await asyncio.wait_for(
            victim.sync_library(LIBRARY, kept, source="victim-src", settle_s=60), 120
        )
    finally:
        await victim.close()
    took = time.monotonic() - started
    assert getattr(result.receipt, "refused", None) is None
    # Applied (held up behind the attacker's syncs, it would not answer within the bound);
    # added or unchanged depending on whether its document was indexed first.
    assert result.receipt.added + result.receipt.unchanged == 1, result.receipt
    assert result.receipt.failed == 0, result.receipt
    assert took < 30, f"the victim's sync took {took:.0f} s"
    assert "quota_exceeded" in answers


# Alone: it bounds the victim's sync behind minutes of the flooder's work, and the parallel
# phase's load on two cores would make that bound the machine's rather than kbus's.
@pytest.mark.alone
async def test_long_syncs_and_poisoned_deletions_hold_up_only_their_tenant(
    locked: Locked, victim: KbClient
) -> None:
    """Finding 8: ten syncs waiting an hour for what they list, and 1,100 deletions carrying a
    ``Status: 404`` header (which nats-py reads as the server's own status): the victim's sync
    and deletion are applied within 30 s."""
    nc = await connect(locked, f"{ATTACKER}-all")
    try:
        for number in range(10):
            sync = LibrarySync(
                tenant=ATTACKER,
                library=LIBRARY,
                source=f"held{number}",
                documents=(SyncEntry(document_id="never", version="v9"),),
                settle_s=3_600,
            )
            await _send(nc, T.synced(ATTACKER, LIBRARY), sync.model_dump_json().encode())
        poisoned = [
            DocumentDeleted(tenant=ATTACKER, library=LIBRARY, document_id=f"d{n}")
            for n in range(1_100)
        ]
        subject = T.deleted(ATTACKER, LIBRARY)
        for start in range(0, len(poisoned), 100):
            batch = poisoned[start : start + 100]
            await asyncio.gather(
                *(_send(nc, subject, d.model_dump_json().encode(), Status="404") for d in batch)
            )
    finally:
        await nc.close()
    started = time.monotonic()
    kept = [{"document_id": "after-held", "text": "The heldword note."}]
    result = await asyncio.wait_for(
        victim.sync_library(LIBRARY, kept, source="quick", settle_s=30), 60
    )
    assert result.receipt.added + result.receipt.unchanged == 1, result.receipt
    assert result.receipt.failed == 0, result.receipt
    synced_s = time.monotonic() - started
    started = time.monotonic()
    await asyncio.wait_for(
        victim.delete_document(library=LIBRARY, document_id="after-held", wait=True), 60
    )
    deleted_s = time.monotonic() - started
    assert synced_s <= 30, f"the victim's sync took {synced_s:.0f} s"
    assert deleted_s <= 30, f"the victim's deletion took {deleted_s:.0f} s"


async def test_the_feed_reads_from_a_time_and_leaves_no_consumer(
    locked: Locked, observer: Observer
) -> None:
    """Finding 10: a ``since`` of whole seconds (the documented form) is answered; 300 requests
    at once leave no consumer behind, and those past the tenant's budget are refused
    quota_exceeded, none answered ``internal``."""
    kb = await _victim(locked)
    baseline = len(await observer.consumers(T.receipts_stream.name))
    try:
        since = datetime(2026, 12, 1, tzinfo=UTC)
        answered = await kb.feed(since=since)
        assert answered.entries is not None
        outcomes = await asyncio.gather(
            *(kb.feed(since=since, limit=5) for _ in range(300)), return_exceptions=True
        )
    finally:
        await kb.close()
    codes = [getattr(o, "code", "ok") for o in outcomes]
    assert not set(codes) - {"ok", "quota_exceeded"}, set(codes)
    for _ in range(40):
        if len(await observer.consumers(T.receipts_stream.name)) <= baseline:
            break
        await asyncio.sleep(0.5)
    assert len(await observer.consumers(T.receipts_stream.name)) <= baseline
