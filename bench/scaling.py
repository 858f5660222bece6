"""Scaling out: 1, 2 and 3 embedder processes (one thread each) on one durable consumer."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path

import nats
from kbus_contract.backlog import stage_backlog
from kbus_contract.topology import Topology
from kbus_dev.services import service_env, start_service, wait_healthy
from kbus_runtime.declaring import declare_streams

from bench.corpus import Corpus

#: The longest the embedders may take to drain a backlog before the run fails (a stuck one).
DRAIN_WITHIN_S = 1_800.0


async def embedder_rate(
    nats_url: str,
    weaviate: tuple[int, int],
    corpus: Corpus,
    processes: int,
    logs: Path,
    threads: int = 1,
    extra: dict[str, str] | None = None,
) -> dict[str, float]:
    """Chunks per second for ``processes`` embedders draining a backlog of chunks.ready.

    ``extra``: more of the embedders' environment."""
    topology = Topology(f"scale{processes}x{uuid.uuid4().hex[:6]}", 256 * 1024**2)
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    await declare_streams(js, topology)
    env = service_env(
        nats_url,
        weaviate[0],
        weaviate[1],
        prefix=topology.prefix,
        extra={
            "KBUS_EMBEDDER_THREADS": str(threads),
            "KBUS_STREAM_MAX_BYTES": str(256 * 1024**2),
            # The embedders alone: nothing takes their vectors on, so the tenant's budget of
            # vectors waiting for the indexer would stop them (fair share's backpressure).
            "KBUS_DEFAULT_BUDGET": json.dumps({"embedding_messages": 1_000_000}),
            **(extra or {}),
        },
    )
    messages = [ready.model_dump_json().encode() for ready in corpus.chunked]
    embedders = [
        start_service("embedder", env, logs / f"scale{processes}-{n}") for n in range(processes)
    ]
    try:
        wait_healthy(embedders)
        started = time.perf_counter()
        for ready, message in zip(corpus.chunked, messages, strict=True):
            await js.publish(topology.of_document("chunks.ready", ready.document), message)
        while True:
            held = await stage_backlog(js, topology, topology.stage("embedder"))
            if held.pending == 0 and held.in_flight == 0:
                break
            if time.perf_counter() - started > DRAIN_WITHIN_S:
                raise TimeoutError(f"the embedders left {held} after {DRAIN_WITHIN_S:.0f} s")
            await asyncio.sleep(0.05)
        seconds = time.perf_counter() - started
    finally:
        for embedder in embedders:
            embedder.stop()
        for stream in topology.streams:
            await js.delete_stream(stream.name)
        await nc.close()
    return {"processes": processes, "seconds": seconds, "chunks_per_s": corpus.chunks / seconds}
