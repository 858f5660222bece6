"""A search held by a searcher replica that stops and is killed with it (its connection gone,
no error ever reaching the client) is answered by another replica through a hedge, while the
same searches of a client that does not hedge wait out their try: both clients side by side in
one run."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest
from kbus_client import KbClient, Retry
from kbus_dev.services import start_service, wait_healthy

from tests.conftest import Servers
from tests.helpers import own_services

pytestmark = pytest.mark.e2e

#: Searches a second per client, and how long the replica holds what reaches it.
PACE_S, HELD_S = 0.05, 0.5


async def _steady(kb: KbClient, seconds: float) -> list[float]:
    """Searches sent every PACE_S for ``seconds``, each on its own; their times to answer."""

    async def one() -> float:
        started = time.monotonic()
        await kb.search("hedge note", libraries=["notes"], k=3)
        return time.monotonic() - started

    asked = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        asked.append(asyncio.create_task(one()))
        await asyncio.sleep(PACE_S)
    return list(await asyncio.gather(*asked))


async def test_a_search_lost_with_a_replica_is_answered_by_a_hedge(
    servers: Servers, tmp_path: Path
) -> None:
    weaviate = (servers.weaviate_http, servers.weaviate_grpc)
    with own_services(servers.nats_url, weaviate, tmp_path, "hedge") as (env, running):
        second = start_service("searcher", env, tmp_path / "second", label="searcher-2")
        running["searcher-2"] = second
        wait_healthy([second])
        prefix = env["KBUS_BUS_PREFIX"]
        hedged = await KbClient.connect(servers.nats_url, prefix=prefix, tenant="acme")
        plain = await KbClient.connect(
            servers.nats_url, prefix=prefix, tenant="acme", retry=Retry(hedge=None)
        )
        async with hedged, plain:
            await hedged.publish_document(
                library="notes", document_id="n", text="A hedge note.", wait=True
            )
            for kb in (hedged, plain):  # the answer times a hedge waits for
                await _steady(kb, 1.5)
            held = asyncio.gather(_steady(hedged, 2 * HELD_S), _steady(plain, 2 * HELD_S))
            await asyncio.sleep(HELD_S / 2)
            second.proc.send_signal(signal.SIGSTOP)  # holds what reaches it ...
            await asyncio.sleep(HELD_S)
            second.proc.kill()  # ... and loses it with its connection
            with_hedges, without = await held
    assert hedged.hedger is not None
    assert hedged.hedger.sent.get("kb.search", 0) >= 1
    # The plain client's searches that reached the stopped replica waited out their try;
    # the hedged client's were asked again after about its 95th percentile.
    assert max(with_hedges) * 3 < max(without), (sorted(with_hedges)[-5:], sorted(without)[-5:])


async def test_a_query_embedding_lost_with_an_embedder_is_asked_of_another(
    servers: Servers, tmp_path: Path
) -> None:
    """The same for the searcher's own request: one of two embedders holds the query
    embeddings that reach it and is killed with them; the searcher's hedge asks the other, so
    a client that does not hedge itself gets every search well within one try of its wait."""
    weaviate = (servers.weaviate_http, servers.weaviate_grpc)
    with own_services(servers.nats_url, weaviate, tmp_path, "hedgeembed") as (env, running):
        second = start_service("embedder", env, tmp_path / "second", label="embedder-2")
        running["embedder-2"] = second
        wait_healthy([second])
        retry = Retry(hedge=None)
        plain = await KbClient.connect(
            servers.nats_url, prefix=env["KBUS_BUS_PREFIX"], tenant="acme", retry=retry
        )
        async with plain:
            await plain.publish_document(
                library="notes", document_id="n", text="A hedge note.", wait=True
            )
            await _steady(plain, 2.0)  # the searcher's answer times from the embedders
            held = asyncio.create_task(_steady(plain, 2 * HELD_S))
            await asyncio.sleep(HELD_S / 2)
            second.proc.send_signal(signal.SIGSTOP)
            await asyncio.sleep(HELD_S)
            second.proc.kill()
            times = await held
    # Without the searcher's hedge, a search whose embedding the stopped embedder held waits
    # out most of the client's try (the searcher's budget) before it is asked again.
    assert max(times) * 4 < retry.try_s(plain.timeout_s), sorted(times)[-5:]
