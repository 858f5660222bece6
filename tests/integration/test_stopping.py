"""A replica told to stop (SIGTERM: a rolling upgrade, a scale-down) answers every request it
was already given, over the real bus; only new requests go to the other replicas."""

from __future__ import annotations

import asyncio

import nats
from kbus_contract import StatsReply
from kbus_contract.topology import Topology
from kbus_runtime.answering import Inbound, serve
from nats.aio.client import Client
from pydantic import BaseModel

from tests.helpers import request_when_served


async def test_a_stopping_replica_answers_what_it_was_given(nc: Client, topology: Topology) -> None:
    started = asyncio.Event()

    async def slow(inbound: Inbound) -> BaseModel:
        started.set()
        await asyncio.sleep(0.3)
        return StatsReply(tenant="t", libraries=())

    replica = await nats.connect(nc.connected_url.geturl() if nc.connected_url else "")
    try:
        served = await serve(
            replica, topology, {"kb.stats": slow}, version="0.0.1", description="t", concurrency=1
        )
        subject = topology.every("kb.stats").replace("*", "t")
        first = asyncio.create_task(request_when_served(nc, subject, b"{}", timeout_s=5.0))
        await started.wait()
        # One is being answered; three more wait in this replica's subscription.
        rest = [asyncio.create_task(nc.request(subject, b"{}", timeout=5.0)) for _ in range(3)]
        await nc.flush()
        await asyncio.sleep(0.05)
        await served.stop()
        replies = await asyncio.gather(first, *rest, return_exceptions=True)
    finally:
        await replica.close()
    assert [type(r).__name__ for r in replies] == ["Msg"] * 4
