"""With a backlog waiting, the embedder's model calls are full.

The embedder gathers the chunks of the messages it holds into model calls of up to
``KBUS_EMBEDDER_GATHER`` texts (64 by default). If it holds too few messages at once, every
call is short and waits for its flush deadline, and the encoder idles between calls while the
finished messages are published and new ones fetched (docs/performance.md, run AD).
"""

from __future__ import annotations

import asyncio
import re
import uuid
from pathlib import Path

import httpx
import nats
import pytest
from kbus_contract.lanes import Lane
from kbus_contract.topology import Topology
from kbus_dev.services import service_env, start_service, wait_healthy
from kbus_runtime.declaring import declare_streams

from tests.conftest import Servers
from tests.helpers import TEST_STORAGE, UNBOUNDED, chunks_ready, unsettled

DOCUMENTS = 96
CHUNKS_PER_DOCUMENT = 4  # about SciFact's mean (19,979 chunks of 5,183 documents)
WORDS = ("retrieval", "protein", "cluster", "latency", "membrane", "quorum", "vector", "enzyme")


def _message(run: str, i: int) -> bytes:
    # Unique texts: none comes from the embedding cache or is deduplicated.
    return chunks_ready(
        "calls",
        i,
        [
            f"{run} {i} {p} " + " ".join(WORDS[(i + p + k) % len(WORDS)] for k in range(40))
            for p in range(CHUNKS_PER_DOCUMENT)
        ],
    )


def _metric(text: str, name: str) -> float:
    found = re.search(rf"^{re.escape(name)} ([0-9.e+]+)$", text, re.MULTILINE)
    assert found, f"{name} not in /metrics"
    return float(found.group(1))


@pytest.mark.e2e
async def test_a_backlog_is_embedded_in_full_model_calls(servers: Servers, tmp_path: Path) -> None:
    run = uuid.uuid4().hex[:8]
    topology = Topology(f"calls{run}", 64 * 1024**2)
    nc = await nats.connect(servers.nats_url)
    js = nc.jetstream()
    await declare_streams(js, topology)
    for i in range(DOCUMENTS):
        await js.publish(
            topology.in_lane("chunks.ready", Lane.BULK, tenant="calls"), _message(run, i)
        )
    env = service_env(
        servers.nats_url,
        servers.weaviate_http,
        servers.weaviate_grpc,
        prefix=topology.prefix,
        # 64 held, 512 texts: enough for a model call running and the next full. The default
        # holds 32 (a newly fetched document waits behind fewer, docs/tuning.md), and made 7
        # of 10 calls short of 48 texts on these 8-chunk documents.
        extra={**TEST_STORAGE, **UNBOUNDED, "KBUS_EMBEDDER_CONCURRENCY": "64"},
    )
    embedder = start_service("embedder", env, tmp_path)
    try:
        wait_healthy([embedder])
        while True:
            if await unsettled(nc, topology, "embedder") == 0:
                break
            await asyncio.sleep(0.05)
        async with httpx.AsyncClient() as http:
            text = (await http.get(f"http://127.0.0.1:{embedder.ports['http']}/metrics")).text
    finally:
        embedder.stop()
        for stream in topology.streams:
            await js.delete_stream(stream.name)
        await nc.close()
    calls = _metric(text, "kbus_embedder_call_texts_count")
    texts = _metric(text, "kbus_embedder_call_texts_sum")
    short = _metric(text, 'kbus_embedder_call_texts_bucket{le="48.0"}')
    print(f"\n{calls:.0f} model calls for {texts:.0f} texts, {short:.0f} of 48 texts or fewer")
    assert texts == DOCUMENTS * CHUNKS_PER_DOCUMENT
    # The first calls may go before the subscription has fetched enough, the last gets the rest;
    # the others are full. Holding 8 messages, all 13 calls had 32 texts or fewer.
    assert calls - short >= 4
