"""Scaling out: three embedder processes on the same durable consumer split the work.

Each process embeds a fair share of the chunks. This shows the mechanism; how much faster more
processes go is the bench's to measure (docs/performance.md), not a timed test's on a shared
machine.
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

pytestmark = pytest.mark.alone

DOCUMENTS = 36
CHUNKS_PER_DOCUMENT = 8
WORDS = ("retrieval", "protein", "cluster", "latency", "membrane", "quorum", "vector", "enzyme")


def _message(i: int) -> bytes:
    return chunks_ready(
        "scale",
        i,
        [
            " ".join(WORDS[(i + p + k) % len(WORDS)] for k in range(70))
            for p in range(CHUNKS_PER_DOCUMENT)
        ],
    )


async def _run(servers: Servers, processes: int, logs: Path) -> list[float]:
    """Chunks each of ``processes`` embedders embedded of the same backlog."""
    topology = Topology(f"scale{processes}{uuid.uuid4().hex[:6]}", 64 * 1024**2)
    nc = await nats.connect(servers.nats_url)
    js = nc.jetstream()
    await declare_streams(js, topology)
    env = service_env(
        servers.nats_url,
        servers.weaviate_http,
        servers.weaviate_grpc,
        prefix=topology.prefix,
        # Four messages held per process: with the default 64, one process could take most of
        # these 36 documents before the others' pulls came round and finish them alone.
        extra={
            "KBUS_EMBEDDER_THREADS": "1",
            "KBUS_EMBEDDER_CONCURRENCY": "4",
            **TEST_STORAGE,
            **UNBOUNDED,
        },
    )
    embedders = [
        start_service("embedder", env, logs / f"run{processes}-{n}") for n in range(processes)
    ]
    try:
        wait_healthy(embedders)
        for i in range(DOCUMENTS):
            await js.publish(
                topology.in_lane("chunks.ready", Lane.BULK, tenant="scale"), _message(i)
            )
        while True:
            if await unsettled(nc, topology, "embedder") == 0:
                break
            await asyncio.sleep(0.05)
        shares = []
        async with httpx.AsyncClient() as http:
            for embedder in embedders:
                text = (await http.get(f"http://127.0.0.1:{embedder.ports['http']}/metrics")).text
                found = re.search(r'kbus_embedder_chunks_total\{model="[^"]+"\} ([0-9.]+)', text)
                shares.append(float(found.group(1)) if found else 0.0)
        return shares
    finally:
        for embedder in embedders:
            embedder.stop()
        await nc.close()


@pytest.mark.e2e
async def test_three_embedders_split_the_work(servers: Servers, tmp_path: Path) -> None:
    shares = await _run(servers, 3, tmp_path)
    total = DOCUMENTS * CHUNKS_PER_DOCUMENT
    print(f"\n3 embedders: split {shares} of {total} chunks")
    assert sum(shares) == total  # every chunk embedded once
    # Each process took at least half of a fair share: none sat idle while others worked.
    assert min(shares) >= 0.5 * total / 3
