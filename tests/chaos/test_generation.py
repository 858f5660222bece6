"""Chaos through the generation stage: the generator SIGKILLed while it writes descriptions with
the real local model. Every document must still be indexed once, each chunk with its matching
text, nothing dead-lettered, and no chunk generated again once its texts were kept (the cache
takes one write per chunk: a chunk generated twice would be written twice)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest
from kbus_client import KbClient
from kbus_contract import LibraryProfile, Matching, MatchingKind
from kbus_contract.topology import Topology
from kbus_dev.servers import Server
from nats.js.kv import KeyValue

from tests.conftest import Servers
from tests.helpers import own_services

pytestmark = pytest.mark.xdist_group("chaos")  # beside the other tests, after the chaos runs

PRODUCTS = {
    "kettle": "Kettle K1. 1.7 l, 3000 W, auto shut-off.",
    "toaster": "Toaster T2. Two slots, seven browning levels, crumb tray.",
    "blender": "Blender B5. 1.5 l jar, 900 W, ice-crush program.",
    "grinder": "Coffee grinder G3. Conical burrs, 40 grind settings.",
    "runner": "Trail runner 2. Mesh upper, lugged outsole, Gore-Tex membrane.",
    "sneaker": "City sneaker. White leather upper, cupsole, cotton laces.",
    "boot": "Winter boot X200. Fleece lining, rated to -20 C, rubber shell.",
    "sandal": "Flip-flop Pool. EVA footbed, quick-dry strap.",
}
DESCRIBED = LibraryProfile(
    matching=Matching(
        kind=MatchingKind.DESCRIPTION,
        prompt="Describe the product for a shopper in one sentence: what it is and what it is for.",
    )
)


@pytest.fixture
def own_stack(
    servers: Servers, llm: str, tmp_path: Path
) -> Iterator[tuple[dict[str, str], dict[str, Server]]]:
    extra = {
        "KBUS_LLM_URL": llm,
        "KBUS_LLM_TIMEOUT_S": "300",
        # A killed generator's message comes back soon.
        "KBUS_ACK_WAIT_S": "10",
    }
    weaviate = (servers.weaviate_http, servers.weaviate_grpc)
    with own_services(servers.nats_url, weaviate, tmp_path, "gen", extra) as stack:
        yield stack


async def _kill_when_kept(generator: Server, kv: KeyValue, kept: int, timeout_s: float) -> None:
    """SIGKILL the generator once the cache holds ``kept`` chunks' texts; start it again."""
    deadline = time.monotonic() + timeout_s
    while (await kv.status()).values < kept:
        assert time.monotonic() < deadline, f"fewer than {kept} chunks generated in time"
        await asyncio.sleep(0.2)
    generator.kill()
    await asyncio.sleep(1.0)
    generator.restart()


async def test_generator_kills_lose_nothing_and_generate_nothing_twice(
    own_stack: tuple[dict[str, str], dict[str, Server]], servers: Servers
) -> None:
    env, running = own_stack
    topology = Topology(env["KBUS_BUS_PREFIX"])
    nc = await nats.connect(servers.nats_url)
    kb = KbClient(nc, prefix=topology.prefix, tenant="shop")
    try:
        await kb.profile("described", set_to=DESCRIBED)
        publishes = [
            asyncio.create_task(
                kb.publish_document(
                    library="described",
                    document_id=name,
                    title=name,
                    text=text,
                    wait=True,
                    timeout_s=600,
                )
            )
            for name, text in PRODUCTS.items()
        ]
        kv = await nc.jetstream().key_value(topology.generated_kv.bucket)
        for kept in (2, 5):
            await _kill_when_kept(running["generator"], kv, kept, timeout_s=300)
        receipts = await asyncio.gather(*publishes)  # a dead letter would raise here
        status = await kv.status()
        [stats] = [s for s in (await kb.stats()).libraries if s.library == "described"]
        descriptions = []
        for key in await kv.keys():
            [text] = json.loads((await kv.get(key)).value or b"[]")
            descriptions.append(text)
        found = 0
        for text in descriptions:
            reply = await kb.search(text, libraries=["described"], min_evidence=-1, rerank=False)
            found += any(hit.matched == text for hit in reply.results)
    finally:
        await nc.close()
    assert all(r.receipt is not None for r in receipts)
    assert (stats.documents, stats.chunks) == (len(PRODUCTS), len(PRODUCTS))
    # One write per chunk: none was generated again after its text was kept.
    assert status.values == status.stream_info.state.last_seq == len(PRODUCTS)
    assert found == len(PRODUCTS)  # each chunk's description is matched beside it
