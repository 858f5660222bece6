"""Max deliveries: a message no delivery ever settled is dead-lettered from the advisory."""

from __future__ import annotations

import asyncio
import contextlib
import json

import nats.errors
from faststream import TestApp
from kbus_contract.topology import Topology, work_consumer
from kbus_runtime.declaring import declare_streams
from kbus_runtime.settings import BusSettings, StoreSettings
from kbus_searcher.app import create_app
from kbus_searcher.settings import SearcherSettings
from nats.aio.client import Client

from tests.helpers import document, find_in_stream


async def _wait_messages(nc: Client, stream: str, count: int, timeout_s: float = 20.0) -> None:
    js = nc.jetstream()
    for _ in range(int(timeout_s * 10)):
        if (await js.stream_info(stream)).state.messages == count:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{stream} did not reach {count} messages")


async def test_a_message_that_kills_every_worker_is_dead_lettered_while_the_handler_was_down(
    nc: Client, bus: BusSettings, store_settings: StoreSettings
) -> None:
    bus = bus.model_copy(update={"max_deliver": 2, "ack_wait_s": 1.5})
    topology: Topology = bus.topology
    js = nc.jetstream()
    await declare_streams(js, topology)
    # An "ingestor" that takes the message and dies without settling it, twice.
    config = work_consumer(topology.ingestor_durable, ack_wait_s=1.5, max_deliver=2)
    config.filter_subject = topology.document_added
    await js.add_consumer(topology.documents_stream.name, config)
    poison = document("acme", "lib", "poison", text="this one crashes the ingestor")
    await js.publish(topology.accepted(topology.added("acme", "lib")), json.dumps(poison).encode())
    sub = await js.pull_subscribe_bind(
        topology.ingestor_durable,
        topology.documents_stream.name,
        inbox_prefix=bus.inbox_prefix.encode() + b".",
    )
    for _ in range(2):
        (taken,) = await sub.fetch(1, timeout=5)
        assert taken.metadata.num_delivered in (1, 2)
        await asyncio.sleep(2.0)  # crashed: no ack, no nak; the ack wait runs out
    # A worker asks again: the server has nothing left to deliver and gives the message up.
    with contextlib.suppress(nats.errors.TimeoutError):
        await sub.fetch(1, timeout=2)
    # The advisory is in its stream although nothing handles it yet.
    await _wait_messages(nc, topology.advisories_stream.name, 1)
    assert (await js.stream_info(topology.documents_stream.name)).state.messages == 1

    app = create_app(SearcherSettings(bus=bus, store=store_settings, serve=False))
    async with TestApp(app):
        letter = await find_in_stream(
            nc,
            topology.dead_letter("ingestor", "acme", "lib"),
            {"document_id": "poison"},
            timeout_s=20,
        )
        failed = await find_in_stream(
            nc, topology.document_failed, {"document_id": "poison"}, timeout_s=20
        )
        await _wait_messages(nc, topology.documents_stream.name, 0)
        await _wait_messages(nc, topology.advisories_stream.name, 0)
    assert letter["stage"] == "ingestor"
    assert letter["code"] == "max_deliveries"
    assert letter["deliveries"] == 2
    assert "crashed or hung" in letter["reason"]
    assert json.loads(letter["original"])["text"] == "this one crashes the ingestor"
    assert failed["stage"] == "ingestor"
