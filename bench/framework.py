"""The bus and framework floor: what three stages cost per document before any of kbus's work.

The same messages (the run's documents as kbus's contracts serialise them: ``document.added``,
``chunks.ready``, ``embeddings.ready`` and the ``document.indexed`` receipt) go through three
stages on kbus's own streams and durable consumers, on a nats-server of their own. A stage
fetches a message, publishes the next one awaiting the stream's acknowledgement, and acks: no
chunking, no model, no cache, no store, and but in the last variant no parsing. The variants take
turns round by round, the order reversed every other round:

- nats-py, fetches of 16 handled side by side (the least a Python client can do);
- nats-py, fetches of one into 16 workers (kbus's fetch pattern without FastStream);
- FastStream as kbus wires it: ``make_broker`` (with FastStream's Prometheus middleware) and
  ``work_subscriber`` (fetches of one, 16 workers, manual acks);
- the same with fetches of 16 (on an idle consumer nats-py's fetch then waits for the batch);
- FastStream as kbus wires it, the handler also parsing each message into its contract and
  serialising the next one (``Stage.settle``'s decode and ``Stage.publish``'s dump): the bus,
  serialisation and framework alone, which is what the 2% target is about.

``python -m bench.framework`` runs it alone; ``python -m bench`` runs it after the pipeline.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
import numpy as np
from kbus_contract import (
    ChunksReady,
    DocumentAdded,
    DocumentIndexed,
    EmbeddedChunk,
    EmbeddingsReady,
)
from kbus_contract.lanes import Lane
from kbus_contract.topology import Topology, work_consumer
from kbus_contract.wire import decode
from kbus_dev.servers import Server, start_nats
from kbus_runtime.bus import JSON_HEADERS, BusMessage, make_broker, work_subscriber
from kbus_runtime.declaring import declare_streams
from kbus_runtime.settings import BusSettings
from nats.js import JetStreamContext
from prometheus_client import CollectorRegistry
from pydantic import BaseModel

from bench import corpus as corpora
from bench import report
from bench.pipeline import cpu_seconds
from bench.report import save

WORKERS = 16
DIMENSION = 384


@dataclass(frozen=True)
class Variant:
    """How a variant's stages consume: the client, messages per fetch, whether they parse."""

    name: str
    faststream: bool
    fetch: int
    contracts: bool = False


VARIANTS = (
    Variant("nats-py, fetch 16", faststream=False, fetch=16),
    Variant("nats-py, fetch 1", faststream=False, fetch=1),
    Variant(report.KBUS_WIRING, faststream=True, fetch=1),
    Variant("FastStream, fetch 16", faststream=True, fetch=16),
    Variant(f"{report.KBUS_WIRING} + contracts", faststream=True, fetch=1, contracts=True),
)


class Meter:
    """CPU of this process and of nats-server while a stage runs, from its subscription on.

    FastStream may handle messages before ``broker.start()`` returns, so every variant's meter
    runs from before its subscription is made to its last ack.
    """

    def __init__(self, server: Server) -> None:
        self.server = server
        self.client_s = self.server_s = 0.0
        self._started = (0.0, 0.0)

    def start(self) -> None:
        self._started = (time.process_time(), cpu_seconds(self.server))

    def stop(self) -> None:
        self.client_s += time.process_time() - self._started[0]
        self.server_s += cpu_seconds(self.server) - self._started[1]


@dataclass(frozen=True)
class Hop:
    """One stage: the stream and durable it consumes, its contract, where it publishes, what."""

    name: str
    stream: str
    subject: str
    durable: str
    contract: type[BaseModel]
    out_subject: str
    out_stream: str
    models: list[BaseModel]
    #: ``models`` serialised, once for the whole run.
    bodies: list[bytes]
    #: The receipt carries a message id, as the indexer's does.
    msg_ids: bool = False


