"""``python -m bench``: ingestion, query, scaling, peer and memory, in one run.

Everything that is compared runs in this one process tree on this machine, one thing at a time:
the floors first, then kbus's ingestion, LlamaIndex's ingestion right after it, then queries
alternating between kbus, LlamaIndex and the in-process floor, then the embedder alone and
scaled out, and last the bus and framework floor (``bench.framework``). Results: results.json,
summary.md and plot.png.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import shutil
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from kbus_client import KbClient
from kbus_dev.servers import Server, ensure_installed, start_nats, start_weaviate
from kbus_dev.services import service_env, start_all
from kbus_embedder.settings import EmbedderSettings
from kbus_models.encoder import Encoder, resolve
from kbus_runtime.settings import StoreSettings

from bench import corpus as corpora
from bench import floors, framework, pipeline, report, scaling

#: The reranker's default scorer model; the embedder's model is ``--model``.
RERANK_MODEL = "all-MiniLM-L6-v2"
TENANT = "bench"


def _args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--dataset", type=Path, default=Path("../shared/datasets/scifact"))
    p.add_argument("--documents", type=int, default=1000, help="0: the whole corpus")
    p.add_argument("--queries", type=int, default=100)
    p.add_argument(
        "--stream-documents",
        type=int,
        default=0,
        help="Documents the embedder service drains beside the bare encoder (0: all of the run's)",
    )
    p.add_argument("--scaling-documents", type=int, default=150)
    p.add_argument(
        "--drift-documents",
        type=int,
        default=300,
        help="Documents whose chunks are encoded again right before and after ingestion 1, to "
        "see how far the machine's speed moved from the floor's (0: not measured)",
    )
    p.add_argument("--out", type=Path, default=Path("bench-results"))
    p.add_argument(
        "--model",
        default=EmbedderSettings().model,
        help="The embedder's model, for the floors, the services and LlamaIndex alike",
    )
    p.add_argument(
        "--framework-documents",
        type=int,
        default=1500,
        help="Documents whose messages go through the bus and framework floor at the end "
        "(bench.framework; 0: not measured)",
    )
    p.add_argument("--no-peer", action="store_true", help="Skip LlamaIndex.")
    p.add_argument("--no-scaling", action="store_true")
    p.add_argument(
        "--no-plot", action="store_true", help="Write no plot.png (matplotlib is the bench group's)"
    )
    return p.parse_args(argv)


def _head(data: corpora.Corpus, documents: int) -> corpora.Corpus:
    """The first ``documents`` of a corpus (all of it for 0), without its queries."""
    if not documents:
        return data
    return corpora.Corpus(data.documents[:documents], data.chunked[:documents], [])


def _sync(call: Callable[[str], None]) -> Callable[[str], Awaitable[None]]:
    async def turn(query: str) -> None:
        call(query)

    return turn


class _Drift:
    """The bare encoder's rate on a fixed sample of the corpus, taken at named moments.

    Single runs drift by several percent over minutes; E is measured before the pipeline runs.
    The same sample, encoded right after E and right before and after ingestion 1 by the same
    encoder, says how far the machine moved in between (the report scales E by it).
    """

    def __init__(
        self, documents: int, data: corpora.Corpus, encoder: Encoder, batch_size: int
    ) -> None:
        self.documents = documents
        self.sample = _head(data, documents)
        self.encoder, self.batch_size = encoder, batch_size
        self.rates: dict[str, float] = {}

    def __call__(self, moment: str) -> None:
        if not self.documents:
            return
        rate, _ = floors.encode_rate(self.sample, self.encoder, self.batch_size)
        self.rates[moment] = rate["chunks_per_s"]

    def summary(self) -> dict[str, Any]:
        """What the report reads; empty when the drift was not measured."""
        if not self.rates:
            return {}
        return {"encode_drift": {"chunks": self.sample.chunks, "chunks_per_s": self.rates}}


def _machine() -> str:
    return f"{os.cpu_count()} cores, {platform.processor() or platform.machine()}"


async def _ingest_twice(
    kb: KbClient,
    data: corpora.Corpus,
    library: str,
    processes: tuple[list[Server], list[Server]],
    drift: _Drift,
    memory: dict[str, list[dict[str, int]]],
) -> list[dict[str, Any]]:
    """Ingestion 1, then a new version of every document with the same text: every vector
    comes from the embedding cache and the first version's chunks are replaced.
    (Republishing the same content inside JetStream's 2-minute duplicate window would be
    dropped at the stream and measure nothing downstream.)"""
    services, servers = processes
    runs = []
    for version in (None, "bench-again"):
        if version is None:
            drift("before")
        cpu = {s.name: pipeline.cpu_seconds(s) for s in services + servers}
        loops = {s.name: pipeline.main_thread_cpu_seconds(s) for s in services}
        run = await pipeline.ingest(kb, data, library, version)
        run["cpu_ms_per_chunk"] = {
            s.name: (pipeline.cpu_seconds(s) - cpu[s.name]) * 1000 / data.chunks for s in services
        }
        # The bus's server and the store cost beyond the floors too (the floors' Weaviate
        # import is read the same way).
        run["server_cpu_ms_per_chunk"] = {
            s.name: (pipeline.cpu_seconds(s) - cpu[s.name]) * 1000 / data.chunks for s in servers
        }
        run["main_thread_cpu_ms_per_chunk"] = {
            s.name: (pipeline.main_thread_cpu_seconds(s) - loops[s.name]) * 1000 / data.chunks
            for s in services
        }
        runs.append(run)
        if version is None:
            drift("after")
        for s in services:
            memory[s.name].append(pipeline.memory_kb(s))
    return runs


async def _query_turns(
    args: argparse.Namespace,
    kb: KbClient,
    data: corpora.Corpus,
    library: str,
    reranker: Server,
    store: StoreSettings,
    peer: Any,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The query floor and kbus's query loads.

    At concurrency 1 kbus's default path, its first stage alone, LlamaIndex and the
    in-process floor take turns query by query, so all of them see the same machine. The
    order goes through every permutation: each turn follows every other equally often
    (rotating one order would keep every turn behind the same other).
    """
    default, first = pipeline.SearchRecorder(1, None), pipeline.SearchRecorder(1, False)
    scored_before = pipeline.histogram(reranker, "kbus_rerank_seconds")
    floor = floors.QueryFloor.create(
        args.model, RERANK_MODEL, 0, 5, store, tenant=TENANT, library=library, alpha=0.5
    )
    async with floor:
        turns: list[Callable[[str], Awaitable[None]]] = [
            lambda q: default.search(kb, q, library),
            lambda q: first.search(kb, q, library),
            floor.measure,
        ]
        if peer is not None:
            turns.insert(2, _sync(peer.query))
        orders = list(itertools.permutations(turns))
        for i, query in enumerate(data.queries):
            for turn in orders[i % len(orders)]:
                await turn(query)
    query_floor = floor.summary()
    query_floor["reranker_process"] = pipeline.histogram_mean_ms(
        scored_before, pipeline.histogram(reranker, "kbus_rerank_seconds")
    )
    loads = [default.summary()]
    for concurrency in (8, 32):
        loads.append(await pipeline.query_load(kb, data.queries, library, concurrency))
    loads.append(first.summary())
    return query_floor, loads


