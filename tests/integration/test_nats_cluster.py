"""kbus's streams on a three-server JetStream cluster: publishes sent while the stream's leader
is SIGKILLed are all stored, once each, and a negative control shows what the re-sending saves.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from kbus_contract.topology import Topology
from kbus_contract.wire import until_acknowledged
from kbus_dev.cluster import start_nats_cluster, urls, wait_for_meta_leader
from kbus_dev.servers import Server
from kbus_runtime.declaring import declare_streams
from nats.aio.client import Client
from nats.errors import ConnectionClosedError
from nats.errors import Error as NatsError
from nats.js.errors import ServiceUnavailableError

from tests.helpers import by_name, kill_stream_leader, led_stream_info

pytestmark = [pytest.mark.integration, pytest.mark.alone]

MESSAGES = 300


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Server]]:
    servers = start_nats_cluster(Path(tmp_path_factory.mktemp("nats-cluster")))
    try:
        yield servers
    finally:
        for server in servers:
            server.stop()


async def _connect(servers: list[Server]) -> Client:
    return await nats.connect(
        urls(servers).split(","), max_reconnect_attempts=-1, reconnect_time_wait=0.2
    )


async def _publish_through_kills(
    servers: list[Server], *, resend: bool, kills: int = 2
) -> tuple[Client, Topology, int]:
    """Publish a ledger of messages while the stream's leader is killed ``kills`` times (and
    restarted); returns how many publishes raised."""
    topology = Topology(prefix=f"c{uuid.uuid4().hex[:8]}", replicas=3, stream_max_bytes=2**26)
    nc = await _connect(servers)
    js = nc.jetstream()
    await declare_streams(js, topology)
    stream = topology.documents_stream.name
    failed = 0
    subject = topology.accepted(topology.added("acme", "ledger"))
    kill_at = {MESSAGES * (k + 1) // (kills + 1) for k in range(kills)}
    for n in range(MESSAGES):
        if n in kill_at:
            await kill_stream_leader(nc, servers, stream)
        body = json.dumps({"n": n}).encode()
        headers = {"Nats-Msg-Id": f"ledger-{n}"}

        async def send(body: bytes = body, headers: dict[str, str] = headers) -> object:
            return await js.publish(subject, body, headers=headers, timeout=1.0)

        try:
            await (until_acknowledged(send, bound_s=30) if resend else send())
        except (NatsError, TimeoutError):
            failed += 1
    await asyncio.to_thread(wait_for_meta_leader, servers)
    return nc, topology, failed


async def _stored(nc: Client, topology: Topology) -> list[dict[str, Any]]:
    """Every message the stream holds, read by sequence (a consumer on an interest stream must
    have the stream's replicas; a direct read needs none)."""
    name = topology.documents_stream.name
    info = await led_stream_info(nc, name)
    js = nc.jetstream()
    first, last = info.state.first_seq, info.state.last_seq
    return [
        json.loads((await js.get_msg(name, seq)).data or b"{}") for seq in range(first, last + 1)
    ]


async def test_every_publish_is_stored_once_through_leader_kills(cluster: list[Server]) -> None:
    nc, topology, failed = await _publish_through_kills(cluster, resend=True)
    try:
        stored = await _stored(nc, topology)
        numbers = [m["n"] for m in stored]
        assert failed == 0
        assert sorted(numbers) == list(range(MESSAGES))  # none lost, none twice
        info = await led_stream_info(nc, topology.documents_stream.name)
        assert info.config.num_replicas == 3
    finally:
        await nc.close()


async def test_without_resending_the_same_kills_fail_publishes(cluster: list[Server]) -> None:
    # The negative control: the publishes that met a stream without a leader fail, and a
    # publisher that does not send them again has lost them.
    nc, topology, failed = await _publish_through_kills(cluster, resend=False)
    try:
        stored = await _stored(nc, topology)
        assert failed > 0
        assert len(stored) == MESSAGES - failed
    finally:
        await nc.close()


async def test_a_pull_consumer_keeps_receiving_after_its_server_and_the_leader_restart(
    cluster: list[Server],
) -> None:
    """nats.py's issue 504 (a pull subscription stops receiving after its server reboots) on
    the pinned versions, consumed as FastStream's pull loop does: a fetch with a timeout, again
    and again, passing over exactly the errors it passes over. Any other error would end
    FastStream's loop, so it fails this test."""
    nc = await _connect(cluster)
    js = nc.jetstream(timeout=5.0)
    name = f"PULL{uuid.uuid4().hex[:8].upper()}"
    subject = f"pull.{name}"
    config = Topology().documents_stream.config
    await js.add_stream(config, name=name, subjects=[subject], num_replicas=3)
    sub = await js.pull_subscribe(subject, durable="worker", stream=name)
    received: list[bytes] = []
    ended: list[BaseException] = []
    passed: list[str] = []

    async def consume() -> None:
        while True:
            try:
                messages = await sub.fetch(10, timeout=1.0)
            except (TimeoutError, ConnectionClosedError, ServiceUnavailableError) as exc:
                passed.append(type(exc).__name__)
                # While the consumer has no leader each fetch gets a 503 at once (thousands
                # a second). FastStream's loop asks again without a pause; without this one,
                # the test's own timeouts were starved and it hung.
                await asyncio.sleep(0)
                continue
            except Exception as exc:  # would end FastStream's loop
                ended.append(exc)
                raise
            for msg in messages:
                received.append(msg.data)
                await msg.ack()

    consumer = asyncio.create_task(consume())
    try:
        connected = next(s for s in cluster if str(s.ports["client"]) in str(nc.connected_url))
        info = await led_stream_info(nc, name)
        assert info.cluster is not None
        leader = by_name(cluster, str(info.cluster.leader))
        for n, victim in enumerate((connected, leader)):
            victim.kill()
            await asyncio.sleep(1.0)
            victim.restart()
            await asyncio.to_thread(wait_for_meta_leader, cluster)
            body = f"after restart {n}".encode()
            headers = {"Nats-Msg-Id": f"{name}-{n}"}
            await until_acknowledged(functools.partial(js.publish, subject, body, headers=headers))
            async with asyncio.timeout(60):
                while body not in received:
                    assert not ended, ended
                    await asyncio.sleep(0.2)
    finally:
        consumer.cancel()
        await nc.close()
        print("passed over:", collections.Counter(passed))
    assert not ended
