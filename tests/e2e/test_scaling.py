"""Scaling out: one, then three embedder processes on the same durable consumer.

The work splits between the processes (each embeds a share of the chunks) and the throughput
rises. This shows the mechanism; docs/performance.md has the benchmark's measured ratios.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from pathlib import Path

import httpx
import nats
import pytest
from kbus_dev.services import service_env, start_service, wait_healthy
from kbus_shared.bus import declare_streams
from kbus_shared.topology import Topology

from tests.conftest import Servers
from tests.helpers import chunks_ready

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


async def _run(servers: Servers, processes: int, logs: Path) -> tuple[float, list[float]]:
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
            "KBUS_STREAM_MAX_BYTES": str(64 * 1024**2),
        },
    )
    embedders = [
        start_service("embedder", env, logs / f"run{processes}-{n}") for n in range(processes)
    ]
    try:
        wait_healthy(embedders)
        started = time.perf_counter()
        for i in range(DOCUMENTS):
            await js.publish(topology.chunks_ready, _message(i))
        while True:
            info = await js.consumer_info(topology.chunks_stream.name, topology.embedder_durable)
            if info.num_pending == 0 and info.num_ack_pending == 0:
                break
            await asyncio.sleep(0.05)
        elapsed = time.perf_counter() - started
        shares = []
        async with httpx.AsyncClient() as http:
            for embedder in embedders:
                text = (await http.get(f"http://127.0.0.1:{embedder.ports['http']}/metrics")).text
                found = re.search(r'kbus_embedder_chunks_total\{model="[^"]+"\} ([0-9.]+)', text)
                shares.append(float(found.group(1)) if found else 0.0)
        return DOCUMENTS * CHUNKS_PER_DOCUMENT / elapsed, shares
    finally:
        for embedder in embedders:
            embedder.stop()
        await nc.close()


@pytest.mark.e2e
async def test_three_embedders_split_the_work_and_go_faster(
    servers: Servers, tmp_path: Path
) -> None:
    one_rate, one_shares = await _run(servers, 1, tmp_path)
    three_rate, three_shares = await _run(servers, 3, tmp_path)
    total = DOCUMENTS * CHUNKS_PER_DOCUMENT
    print(
        f"\n1 embedder: {one_rate:.1f} chunks/s; 3 embedders: {three_rate:.1f} chunks/s "
        f"({three_rate / one_rate:.2f}x); split {three_shares}"
    )
    assert one_shares == [total]
    assert sum(three_shares) == total
    assert all(share > 0 for share in three_shares)
    # One thread each on a two-core machine: a third process adds no core, two add one.
    assert three_rate > 1.2 * one_rate