def _peer(args: argparse.Namespace, data: corpora.Corpus, http: int, grpc: int) -> Any:
    """LlamaIndex, its ingestion done (None with --no-peer)."""
    if args.no_peer:
        return None
    print("peer: LlamaIndex ingestion", flush=True)
    from bench.peer import LlamaPeer

    peer = LlamaPeer(http, grpc, args.model, threads=0)
    peer.ingest(data)
    return peer


async def _kbus(
    args: argparse.Namespace,
    data: corpora.Corpus,
    nats_url: str,
    http: int,
    grpc: int,
    servers: list[Server],
    drift: _Drift,
) -> dict[str, Any]:
    collection = f"Bench{uuid.uuid4().hex[:8]}"
    store = StoreSettings(hosts=f"127.0.0.1:{http}:{grpc}", collection=collection)
    env = service_env(nats_url, http, grpc, collection=collection)
    services = start_all(env, args.out / "logs")
    memory: dict[str, list[dict[str, int]]] = {s.name: [] for s in services}
    library = "scifact"
    try:
        kb = await KbClient.connect(nats_url, tenant=TENANT)
        async with kb:
            runs = await _ingest_twice(kb, data, library, (services, servers), drift, memory)
            lone = await pipeline.lone_documents(kb, data, "lone")
            peer = _peer(args, data, http, grpc)
            reranker = next(s for s in services if s.name == "reranker")
            query_floor, loads = await _query_turns(args, kb, data, library, reranker, store, peer)
            peer_result = peer.close() if peer is not None else None
    finally:
        for s in services:
            s.stop()
    return {
        "ingestion": {
            "runs": runs,
            "in_flight": pipeline.IN_FLIGHT,
            "lone_ms": lone,
            **drift.summary(),
        },
        "query": {"bus": loads, "floor": query_floor},
        "memory": memory,
        **({"peer": peer_result} if peer_result else {}),
    }


