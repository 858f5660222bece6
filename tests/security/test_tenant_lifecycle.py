"""A tenant is added and removed while everything runs: its account pushed to the server's
resolver and removed from it, no configuration reloaded, no server or service restarted,
nothing made for it on NATS (its large texts go into the shared store), and another tenant's
searches answered all the while."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os

import nats
import pytest
import weaviate
from kbus_client import KbClient
from kbus_dev.natsauth import Credential, inbox
from kbus_searcher.jobs.setup import tenant_keys
from nats.aio.client import RawCredentials
from weaviate.classes.init import Auth

from tests.security.conftest import (
    CREDENTIALS,
    TOPOLOGY,
    Locked,
    Observer,
    client_for,
)


async def _streams(observer: Observer) -> list[str]:
    reply = await observer.nc.request("$JS.API.STREAM.NAMES", b"{}", timeout=5)
    names: list[str] = json.loads(reply.data).get("streams") or []
    return sorted(names)


async def _refused(locked: Locked, creds: str) -> None:
    """These credentials no longer connect (the server refuses their authorization)."""
    with pytest.raises(Exception):  # noqa: B017, PT011 - authorization refused
        await nats.connect(
            locked.nats_url,
            user_credentials=RawCredentials(creds),
            max_reconnect_attempts=0,
            allow_reconnect=False,
        )


async def _left_of(locked: Locked, observer: Observer, tenant: str) -> list[str]:
    """What a tenant has in the buckets kept by tenant and in Weaviate's collections."""
    left = []
    for bucket, key in tenant_keys(TOPOLOGY, tenant):
        for subject in (f"$KV.{bucket}.{key}", f"$KV.{bucket}.{key}.>"):
            left += list(await observer.stream_subjects(f"KV_{bucket}", subject))
    client = weaviate.use_async_with_local(
        host="127.0.0.1",
        port=locked.weaviate_http,
        grpc_port=locked.weaviate_grpc,
        auth_credentials=Auth.api_key(locked.weaviate_key),
    )
    await client.connect()
    try:
        for name in await client.collections.list_all(simple=True):
            if await client.collections.use(name).tenants.exists(tenant):
                left.append(f"weaviate {name}")
    finally:
        await client.close()
    return left


async def _search_meanwhile(locked: Locked, stop: asyncio.Event) -> tuple[int, list[str]]:
    """Another tenant's searches, one after another until ``stop``: how many, and failures
    (a search the client had to ask again is one: a reply was lost on the way)."""
    kb = await client_for(locked, "t1-all")
    asked, failures = 0, []
    try:
        while not stop.is_set():
            asked += 1
            try:
                reply = await kb.search("anything", libraries=["lib-a"], search_type="keyword")
            except Exception as exc:
                failures.append(f"{type(exc).__name__}: {exc}")
            else:
                if reply.tries > 1:
                    failures.append(f"answered at try {reply.tries}")
            await asyncio.sleep(0.05)  # well within its quota
    finally:
        await kb.close()
    return asked, failures


async def test_a_tenant_added_and_removed_live(locked: Locked) -> None:
    running = {s.name: s.proc.pid for s in [locked.nats]}
    newcomer = Credential("t9-all", "t9")
    stop = asyncio.Event()
    meanwhile = asyncio.create_task(_search_meanwhile(locked, stop))
    await locked.provision([*CREDENTIALS, newcomer])
    creds = locked.creds[newcomer.name]
    observer = await Observer.open(locked)
    streams_before = await _streams(observer)
    kb = await KbClient.connect(
        locked.nats_url,
        tenant="t9",
        user_credentials=RawCredentials(creds),
        inbox_prefix=inbox(newcomer.name),
        max_reconnect_attempts=0,
    )
    kb.claim_check_bytes = 256  # through the shared store of large texts, its own share
    result = await kb.publish_document(
        library="new",
        document_id="hello",
        title="Hello",
        text="The newcomerword tenant arrived without a restart. " * 10,
        wait=True,
        timeout_s=120,
    )
    assert result.receipt is not None
    reply = await kb.search("newcomerword", libraries=["new"], search_type="keyword")
    assert [h.document_id for h in reply.results] == ["hello"]

    assert await _streams(observer) == streams_before  # nothing reserved for the newcomer
    assert await _left_of(locked, observer, "t9")  # what the removal must take

    await locked.provision(CREDENTIALS)
    locked.setup("--remove-tenant=t9")
    held = await observer.stream_subjects(TOPOLOGY.bodies_stream.name, TOPOLOGY.bodies_of("t9"))
    assert held == {}
    assert await _left_of(locked, observer, "t9") == []  # nothing of it anywhere
    assert not [f for f in os.listdir(locked.resolver_dir) if f.endswith(".deleted")]
    await observer.close()
    for _ in range(50):  # the server closes its connections as its account goes
        if not kb.nc.is_connected:
            break
        await asyncio.sleep(0.1)
    assert not kb.nc.is_connected
    await _refused(locked, creds)
    with contextlib.suppress(Exception):
        await kb.close()
    stop.set()
    asked, failures = await meanwhile
    assert asked > 10
    assert failures == [], failures
    assert {s.name: s.proc.pid for s in [locked.nats]} == running
    assert locked.nats.proc.poll() is None


