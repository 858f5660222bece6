"""The client asks again after a retryable error, within its wait, and never after a final one."""

from __future__ import annotations

import asyncio
from pathlib import Path

import nats
import pytest
from faststream import TestApp
from kbus_client import KbClient, KbError, Retry
from kbus_contract import StatsReply
from kbus_contract.errors import ErrorCode
from kbus_contract.requests import ErrorInfo, ErrorReply
from kbus_contract.tenancy import grant_token
from kbus_contract.topology import Topology
from kbus_dev.servers import start_nats
from kbus_runtime.settings import BusSettings, StoreSettings
from kbus_searcher.app import create_app
from kbus_searcher.settings import SearcherSettings
from nats.aio.client import Client
from nats.aio.msg import Msg


def _failure(code: str, retryable: bool) -> bytes:
    info = ErrorInfo(code=code, message="not now", stage="searcher", retryable=retryable)
    return ErrorReply(error=info).model_dump_json().encode()


async def _answering(nc: Client, topology: Topology, replies: list[bytes]) -> list[Msg]:
    """A stand-in searcher on acme's stats subject: answers ``replies`` in turn (the last one
    again after that); the requests it received."""
    seen: list[Msg] = []

    async def answer(msg: Msg) -> None:
        seen.append(msg)
        await msg.respond(replies[min(len(seen), len(replies)) - 1])

    await nc.subscribe(topology.asked("kb.stats", "acme", grant_token(None)), cb=answer)
    return seen


async def test_a_retryable_error_is_asked_again_and_a_final_one_is_not(
    nc: Client, topology: Topology
) -> None:
    ok = StatsReply(tenant="acme", libraries=()).model_dump_json().encode()
    seen = await _answering(nc, topology, [_failure(ErrorCode.STORE_ERROR, True), ok])
    client = KbClient(nc, prefix=topology.prefix, tenant="acme", timeout_s=5)
    assert (await client.stats()).tenant == "acme"
    assert len(seen) == 2


async def test_a_final_error_is_raised_after_one_try(nc: Client, topology: Topology) -> None:
    seen = await _answering(nc, topology, [_failure(ErrorCode.INVALID, False)])
    client = KbClient(nc, prefix=topology.prefix, tenant="acme", timeout_s=5)
    with pytest.raises(KbError) as raised:
        await client.stats()
    assert (raised.value.code, raised.value.tries) == (ErrorCode.INVALID, 1)
    assert len(seen) == 1


async def test_a_search_waits_out_a_searcher_restart_and_says_how_many_tries(
    nc: Client, bus: BusSettings, store_settings: StoreSettings, topology: Topology
) -> None:
    client = KbClient(nc, prefix=topology.prefix, tenant="acme", timeout_s=60)
    once = KbClient(nc, prefix=topology.prefix, tenant="acme", timeout_s=2, retry=None)
    app = create_app(SearcherSettings(bus=bus, store=store_settings))
    asked = {"libraries": ["a"], "query": "q", "search_type": "keyword", "rerank": False}
    with pytest.raises(KbError) as raised:
        await once.search(**asked)  # type: ignore[arg-type]
    assert (raised.value.code, raised.value.tries) == (ErrorCode.SEARCHER_UNAVAILABLE, 1)

    searching = asyncio.create_task(client.search(**asked))  # type: ignore[arg-type]
    await asyncio.sleep(1.0)
    assert not searching.done()
    async with TestApp(app):
        reply = await searching
    assert reply.searched
    assert reply.tries > 1


async def test_a_request_lost_with_its_server_is_asked_again_when_the_client_reconnects(
    tmp_path: Path,
) -> None:
    """The NATS server a request went through is SIGKILLed before the answer (the stand-in
    holds the first request unanswered, as a reply lost with the server) and started again:
    the client asks again as soon as it reconnects. Each try given the whole wait (nothing
    held back), a client that waited out its try would time out instead."""
    server = start_nats(tmp_path / "nats")
    url = f"nats://127.0.0.1:{server.ports['client']}"
    topology = Topology("")
    responder = await nats.connect(url, reconnect_time_wait=0.2, max_reconnect_attempts=-1)
    held = asyncio.Event()
    seen: list[Msg] = []

    async def answer(msg: Msg) -> None:
        seen.append(msg)
        if len(seen) == 1:
            held.set()  # lost with the server
            return
        await msg.respond(StatsReply(tenant="acme", libraries=()).model_dump_json().encode())

    await responder.subscribe(topology.asked("kb.stats", "acme", grant_token(None)), cb=answer)
    whole_try = Retry(hold_back_share=0.0)
    client = await KbClient.connect(
        url,
        tenant="acme",
        timeout_s=20,
        retry=whole_try,
        reconnect_time_wait=0.2,
        max_reconnect_attempts=-1,
    )
    try:
        asking = asyncio.create_task(client.stats())
        await asyncio.wait_for(held.wait(), 10)
        server.kill()
        server.restart()
        reply = await asking
        assert reply.tenant == "acme"
        assert len(seen) >= 2
    finally:
        await client.close()
        await responder.close()
        server.stop()