def messages(data: corpora.Corpus) -> dict[str, list[BaseModel]]:
    """Each document's messages on the three subjects and its receipt, as kbus makes them."""
    rng = np.random.default_rng(0)
    out: dict[str, list[BaseModel]] = {"added": [], "chunks": [], "embeddings": [], "indexed": []}
    for doc, ready in zip(data.documents, data.chunked, strict=True):
        out["added"].append(corpora.as_added(doc, "bench", "bench"))
        out["chunks"].append(ready)
        out["embeddings"].append(
            EmbeddingsReady(
                document=ready.document,
                model="bench",
                dimension=DIMENSION,
                total_chunks=len(ready.chunks),
                chunks=tuple(
                    EmbeddedChunk(**c.model_dump(), vector=rng.random(DIMENSION, dtype=np.float32))
                    for c in ready.chunks
                ),
            )
        )
        out["indexed"].append(
            DocumentIndexed(
                tenant="bench",
                library="bench",
                document_id=ready.document.document_id,
                version=ready.document.version,
                chunk_count=len(ready.chunks),
                model="bench",
            )
        )
    return out


def hops(
    topology: Topology, models: dict[str, list[BaseModel]], bodies: dict[str, list[bytes]]
) -> list[Hop]:
    t = topology
    return [
        Hop(
            "ingestor",
            t.documents_stream.name,
            t.document_added,
            t.ingestor_durable,
            DocumentAdded,
            t.in_lane("chunks.ready", Lane.BULK, tenant="bench"),
            t.chunks_stream.name,
            models["chunks"],
            bodies["chunks"],
        ),
        Hop(
            "embedder",
            t.chunks_stream.name,
            t.chunks_ready,
            t.embedder_durable,
            ChunksReady,
            t.in_lane("embeddings.ready", Lane.BULK, tenant="bench"),
            t.embeddings_stream.name,
            models["embeddings"],
            bodies["embeddings"],
        ),
        Hop(
            "indexer",
            t.embeddings_stream.name,
            t.embeddings_ready,
            t.indexer_durable,
            EmbeddingsReady,
            t.indexed("bench", "bench"),
            t.receipts_stream.name,
            models["indexed"],
            bodies["indexed"],
            msg_ids=True,
        ),
    ]


def _headers(hop: Hop, n: int) -> dict[str, str]:
    return {**JSON_HEADERS, "Nats-Msg-Id": f"indexed:{n}"} if hop.msg_ids else dict(JSON_HEADERS)


async def raw_stage(
    js: JetStreamContext, topology: Topology, hop: Hop, batch: int, meter: Meter
) -> None:
    """One stage with nats-py alone: ``batch`` messages a fetch, handled side by side."""
    meter.start()
    sub = await js.pull_subscribe(
        hop.subject,
        durable=hop.durable,
        stream=hop.stream,
        config=work_consumer(
            hop.durable, ack_wait_s=topology.ack_wait_s, max_deliver=topology.max_deliver
        ),
        inbox_prefix=topology.pull_inbox,
    )
    sent = itertools.count()

    async def one(message: Any) -> None:
        n = next(sent)
        body = hop.bodies[n % len(hop.bodies)]
        await js.publish(hop.out_subject, body, stream=hop.out_stream, headers=_headers(hop, n))
        await message.ack()

    total = len(hop.bodies)
    if batch > 1:
        done = 0
        while done < total:
            fetched = await sub.fetch(min(batch, total - done), timeout=5)
            await asyncio.gather(*(one(m) for m in fetched))
            done += len(fetched)
    else:
        queue: asyncio.Queue[Any] = asyncio.Queue(WORKERS)

        async def worker() -> None:
            while (message := await queue.get()) is not None:
                await one(message)

        workers = [asyncio.create_task(worker()) for _ in range(WORKERS)]
        for _ in range(total):
            for message in await sub.fetch(1, timeout=5):
                await queue.put(message)
        for _ in workers:
            await queue.put(None)
        await asyncio.gather(*workers)
    meter.stop()
    await sub.unsubscribe()


