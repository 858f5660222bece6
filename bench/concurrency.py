"""``python -m bench.concurrency``: many agents at once, and searches while documents pour in.

One run, one machine, the services as processes on one NATS and one Weaviate:

1. The embedder alone draining the same chunks.ready backlog with and without keeping token
   states, taking turns over ``--rounds`` rounds: what keeping them costs ingestion.
2. A library of ``--documents`` SciFact documents ingested once (token states kept).
3. Per round, each reranker variant in turn (the reranker process restarted with it):
   ``sent`` reads the candidates' token states from the embedder's store and takes the query's
   from the request (the default: no encoder runs); ``stored`` encodes the query;
   ``encoded`` encodes every candidate, as before the store. For each: searches at
   concurrency 32 with the default chain and with ``rerank: false`` (the first stage alone),
   and at concurrency 1 with the default chain.
4. With the ``sent`` reranker, for each configuration of ``LOADS`` in turn (the embedder's
   document threads' niceness, token states kept or not; the searcher's indexing in a process
   of its own or not):
   ``--queries`` searches at concurrency 1 on an idle pipeline, then the same searches over and
   over while ``--load-documents`` new documents (new text: every chunk is embedded) are
   published at once and drain; one more lone document published right behind that backlog is
   timed to searchable.

Prints and writes JSON; no dataset text is written.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import nats
from kbus_client import KbClient
from kbus_contract.backlog import stage_backlog
from kbus_contract.topology import Topology
from kbus_dev.servers import Server, ensure_installed, start_nats, start_weaviate
from kbus_dev.services import service_env, start_all, start_service, wait_healthy

from bench import corpus as corpora
from bench import pipeline, scaling
from bench.corpus import Corpus, body

SCIFACT = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "scifact"
TENANT = "bench"
LIBRARY = "scifact"
#: The reranker's variants: the environment each runs with.
VARIANTS = {
    "sent": {"KBUS_RERANKER_TOKEN_STATES": "true", "KBUS_RERANKER_QUERY_STATES": "true"},
    "stored": {"KBUS_RERANKER_TOKEN_STATES": "true", "KBUS_RERANKER_QUERY_STATES": "false"},
    "encoded": {"KBUS_RERANKER_TOKEN_STATES": "false", "KBUS_RERANKER_QUERY_STATES": "false"},
}
#: The reranker's counters of where the states it scored came from.
COUNTED = ("passages", "queries")
#: Under load, in turn: the embedder's environment (its document threads' niceness: none, and
#: the default; token states not kept, to see what writing them costs the searches), and whether
#: the searcher's indexing runs in a process of its own, as the Kubernetes manifests run it (last:
#: the bench does not join the two again).
LOADS: dict[str, tuple[dict[str, str], bool]] = {
    "nice_0": ({"KBUS_EMBEDDER_BATCH_NICE": "0"}, False),
    "nice_10": ({"KBUS_EMBEDDER_BATCH_NICE": "10"}, False),
    "no_states": ({"KBUS_EMBEDDER_BATCH_NICE": "10", "KBUS_EMBEDDER_TOKEN_STATES": "false"}, False),
    "split": ({"KBUS_EMBEDDER_BATCH_NICE": "10"}, True),
}


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.concurrency")
    parser.add_argument("--data", type=Path, default=SCIFACT)
    parser.add_argument("--documents", type=int, default=1_000, help="the searched library")
    parser.add_argument("--queries", type=int, default=300, help="test queries, as load")
    parser.add_argument("--load-documents", type=int, default=500, help="ingested under search")
    parser.add_argument("--stream-documents", type=int, default=300, help="embedder alone")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("concurrency-results.json"))
    return parser.parse_args()


def counter(server: Server, name: str) -> dict[str, float]:
    """A Prometheus counter's samples on a service's /metrics, by their labels' values."""
    family = pipeline.metric(server, name)
    if family is None:
        return {}
    return {
        ",".join(s.labels.values()): s.value for s in family.samples if s.name.endswith("_total")
    }


