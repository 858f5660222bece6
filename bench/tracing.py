"""``python -m bench.tracing``: what tracing costs, on and off side by side in one run.

Two stacks of the services share one NATS and one Weaviate: one traces every message and
request to a Jaeger all-in-one (``KBUS_TRACING_ENDPOINT``, every trace sampled), the other does
not trace. Ingestion alternates between them in halves, off-on-on-off, so a drift of the machine
falls on both; queries alternate one by one. The client does not trace: what is measured is the
services' cost (spans, their export, trace context in every message's and request's headers).
Results: the ingestion rate and the search p50 of each, and their ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

from kbus_client import KbClient
from kbus_dev.observability import start_jaeger, traces
from kbus_dev.servers import Server, ensure_installed, start_nats, start_weaviate
from kbus_dev.services import service_env, start_all

from bench import corpus as corpora
from bench import pipeline

TENANT = "bench"
LIBRARY = "scifact"


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.tracing", description=__doc__)
    p.add_argument("--dataset", type=Path, default=Path("../shared/datasets/scifact"))
    p.add_argument("--documents", type=int, default=600)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--out", type=Path, default=Path("bench-results"))
    return p.parse_args()


def _halves(data: corpora.Corpus) -> list[corpora.Corpus]:
    middle = len(data.documents) // 2
    return [
        corpora.Corpus(data.documents[:middle], data.chunked[:middle], []),
        corpora.Corpus(data.documents[middle:], data.chunked[middle:], []),
    ]


def _stack(
    servers: tuple[str, int, int], logs: Path, tracing: str | None
) -> tuple[str, list[Server]]:
    """The services under a prefix of their own (returned), tracing to ``tracing``."""
    nats_url, http, grpc = servers
    tag = uuid.uuid4().hex[:6]
    extra = {"KBUS_TRACING_ENDPOINT": tracing} if tracing else {}
    env = service_env(nats_url, http, grpc, prefix=f"b{tag}", collection=f"Bench{tag}", extra=extra)
    return f"b{tag}", start_all(env, logs / ("on" if tracing else "off"))


async def _measure(kbs: dict[str, KbClient], data: corpora.Corpus) -> dict[str, dict[str, Any]]:
    halves = _halves(data)
    runs: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
    for arm, half in (("off", 0), ("on", 0), ("on", 1), ("off", 1)):
        print(f"ingesting half {half + 1} with tracing {arm}", flush=True)
        runs[arm].append(await pipeline.ingest(kbs[arm], halves[half], LIBRARY))
    recorders = {arm: pipeline.SearchRecorder(1, None) for arm in kbs}
    for i, query in enumerate(data.queries):
        for arm in ("off", "on") if i % 2 == 0 else ("on", "off"):
            await recorders[arm].search(kbs[arm], query, LIBRARY)
    out: dict[str, dict[str, Any]] = {}
    for arm, done in runs.items():
        chunks = sum(int(r["chunks"]) for r in done)
        seconds = sum(float(r["seconds"]) for r in done)
        out[arm] = {
            "chunks": chunks,
            "seconds": seconds,
            "chunks_per_s": chunks / seconds,
            "search": recorders[arm].summary(),
        }
    return out


def _row(name: str, off: float, on: float) -> str:
    return f"| {name} | {off:.1f} | {on:.1f} | {on / off:.3f} |"


def _summary(result: dict[str, Any]) -> str:
    off, on = result["off"], result["on"]

    def latency(arm: dict[str, Any], p: str) -> float:
        return float(arm["search"]["latency_ms"][p])

    return "\n".join(
        [
            f"documents {result['documents']}, chunks {result['chunks']}, "
            f"queries {result['queries']}; {result['traced_searcher_traces']} searcher traces "
            "read back from Jaeger",
            "",
            "| | tracing off | tracing on | on / off |",
            "| --- | --- | --- | --- |",
            _row("ingestion, chunks/s", off["chunks_per_s"], on["chunks_per_s"]),
            _row("search p50, ms", latency(off, "p50"), latency(on, "p50")),
            _row("search p95, ms", latency(off, "p95"), latency(on, "p95")),
        ]
    )


async def main() -> None:
    args = _args()
    args.out.mkdir(parents=True, exist_ok=True)
    data = corpora.load(args.dataset, args.documents or None, args.queries)
    ensure_installed()
    root = Path(tempfile.mkdtemp(prefix="kbus-bench-tracing-"))
    nats, weaviate = start_nats(root / "nats"), start_weaviate(root / "weaviate")
    jaeger = start_jaeger(root / "jaeger")
    servers = (
        f"nats://127.0.0.1:{nats.ports['client']}",
        weaviate.ports["http"],
        weaviate.ports["grpc"],
    )
    stacks: list[Server] = []
    try:
        endpoint = f"http://127.0.0.1:{jaeger.ports['otlp']}"
        prefixes = {}
        for arm, tracing in (("off", None), ("on", endpoint)):
            prefixes[arm], started = _stack(servers, args.out / "logs", tracing)
            stacks += started
        kbs = {
            arm: await KbClient.connect(servers[0], prefix=prefix, tenant=TENANT)
            for arm, prefix in prefixes.items()
        }
        try:
            measured = await _measure(kbs, data)
        finally:
            for kb in kbs.values():
                await kb.close()
        await asyncio.sleep(2)  # the last spans' export
        result = {
            "documents": len(data.documents),
            "chunks": data.chunks,
            "queries": len(data.queries),
            **measured,
            "traced_searcher_traces": len(traces(jaeger.ports["ui"], "kbus-searcher", 1000)),
        }
    finally:
        for server in [*stacks, jaeger, weaviate, nats]:
            server.stop()
        shutil.rmtree(root, ignore_errors=True)
    (args.out / "tracing.json").write_text(json.dumps(result, indent=2))
    print(_summary(result))


if __name__ == "__main__":
    asyncio.run(main())
