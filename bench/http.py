"""The same searches over NATS and over HTTP (the console), side by side in one run.

    python -m bench.http [--documents 300] [--queries 100] [--concurrency 32] [--out FILE]

One locked installation (NATS in operator mode, a tenant's credential), the console beside it,
``--documents`` SciFact abstracts published as that tenant. Then ``--queries`` SciFact queries,
each asked over both transports in turn (NATS first for one, HTTP first for the next): the
p50 and p95 of each, one at a time; then all of them at ``--concurrency`` at once over each,
searches per second. Goals: HTTP p50 at most 1.2 x NATS's, searches per second at concurrency
at least 0.9 x NATS's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from kbus_client import CredentialFile, KbClient
from kbus_dev.locked import start_locked
from kbus_dev.natsauth import Credential
from kbus_dev.services import start_service, wait_healthy

from bench.corpus import body, load
from bench.report import save

TENANT, LIBRARY = "bench", "bench"
GOALS = {"p50": 1.2, "throughput": 0.9}


async def _publish(kb: KbClient, documents: list[dict[str, str]]) -> None:
    for start in range(0, len(documents), 32):
        await asyncio.gather(
            *(
                kb.publish_document(
                    library=LIBRARY,
                    document_id=d["_id"],
                    title=d.get("title", ""),
                    text=body(d),
                    wait=True,
                    timeout_s=300,
                )
                for d in documents[start : start + 32]
            )
        )


def _asker(kb: KbClient, http: httpx.AsyncClient) -> dict[str, Callable[[str], Awaitable[Any]]]:
    async def over_nats(query: str) -> Any:
        return await kb.search(query, libraries=[LIBRARY], k=5)

    async def over_http(query: str) -> Any:
        answer = await http.post("/v1/search", json={"query": query, "libraries": [LIBRARY]})
        answer.raise_for_status()
        return answer.json()

    return {"nats": over_nats, "http": over_http}


async def _one_at_a_time(ask: dict[str, Any], queries: list[str]) -> dict[str, list[float]]:
    took: dict[str, list[float]] = {name: [] for name in ask}
    for n, query in enumerate(queries):
        order = list(ask) if n % 2 == 0 else list(reversed(ask))
        for name in order:
            began = time.perf_counter()
            await ask[name](query)
            took[name].append(time.perf_counter() - began)
    return took


async def _at_once(ask: Callable[[str], Awaitable[Any]], queries: list[str], width: int) -> float:
    """Searches per second with ``width`` in flight."""
    pending = list(queries)

    async def worker() -> None:
        while pending:
            await ask(pending.pop())

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(width)))
    return len(queries) / (time.perf_counter() - began)


async def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    corpus = load(args.dataset, args.documents, args.queries)
    # One tenant's searches as fast as both transports can ask: its search rate not held to a
    # shared deployment's default, its requests at once up to the concurrency over each.
    unbounded = {"search_cost_per_second": 0, "requests_in_flight": 4 * args.concurrency}
    settings = {"KBUS_DEFAULT_BUDGET": json.dumps(unbounded)}
    # start_locked runs its own event loop: on a thread of its own.
    installation = await asyncio.to_thread(start_locked, root, [Credential.parse(TENANT)], settings)
    console = None
    try:
        env = {
            **os.environ,
            "KBUS_NATS_URL": installation.nats_url,
            "KBUS_CONSOLE_TENANT_REQUESTS": str(args.concurrency),
        }
        console = start_service("console", env, root)
        wait_healthy([console])
        held = CredentialFile.read(installation.auth / f"credential-{TENANT}.json")
        kb = await KbClient.connect(installation.nats_url, credential=held)
        headers = {"Authorization": f"Bearer {held.token()}"}
        base = f"http://127.0.0.1:{console.ports['http']}"
        limits = httpx.Limits(max_connections=args.concurrency)
        async with (
            kb,
            httpx.AsyncClient(base_url=base, headers=headers, timeout=60, limits=limits) as http,
        ):
            await _publish(kb, corpus.documents)
            ask = _asker(kb, http)
            await _one_at_a_time(ask, corpus.queries[:5])  # warm both paths
            took = await _one_at_a_time(ask, corpus.queries)
            rates = {}
            for name in ["nats", "http"] if args.queries % 2 else ["http", "nats"]:
                rates[name] = await _at_once(ask[name], corpus.queries, args.concurrency)
    finally:
        if console is not None:
            console.stop()
        installation.stop()
    return _report(args, took, rates)


def _report(
    args: argparse.Namespace, took: dict[str, list[float]], rates: dict[str, float]
) -> dict[str, Any]:
    def quantiles(values: list[float]) -> dict[str, float]:
        cuts = statistics.quantiles(values, n=20)
        return {"p50_ms": statistics.median(values) * 1000, "p95_ms": cuts[18] * 1000}

    out = {
        "documents": args.documents,
        "queries": args.queries,
        "concurrency": args.concurrency,
        "nats": {**quantiles(took["nats"]), "searches_per_s": rates["nats"]},
        "http": {**quantiles(took["http"]), "searches_per_s": rates["http"]},
    }
    p50 = out["http"]["p50_ms"] / out["nats"]["p50_ms"]
    rate = rates["http"] / rates["nats"]
    out["ratios"] = {"p50": p50, "throughput": rate}
    out["met"] = {"p50": p50 <= GOALS["p50"], "throughput": rate >= GOALS["throughput"]}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.http", description=__doc__)
    parser.add_argument("--dataset", type=Path, default=Path("../shared/datasets/scifact"))
    parser.add_argument("--documents", type=int, default=300)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--out", type=Path, default=Path("bench-results/http.json"))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kbus-bench-http-") as folder:
        result = asyncio.run(run(args, Path(folder)))
    save(args.out, result)
    for name in ("nats", "http"):
        r = result[name]
        print(
            f"{name}: p50 {r['p50_ms']:.1f} ms, p95 {r['p95_ms']:.1f} ms, "
            f"{r['searches_per_s']:.1f} searches/s at {args.concurrency} at once"
        )
    ratios, met = result["ratios"], result["met"]
    print(
        f"HTTP / NATS: p50 {ratios['p50']:.2f} (goal <= {GOALS['p50']}: "
        f"{'met' if met['p50'] else 'missed'}), throughput {ratios['throughput']:.2f} "
        f"(goal >= {GOALS['throughput']}: {'met' if met['throughput'] else 'missed'})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
