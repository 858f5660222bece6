"""What a tenant sends into kbus's streams steers nothing and learns nothing of other tenants
(issue 55, findings 1, 2, 4 and 9): kbus's services never publish where a message's headers
say, a message id is the tenant's own, the store of large texts is each library's own, and no
answer tells of another tenant's messages.

Made with nats-py as a hostile tenant holding valid credentials would; the same attacks with
the ``nats`` command line are in ``test_attacks_cli.py``. The victim is tenant t2.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from kbus_client import KbClient
from kbus_contract import DocumentAdded, DocumentDeleted

from tests.security.conftest import (
    LIBRARY,
    TOPOLOGY,
    VICTIM,
    Locked,
    Observer,
    attempt,
    client_for,
    connect,
    still_readable,
    victim_finds,
)

T = TOPOLOGY
#: Where a hostile ``reply_to`` header points a service: another tenant's receipts, kbus's
#: own streams, buckets and stores (JetStream API and key-value subjects).
STEERED = (
    T.failed(VICTIM, LIBRARY),
    T.indexed(VICTIM, LIBRARY),
    T.accepted(T.added(VICTIM, LIBRARY)),
    f"$JS.API.STREAM.PURGE.{T.bodies_stream.name}",
    f"$JS.API.STREAM.PURGE.OBJ_KBUS_BODIES_{VICTIM}",
    f"$KV.{T.profiles_bucket}.{VICTIM}.{LIBRARY}",
    f"$KV.{T.versions_bucket}.t.{VICTIM}.l.{LIBRARY}.d.0",
    f"$JS.API.STREAM.PURGE.{T.receipts_stream.name}",
)


def _document(tenant: str, document_id: str, text: str) -> bytes:
    return (
        DocumentAdded(
            tenant=tenant, library=LIBRARY, document_id=document_id, title=document_id, text=text
        )
        .model_dump_json()
        .encode()
    )


async def _profile(kb: KbClient) -> dict[str, Any]:
    return (await kb.profile(LIBRARY)).profile.model_dump(mode="json")


def _another_tenant_s_cleanup(subject: str, data: bytes) -> bool:
    """A purge of the large text of a tenant neither this test's publisher nor its victim: that
    tenant's own work (the budget tests' flooder's, still cleaned up meanwhile on the shared
    installation), not what a steered message made land."""
    if subject != f"$JS.API.STREAM.PURGE.{T.bodies_stream.name}":
        return False
    try:
        named = str(json.loads(data).get("filter", ""))
    except (ValueError, AttributeError):
        return False
    if not named.startswith(T.accepted("document.body.")):
        return False
    return not any(named.startswith(T.accepted(f"document.body.{t}.")) for t in ("t1", VICTIM))


async def test_a_reply_to_header_makes_no_service_publish_anywhere(
    locked: Locked, victim: KbClient, observer: Observer
) -> None:
    """Finding 1: a valid document and a valid deletion, each with a ``reply_to`` header naming
    another tenant's subject or kbus's own: nothing lands there, the victim's profile, store and
    documents stay as they were."""
    profile = await _profile(victim)
    nc = await connect(locked, "t1-all")
    js = nc.jetstream(timeout=5)
    try:
        for number, target in enumerate(STEERED):
            headers = {"reply_to": target, "Reply-To": target}
            body = _document("t1", f"steer-{number}", "steered")
            await js.publish(T.added("t1", LIBRARY), body, headers=headers)
            deletion = DocumentDeleted(tenant="t1", library=LIBRARY, document_id=f"steer-{number}")
            await js.publish(
                T.deleted("t1", LIBRARY), deletion.model_dump_json().encode(), headers=headers
            )
    finally:
        await nc.close()
    await asyncio.sleep(8)  # the ingestor's and the deleter's time to handle them
    landed = [m for m in observer.heard_on(*STEERED) if not _another_tenant_s_cleanup(*m)]
    assert landed == [], f"the services published {landed[:3]}"
    assert await _profile(victim) == profile
    assert await still_readable(victim)


async def test_a_message_id_is_the_tenant_s_own(
    locked: Locked, victim: KbClient, observer: Observer
) -> None:
    """Finding 2: an id another tenant (or another library's credential) used first does not
    make a raw publisher's message a duplicate; the same id again within the tenant does."""
    msg_id = f"policy-{uuid.uuid4().hex[:8]}"
    attacker = await connect(locked, "t1-all")
    owner = await connect(locked, f"{VICTIM}-all")
    try:
        squat = await attacker.jetstream().publish(
            T.added("t1", LIBRARY),
            _document("t1", "squat", "squat"),
            headers={"Nats-Msg-Id": msg_id},
        )
        assert not squat.duplicate
        body = _document(VICTIM, "raw-policy", "The rawpolicyword is the victim's own.")
        first = await owner.jetstream().publish(
            T.added(VICTIM, LIBRARY), body, headers={"Nats-Msg-Id": msg_id}
        )
        again = await owner.jetstream().publish(
            T.added(VICTIM, LIBRARY), body, headers={"Nats-Msg-Id": msg_id}
        )
    finally:
        await attacker.close()
        await owner.close()
    assert not first.duplicate, "the victim's publish was dropped as another tenant's duplicate"
    assert again.duplicate  # its own re-send is recognised
    for _ in range(120):
        if await victim_finds(victim, "rawpolicyword") == ["raw-policy"]:
            break
        await asyncio.sleep(0.5)
    assert await victim_finds(victim, "rawpolicyword") == ["raw-policy"]


async def test_a_library_s_writer_touches_no_other_library_s_large_texts(
    locked: Locked, observer: Observer
) -> None:
    """Finding 4: a credential of one library cannot remove, roll up or replace what another
    library of its tenant keeps in the store of large texts; that library's claim-checked
    document is indexed whole afterwards."""
    other = "lib-b"
    writer = await client_for(locked, "t1-all")
    writer.claim_check_bytes = 256  # through the store of large texts
    text = "The wholetextword survives its neighbour library's writer. " * 40
    scoped = await connect(locked, "t1-a")
    try:
        answers = [
            await attempt(scoped, "$O.KBUS_BODIES_t1.M.eA", b"{}"),
            await attempt(scoped, "$O.KBUS_BODIES_t1.C.x", b"{}"),
            await attempt(scoped, f"$JS.API.STREAM.PURGE.{T.bodies_stream.name}", b"{}"),
            await attempt(scoped, f"document.body.t1.{other}", b"{}"),
        ]
        elsewhere = f"document.body.t1.{other}"
        for subject in ("$O.KBUS_BODIES_t1.M.eA", elsewhere):
            await scoped.publish(subject, b"{}", headers={"Nats-Rollup": "all"})
        await scoped.flush()
        result = await writer.publish_document(
            library=other, document_id="whole", text=text, wait=True, timeout_s=120
        )
    finally:
        await scoped.close()
        await writer.close()
    assert result.receipt is not None, "the neighbour library's document was lost"
    assert all(a.startswith("refused") or '"error"' in a for a in answers), answers


async def test_no_answer_tells_of_another_tenant_s_messages(
    locked: Locked, victim: KbClient
) -> None:
    """Finding 9: JetStream's expectation headers on the tenant's own subject, pointing at the
    victim's messages and subjects, tell nothing of them (they are dropped: the message is
    stored as any other), and an acknowledgement gives no sequence of the shared stream."""
    owner = await connect(locked, f"{VICTIM}-all")
    try:  # the victim's last message id, which the attacker fishes for
        await owner.jetstream().publish(
            T.added(VICTIM, LIBRARY),
            _document(VICTIM, "fished", "fished"),
            headers={"Nats-Msg-Id": "victim-secret-id"},
        )
    finally:
        await owner.close()
    nc = await connect(locked, "t1-all")
    answers: list[str] = []
    try:
        probes: list[dict[str, str]] = [
            {"Nats-Expected-Last-Msg-Id": "x"},
            {"Nats-Expected-Last-Sequence": "1"},
            {
                "Nats-Expected-Last-Subject-Sequence": "0",
                "Nats-Expected-Last-Subject-Sequence-Subject": T.synced(VICTIM, LIBRARY),
            },
            {"Nats-Expected-Stream": "KBUS_EVIL"},
        ]
        for number, headers in enumerate(probes):
            reply = await nc.request(
                T.added("t1", LIBRARY),
                _document("t1", f"probe-{number}", "probe"),
                headers=headers,
                timeout=5,
            )
            answers.append(reply.data.decode())
    finally:
        await nc.close()
    for answer in answers:
        assert "victim-secret-id" not in answer
        assert VICTIM not in answer
        stored = json.loads(answer)
        assert "error" not in stored, answer  # the headers are not kbus's: dropped, stored
        assert stored["seq"] == 0  # no sequence of the shared stream