async def searches(
    kb: KbClient, queries: list[str], concurrency: int, rerank: bool | None
) -> dict[str, object]:
    """Every query once at ``concurrency``: throughput and latency."""
    return await pipeline.query_load(kb, queries, LIBRARY, concurrency, rerank)


class Bench:
    """The run's servers and services."""

    def __init__(self, args: argparse.Namespace, root: Path) -> None:
        self.args = args
        self.root = root
        self.nats = start_nats(root / "nats")
        self.weaviate = start_weaviate(root / "weaviate")
        self.url = f"nats://127.0.0.1:{self.nats.ports['client']}"
        self.env = service_env(
            self.url, self.weaviate.ports["http"], self.weaviate.ports["grpc"], collection="Bench"
        )
        self.logs = root / "logs"
        self.services: list[Server] = []

    def stop(self) -> None:
        for server in [*self.services, self.nats, self.weaviate]:
            server.stop()

    def restart(self, name: str, extra: dict[str, str], label: str) -> Server:
        """A service restarted with more environment."""
        old = next(s for s in self.services if s.name == name)
        old.stop()
        new = start_service(name, {**self.env, **extra}, self.logs / label)
        wait_healthy([new])
        self.services[self.services.index(old)] = new
        return new

    def split_searcher(self) -> None:
        """One searcher process answers searches, another indexes (``KBUS_SEARCHER_SERVE``)."""
        self.restart("searcher", {"KBUS_SEARCHER_INDEX": "false"}, "searcher-query")
        env = {**self.env, "KBUS_SEARCHER_SERVE": "false"}
        indexer = start_service("searcher", env, self.logs / "searcher-indexer")
        wait_healthy([indexer])
        self.services.append(indexer)

    def reranker(self, variant: str) -> Server:
        """The reranker restarted with one variant."""
        return self.restart("reranker", VARIANTS[variant], variant)


async def ingestion_cost(bench: Bench, data: Corpus, rounds: int) -> dict[str, Any]:
    """The embedder alone on the same backlog, keeping token states or not, taking turns."""
    subset = Corpus(data.documents, data.chunked[: bench.args.stream_documents], [], 0.0)
    http, grpc = bench.weaviate.ports["http"], bench.weaviate.ports["grpc"]
    rates: dict[str, list[float]] = {"kept": [], "not kept": []}
    for _ in range(rounds):
        for name, kept in (("kept", "true"), ("not kept", "false")):
            extra = {"KBUS_EMBEDDER_TOKEN_STATES": kept}
            result = await scaling.embedder_rate(
                bench.url, (http, grpc), subset, 1, bench.logs, threads=0, extra=extra
            )
            rates[name].append(result["chunks_per_s"])
    return {"chunks": subset.chunks, "chunks_per_s": rates}


async def variants(bench: Bench, kb: KbClient, queries: list[str]) -> dict[str, Any]:
    """Each reranker variant in turn, per round: concurrency 32 and 1."""
    out: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    for round_ in range(bench.args.rounds):
        for variant in VARIANTS:
            print(f"round {round_ + 1}: reranker {variant}", flush=True)
            reranker = bench.reranker(variant)
            await searches(kb, queries[:10], 4, None)  # warm up
            before = {name: counter(reranker, f"kbus_rerank_{name}") for name in COUNTED}
            result: dict[str, Any] = {
                "default_32": await searches(kb, queries, 32, None),
                "first_stage_32": await searches(kb, queries, 32, False),
                "default_1": await searches(kb, queries[:100], 1, None),
            }
            for name in COUNTED:
                after = counter(reranker, f"kbus_rerank_{name}")
                result[name] = {k: after.get(k, 0) - before[name].get(k, 0) for k in after}
            out[variant].append(result)
    return out