async def _embedder_rates(
    args: argparse.Namespace,
    data: corpora.Corpus,
    nats_url: str,
    ports: tuple[int, int],
    bare: Encoder,
    batch: int,
) -> dict[str, Any]:
    """The embedder service fed from the stream beside the bare encoder, and its scaling."""
    print("embedder service fed from the stream, beside the bare encoder", flush=True)
    # The encoder floor again, right before: single runs drift by about 10% over minutes.
    streamed = _head(data, args.stream_documents)
    adjacent, _ = floors.encode_rate(streamed, bare, batch)
    fed = await scaling.embedder_rate(nats_url, ports, streamed, 1, args.out / "logs", threads=0)
    fed["adjacent_encode_chunks_per_s"] = adjacent["chunks_per_s"]
    fed["documents"] = len(streamed.documents)
    result: dict[str, Any] = {"stream_embedder": fed}
    if not args.no_scaling:
        print("scaling: 1, 2, 3 embedders", flush=True)
        subset = _head(data, args.scaling_documents)
        result["scaling"] = [
            await scaling.embedder_rate(nats_url, ports, subset, n, args.out / "logs")
            for n in (1, 2, 3)
        ]
    return result


async def main(argv: list[str] | None = None) -> None:
    args = _args(argv)
    # Every service process the bench starts inherits this environment.
    os.environ["KBUS_EMBEDDER_MODEL"] = args.model
    args.out.mkdir(parents=True, exist_ok=True)
    data = corpora.load(args.dataset, args.documents or None, args.queries)
    print(f"corpus: {len(data.documents)} documents, {data.chunks} chunks", flush=True)
    ensure_installed()
    root = Path(tempfile.mkdtemp(prefix="kbus-bench-"))
    nats_server = start_nats(root / "nats")
    # LlamaIndex's WeaviateVectorStore relies on auto-schema; kbus declares its own schema.
    weaviate_server = start_weaviate(root / "weaviate", auto_schema=True)
    nats_url = f"nats://127.0.0.1:{nats_server.ports['client']}"
    http, grpc = weaviate_server.ports["http"], weaviate_server.ports["grpc"]
    try:
        print("floors: bare encoder, bare Weaviate import", flush=True)
        # The floor runs the model exactly as the embedder service does by default; the same
        # encoder measures every bare rate of the run.
        batch = EmbedderSettings().batch_size
        bare = Encoder(resolve(args.model), threads=0)
        encode, vectors = floors.encode_rate(data, bare, batch)
        drift = _Drift(args.drift_documents, data, bare, batch)
        drift("floor")
        store = StoreSettings(hosts=f"127.0.0.1:{http}:{grpc}")
        imported = await floors.import_rate(data, vectors, store, args.model, weaviate_server)
        ceiling = report.ceiling(encode["chunks_per_s"], imported["chunks_per_s"])
        print("kbus: ingestion twice, then queries", flush=True)
        result: dict[str, Any] = {
            "machine": _machine(),
            "model": args.model,
            "documents": len(data.documents),
            "chunks": data.chunks,
            # Counts only: the dataset's text stays where it is (its licence forbids copies).
            "queries": len(data.queries),
            "floors": {
                "encode": encode,
                "import": imported,
                "ceiling_chunks_per_s": ceiling,
                "chunking_cpu_ms_per_chunk": data.chunking_cpu_s * 1000 / data.chunks,
            },
            **(
                await _kbus(args, data, nats_url, http, grpc, [nats_server, weaviate_server], drift)
            ),
        }
        result.update(await _embedder_rates(args, data, nats_url, (http, grpc), bare, batch))
    finally:
        nats_server.stop()
        weaviate_server.stop()
        shutil.rmtree(root, ignore_errors=True)  # the run's NATS and Weaviate data
    if args.framework_documents:
        print("the bus and framework floor", flush=True)
        # On a nats-server of its own, once the run's servers are gone.
        result["framework_floor"] = await framework.run(_head(data, args.framework_documents))
    (args.out / "results.json").write_text(json.dumps(result, indent=2))
    summary = report.markdown(result)
    (args.out / "summary.md").write_text(summary)
    if not args.no_plot:
        report.plot(result, args.out / "plot.png")
    print(summary)


if __name__ == "__main__":
    asyncio.run(main())
