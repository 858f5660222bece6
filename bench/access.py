"""``python -m bench.access``: search time with per-document access filtering, side by side.

SciFact abstracts (read from ``--dataset``, never copied) are indexed once in one library, each
readable by ``all`` and by one to three of 100 groups (a seeded draw). Then each query is asked,
interleaved, in three modes on that library:

- ``unfiltered``: claiming ``all``, so the access filter passes every chunk (what a search
  without access costs);
- ``3 groups`` and ``20 groups``: claiming random groups, so the filter keeps about 6% and 35%
  of the chunks.

For each mode: p50 and p99 of the whole search as the client saw it and as the searcher
measured it (``total_ms``), and the mean number of results. The queries are the ``--split``'s
(train by default: this measures time, not quality).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from pathlib import Path
from typing import Any

from kbus_cli.evaluation import Dataset
from kbus_client import KbClient

from bench.report import save
from bench.stack import bench_stack

TENANT = "access"
LIBRARY = "held"
GROUPS = [f"g{i:02d}" for i in range(100)]
MODES = {"unfiltered": 0, "3 groups": 3, "20 groups": 20}


def access_of(ids: list[str], seed: int) -> dict[str, list[str]]:
    """Each abstract's readers: ``all`` and one to three groups."""
    rng = random.Random(seed)
    return {i: ["all", *rng.sample(GROUPS, rng.randint(1, 3))] for i in ids}


async def _index(kb: KbClient, data: Dataset, access: dict[str, list[str]]) -> float:
    limit = asyncio.Semaphore(16)

    async def one(doc: dict[str, str]) -> None:
        async with limit:
            await kb.publish_document(
                library=LIBRARY,
                document_id=doc["_id"],
                title=doc.get("title", ""),
                text=doc["text"],
                access=access[doc["_id"]],
                wait=True,
                timeout_s=3_600,
            )

    started = time.perf_counter()
    await asyncio.gather(*(one(d) for d in data.corpus))
    return time.perf_counter() - started


async def measure(kb: KbClient, queries: list[str], seed: int) -> dict[str, dict[str, list[float]]]:
    """Every query in every mode, interleaved (the modes share the machine's ups and downs)."""
    rng = random.Random(seed + 1)
    times: dict[str, dict[str, list[float]]] = {
        m: {"client": [], "server": [], "results": []} for m in MODES
    }
    for query in queries:
        for mode, groups in MODES.items():
            claims = rng.sample(GROUPS, groups) if groups else ["all"]
            started = time.perf_counter()
            reply = await kb.search(query, libraries=[LIBRARY], principals=claims, timeout_s=30)
            times[mode]["client"].append((time.perf_counter() - started) * 1000)
            times[mode]["server"].append(reply.timings.total_ms)
            times[mode]["results"].append(len(reply.results))
    return times


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


def summary(times: dict[str, dict[str, list[float]]]) -> list[dict[str, Any]]:
    base = statistics.median(times["unfiltered"]["client"])
    return [
        {
            "mode": mode,
            "client_p50_ms": _pct(t["client"], 0.5),
            "client_p99_ms": _pct(t["client"], 0.99),
            "server_p50_ms": _pct(t["server"], 0.5),
            "server_p99_ms": _pct(t["server"], 0.99),
            "p50_vs_unfiltered": round(statistics.median(t["client"]) / base, 2),
            "results": round(statistics.mean(t["results"]), 1),
        }
        for mode, t in times.items()
    ]


def markdown(rows: list[dict[str, Any]], about: dict[str, Any]) -> str:
    head = list(rows[0])
    lines = [f"{about}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(r[h]) for h in head) + " |" for r in rows]
    return "\n".join(lines)


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.access", description=__doc__)
    p.add_argument("--dataset", type=Path, default=Path("../shared/datasets/scifact"))
    p.add_argument("--split", default="train")
    p.add_argument("--queries", type=int, default=300)
    p.add_argument("--abstracts", type=int, default=2_000)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", type=Path, default=Path("bench-results/access.json"))
    return p.parse_args()


async def run(args: argparse.Namespace) -> str:
    """One NATS, one Weaviate and the services started for the run; the table."""
    data = Dataset.load(args.dataset, args.split, args.queries, args.abstracts)
    access = access_of([d["_id"] for d in data.corpus], args.seed)
    with bench_stack("access") as stack:
        async with await KbClient.connect(
            stack.nats_url, prefix=stack.prefix, tenant=TENANT, acts_for=None
        ) as kb:
            print(f"{len(data.corpus)} abstracts, {len(data.qrels)} queries", flush=True)
            indexed_s = await _index(kb, data, access)
            times = await measure(kb, [data.queries[q] for q in data.qrels], args.seed)
    rows = summary(times)
    about = {
        "split": args.split,
        "queries": len(data.qrels),
        "abstracts": len(data.corpus),
        "indexed_s": round(indexed_s, 1),
    }
    save(args.out, {"about": about, "rows": rows})
    return markdown(rows, about)


def main() -> None:
    print(asyncio.run(run(_args())))


if __name__ == "__main__":
    main()