async def pending(js: Any, topology: Topology) -> int:
    """Messages not yet settled by the three work consumers."""
    total = 0
    for consumer in topology.stages:
        if consumer.stage == "deleter":
            continue
        held = await stage_backlog(js, topology, consumer)
        total += held.pending + held.in_flight
    return total


async def under_load(bench: Bench, kb: KbClient, data: Corpus, queries: list[str]) -> Any:
    """Per configuration of :data:`LOADS`, in turn: :func:`drain`."""
    bench.reranker("sent")
    out = {}
    for name, (embedder, split) in LOADS.items():
        bench.restart("embedder", embedder, name)
        if split:
            bench.split_searcher()
        print(f"under load: {name}", flush=True)
        out[name] = await drain(bench, kb, data, queries)
    return out


async def drain(bench: Bench, kb: KbClient, data: Corpus, queries: list[str]) -> Any:
    """Idle searches, then searches while a backlog of new documents drains, and a lone one."""
    idle = pipeline.SearchRecorder(1, None)
    for query in queries:
        await idle.search(kb, query, LIBRARY)
    tag = uuid.uuid4().hex[:8]
    load = data.documents[: bench.args.load_documents]
    nc = await nats.connect(bench.url)
    js, topology = nc.jetstream(), Topology()
    started = time.perf_counter()
    for doc in load:
        await kb.publish_document(
            library="load",
            document_id=f"{doc['_id']}-{tag}",
            title=f"{doc.get('title', '')} [{tag}]",
            text=body(doc),
        )
    published_s = time.perf_counter() - started
    lone = asyncio.create_task(_lone(kb, data, tag))
    loaded = pipeline.SearchRecorder(1, None)
    while await pending(js, topology) or not lone.done():
        for query in queries[:20]:
            await loaded.search(kb, query, LIBRARY)
    drained_s = time.perf_counter() - started
    await nc.close()
    return {
        "idle": idle.summary(),
        "loaded": loaded.summary(),
        "load_documents": len(load),
        "publish_s": published_s,
        "drain_s": drained_s,
        "lone_to_searchable_s": await lone,
    }


async def _lone(kb: KbClient, data: Corpus, tag: str) -> float:
    doc = data.documents[-1]
    started = time.perf_counter()
    await kb.publish_document(
        library="lone",
        document_id=f"lone-{tag}",
        title=f"lone [{tag}]",
        text=body(doc),
        wait=True,
        timeout_s=3_600,
    )
    return time.perf_counter() - started


async def run(args: argparse.Namespace) -> dict[str, Any]:
    data = corpora.load(args.data, args.documents, args.queries)
    print(f"{len(data.documents)} documents, {data.chunks} chunks", flush=True)
    ensure_installed()
    root = Path(tempfile.mkdtemp(prefix="kbus-concurrency-"))
    bench = Bench(args, root)
    try:
        print("ingestion cost: the embedder alone", flush=True)
        result: dict[str, Any] = {"ingestion_cost": await ingestion_cost(bench, data, args.rounds)}
        bench.services = start_all(bench.env, bench.logs)
        kb = await KbClient.connect(bench.url, tenant=TENANT)
        async with kb:
            print("ingesting", flush=True)
            result["ingest"] = await pipeline.ingest(kb, data, LIBRARY)
            result["variants"] = await variants(bench, kb, data.queries)
            result["under_load"] = await under_load(bench, kb, data, data.queries[:100])
    except BaseException:
        print(f"the services' logs are kept in {bench.logs}; their last lines:", flush=True)
        for log in sorted(bench.logs.rglob("*.log")):
            lines = log.read_text(errors="replace").splitlines()[-12:]
            print(f"--- {log.relative_to(bench.logs)}", *lines, sep="\n", flush=True)
        raise
    else:
        shutil.rmtree(root, ignore_errors=True)
    finally:
        bench.stop()
    return result


def main() -> None:
    args = _args()
    result = asyncio.run(run(args))
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
