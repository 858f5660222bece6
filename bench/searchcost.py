"""What a search costs, by its shape: the CPU every process spends on it, beside the searcher's
estimate of its work (:mod:`kbus_searcher.search.pricing`), side by side in one run.

    python -m bench.searchcost [--documents 6] [--searches 12]

One stack; a library of ``--documents`` large documents (250,000 characters, a token of their
own in every 60-character segment, as bench.neighbour's flood); then each shape's searches one
after another, the CPU seconds of NATS, Weaviate and every service read from /proc before and
after. Reported per shape: CPU milliseconds per search (all processes, and per process), the
estimate and the measured work the searcher charged, and the CPU per unit of work: the closer
the last column is across shapes, the better the estimate orders what searches cost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
from pathlib import Path
from typing import Any

import nats
from kbus_client import KbClient
from kbus_dev.servers import Server

from bench.neighbour import COSTLY, LIBRARY, costly_query, flood_text
from bench.stack import bench_stack

TENANT = "costs"
SHORT = "quarterly revenue growth across regions"
#: Each shape: its name and the search's options besides the query (None: the short query).
SHAPES: list[tuple[str, dict[str, Any], bool]] = [
    ("ordinary (k=5)", {}, False),
    ("k=100", {"k": 100}, False),
    ("300-word query", {}, True),
    ("rerank_depth=50", {"rerank_depth": 50}, False),
    ("budget_tokens=2048", {"budget_tokens": 2048}, False),
    (
        "budget_tokens=32768, expand=document",
        {"budget_tokens": 32_768, "expand": "document"},
        False,
    ),
    ("k=100, rerank_depth=50", {"k": 100, "rerank_depth": 50}, False),
    ("costly (all of the above)", COSTLY, True),
]


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu(servers: dict[str, Server]) -> dict[str, float]:
    return {name: _cpu_s(server.proc.pid) for name, server in servers.items()}


async def measure(
    args: argparse.Namespace, url: str, prefix: str, servers: dict[str, Server]
) -> dict[str, Any]:
    rng = random.Random(1)
    kb = KbClient(await nats.connect(url), prefix=prefix, tenant=TENANT, timeout_s=60)
    rows = []
    try:
        for n in range(args.documents):
            await kb.publish_document(
                library=LIBRARY,
                document_id=f"large-{n}",
                title="large",
                text=flood_text(5_000 + n, 250_000),
                wait=True,
                timeout_s=1800,
            )
        await asyncio.sleep(5)
        for name, options, long_query in SHAPES:
            before = _cpu(servers)
            estimates, measured = [], []
            for _ in range(args.searches):
                query = costly_query(rng) if long_query else SHORT
                reply = await kb.search(query, libraries=[LIBRARY], **options)
                estimates.append(reply.work.estimate if reply.work else 0.0)
                measured.append(reply.work.measured if reply.work else 0.0)
            after = _cpu(servers)
            per = {p: round(1000 * (after[p] - before[p]) / args.searches, 1) for p in after}
            total = round(sum(per.values()), 1)
            work = sum(measured) / len(measured)
            rows.append(
                {
                    "shape": name,
                    "cpu_ms": total,
                    "cpu_ms_by_process": per,
                    "estimate": round(sum(estimates) / len(estimates), 2),
                    "measured": round(work, 2),
                    "cpu_ms_per_work": round(total / work, 1) if work else None,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    finally:
        await kb.close()
    return {"shapes": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.searchcost", description=__doc__)
    parser.add_argument("--documents", type=int, default=6)
    parser.add_argument("--searches", type=int, default=12)
    parser.add_argument("--out", type=Path, default=Path("searchcost-results.json"))
    args = parser.parse_args(argv)
    # Each search alone, never refused: what it costs, not what a tenant may spend.
    budget = {"KBUS_DEFAULT_BUDGET": json.dumps({"search_cost_per_second": 0})}
    with bench_stack("searchcost", budget) as stack:
        servers = stack.services | stack.servers
        result = asyncio.run(measure(args, stack.nats_url, stack.prefix, servers))
    result["command"] = "python -m bench.searchcost " + " ".join(argv or [])
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
