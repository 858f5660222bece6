"""A tenant is added and removed while everything runs: a configuration reload, no server or
service restarted, nothing made for it on NATS (its large texts go into the shared store)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys

import nats
import pytest
from kbus_client import KbClient
from kbus_dev.natsauth import Credential, inbox
from kbus_dev.servers import reload_nats

from tests.security.conftest import (
    CREDENTIALS,
    TOPOLOGY,
    Locked,
    Observer,
    auth_config,
    service_env,
)


async def _streams(observer: Observer) -> list[str]:
    reply = await observer.nc.request("$JS.API.STREAM.NAMES", b"{}", timeout=5)
    names: list[str] = json.loads(reply.data).get("streams") or []
    return sorted(names)


def _setup(locked: Locked, *args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kbus_searcher.jobs.setup", *args],
        env=service_env(locked, "admin"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


async def test_a_tenant_added_and_removed_live(locked: Locked) -> None:
    running = {s.name: s.proc.pid for s in [locked.nats]}
    newcomer = Credential("t9-all", "t9")
    locked.passwords[newcomer.name] = "t9-password-58ab"
    locked.auth.write_text(auth_config(locked.passwords, [*CREDENTIALS, newcomer]))
    reload_nats(locked.nats)
    observer = await Observer.open(locked)
    streams_before = await _streams(observer)
    kb = await KbClient.connect(
        locked.nats_url,
        tenant="t9",
        user=newcomer.name,
        password=locked.passwords[newcomer.name],
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

    locked.auth.write_text(auth_config(locked.passwords, CREDENTIALS))
    reload_nats(locked.nats)
    _setup(locked, "--remove-tenant=t9")
    held = await observer.stream_subjects(TOPOLOGY.bodies_stream.name, TOPOLOGY.bodies_of("t9"))
    assert held == {}
    await observer.close()
    for _ in range(50):  # its connection is closed by the reload
        if not kb.nc.is_connected:
            break
        await asyncio.sleep(0.1)
    assert not kb.nc.is_connected
    with pytest.raises(Exception):  # noqa: B017, PT011 - authorization refused
        await nats.connect(
            locked.nats_url,
            user=newcomer.name,
            password=locked.passwords[newcomer.name],
            max_reconnect_attempts=0,
            allow_reconnect=False,
        )
    with contextlib.suppress(Exception):
        await kb.close()
    assert {s.name: s.proc.pid for s in [locked.nats]} == running
    assert locked.nats.proc.poll() is None