async def faststream_stage(
    url: str, topology: Topology, hop: Hop, variant: Variant, meter: Meter
) -> None:
    """One stage as kbus wires its subscribers, with a handler that only publishes and acks.

    With ``variant.contracts``, the handler also parses the message into its contract and
    serialises the next one, as ``Stage.settle`` and ``Stage.publish`` do.
    """
    broker = make_broker(BusSettings(nats_url=url), CollectorRegistry(), hop.name, "WARNING")
    subscriber = work_subscriber(
        broker,
        topology,
        hop.subject,
        next(s for s in topology.streams if s.name == hop.stream),
        hop.durable,
        max_workers=WORKERS,
        fetch_batch=variant.fetch,
        title=hop.name,
        description="publish and ack",
    )
    sent = itertools.count()
    done = asyncio.Event()

    @subscriber
    async def handle(message: BusMessage) -> None:
        n = next(sent)
        if variant.contracts:
            decode(message.body, hop.contract)
            body = hop.models[n % len(hop.models)].model_dump_json().encode()
        else:
            body = hop.bodies[n % len(hop.bodies)]
        await broker.publish(body, hop.out_subject, stream=hop.out_stream, headers=_headers(hop, n))
        await message.ack()
        if n + 1 >= len(hop.models):
            done.set()

    meter.start()
    await broker.start()
    try:
        await done.wait()
        meter.stop()
    finally:
        await broker.stop()


StageRun = Callable[[Hop, Meter], Awaitable[None]]


def _stage(variant: Variant, url: str, js: JetStreamContext, topology: Topology) -> StageRun:
    if variant.faststream:
        return lambda hop, meter: faststream_stage(url, topology, hop, variant, meter)
    return lambda hop, meter: raw_stage(js, topology, hop, variant.fetch, meter)


async def measure(
    data: corpora.Corpus, server: Server, rounds: int = 4, variants: tuple[Variant, ...] = VARIANTS
) -> dict[str, Any]:
    """CPU per document of each variant's three stages (the client's and nats-server's)."""
    url = f"nats://127.0.0.1:{server.ports['client']}"
    models = messages(data)
    bodies = {k: [m.model_dump_json().encode() for m in v] for k, v in models.items()}
    connection = await nats.connect(url)
    js = connection.jetstream()
    runs: dict[str, list[dict[str, float]]] = {v.name: [] for v in variants}
    try:
        for round_ in range(rounds):
            for k, variant in enumerate(variants if round_ % 2 == 0 else variants[::-1]):
                topology = Topology(prefix=f"floor{round_}x{k}", stream_max_bytes=256 * 1024**2)
                await declare_streams(js, topology)
                for body in bodies["added"]:
                    await js.publish(
                        topology.accepted(topology.added("bench", "bench")),
                        body,
                        headers=dict(JSON_HEADERS),
                    )
                run = _stage(variant, url, js, topology)
                meter = Meter(server)
                for hop in hops(topology, models, bodies):
                    await run(hop, meter)
                per = 1000 / len(data.documents)
                runs[variant.name].append(
                    {"client_ms": meter.client_s * per, "server_ms": meter.server_s * per}
                )
                for stream in topology.streams:
                    await js.delete_stream(stream.name)
    finally:
        await connection.close()
    return summarise(runs, len(data.documents), data.chunks)


def summarise(
    runs: dict[str, list[dict[str, float]]], documents: int, chunks: int
) -> dict[str, Any]:
    """Medians over rounds, per document and per chunk."""
    per_chunk = documents / chunks
    variants = {}
    for variant, rows in runs.items():
        client = statistics.median(r["client_ms"] for r in rows)
        server = statistics.median(r["server_ms"] for r in rows)
        variants[variant] = {
            "rounds": rows,
            "client_ms_per_document": client,
            "server_ms_per_document": server,
            "client_ms_per_chunk": client * per_chunk,
            "server_ms_per_chunk": server * per_chunk,
        }
    return {"documents": documents, "chunks": chunks, "variants": variants}


async def run(data: corpora.Corpus, rounds: int = 4) -> dict[str, Any]:
    """The floor on a nats-server of its own, removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="kbus-floor-"))
    server = start_nats(root / "nats")
    try:
        return await measure(data, server, rounds)
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


async def _main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.framework", description=__doc__)
    parser.add_argument("--dataset", type=Path, default=Path("../shared/datasets/scifact"))
    parser.add_argument("--documents", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--out", type=Path, default=Path("bench-results/framework.json"))
    parser.add_argument(
        "--services-ms-per-chunk",
        type=float,
        default=None,
        help="The services' CPU per chunk of a bench run, for the share column",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    data = corpora.load(args.dataset, args.documents, 0)
    floor = await run(data, args.rounds)
    save(args.out, floor)
    print("\n".join(report.framework_floor(floor, args.services_ms_per_chunk)))


if __name__ == "__main__":
    asyncio.run(_main())