async def test_a_removed_credential_no_longer_connects_and_its_tenant_s_others_do(
    locked: Locked,
) -> None:
    """A credential dropped from the list is revoked (its account's JWT says so); the
    tenant's other credentials keep their connections."""
    extra = Credential("t3-extra", "t3", write=False)
    await locked.provision([*CREDENTIALS, extra])
    creds = locked.creds[extra.name]
    first = await nats.connect(
        locked.nats_url, user_credentials=RawCredentials(creds), inbox_prefix=inbox(extra.name)
    )
    await first.close()
    other = await client_for(locked, "t3-all")
    try:
        await locked.provision(CREDENTIALS)
        await _refused(locked, creds)
        await other.search("anything", libraries=["lib-a"], search_type="keyword")
        assert other.nc.is_connected
    finally:
        await other.close()


async def test_a_narrowed_credential_holds_only_what_it_was_last_given(locked: Locked) -> None:
    """A writer's credential made read-only: the connection made with the old file is closed
    and a kept copy of that file no longer connects; the new file connects, read-only."""
    writer = Credential("t3-narrowed", "t3", libraries=("lib-a",), write=True)
    await locked.provision([*CREDENTIALS, writer])
    old = locked.creds[writer.name]
    live = await nats.connect(
        locked.nats_url, user_credentials=RawCredentials(old), inbox_prefix=inbox(writer.name)
    )
    try:
        await locked.provision([*CREDENTIALS, Credential(writer.name, "t3", ("lib-a",), False)])
        for _ in range(50):  # the server closes the revoked user's connections
            if not live.is_connected:
                break
            await asyncio.sleep(0.1)
        assert not live.is_connected
        await _refused(locked, old)
        assert locked.creds[writer.name] != old
        reader = await client_for(locked, writer.name)
        try:
            await reader.search("anything", libraries=["lib-a"], search_type="keyword")
        finally:
            await reader.close()
    finally:
        with contextlib.suppress(Exception):
            await live.close()
        await locked.provision(CREDENTIALS)


async def test_a_tenant_s_account_changed_under_traffic_loses_no_reply(locked: Locked) -> None:
    """Another tenant's account pushed 40 times (a credential of t3 added, then dropped and
    revoked) while t1 searches: every search answered at its first try, none asked again (a
    configuration reload reset every user's reply permissions and lost replies)."""
    extra = Credential("t3-churn", "t3", write=False)
    stop = asyncio.Event()
    meanwhile = asyncio.create_task(_search_meanwhile(locked, stop))
    try:
        for turn in range(40):
            await asyncio.sleep(0.1)
            held = [*CREDENTIALS, extra] if turn % 2 == 0 else CREDENTIALS
            await locked.provision(held, touched={"t3"})
        await asyncio.sleep(1.0)
    finally:
        stop.set()
    asked, failures = await meanwhile
    assert asked > 20
    assert failures == [], failures


async def test_kbus_s_own_account_changed_under_traffic_answers_every_search(
    locked: Locked,
) -> None:
    """kbus's account JWT pushed six times (the admin user's key rotated, the old one revoked)
    while a tenant searches: every search is answered, and the new admin key works. Not every
    one at its first try: nats-server drops the replies in flight through an account's
    exports when that account's JWT changes (docs/security.md, "Changing credentials"), and
    the client asks again."""
    stop = asyncio.Event()
    meanwhile = asyncio.create_task(_search_meanwhile(locked, stop))
    try:
        for _ in range(6):
            await asyncio.sleep(0.5)
            await locked.provision(CREDENTIALS, rotate=["admin"])
        await asyncio.sleep(1.0)
    finally:
        stop.set()
    asked, failures = await meanwhile
    locked.setup()  # the rotated admin credential works
    assert asked >= 3  # each reply lost costs the client's wait for it before it asks again
    assert [f for f in failures if not f.startswith("answered at try")] == [], failures
