"""A noisy neighbour, side by side in one run: a tenant's flood of large documents and heavy
searches against another tenant's small documents and searches.

    python -m bench.neighbour [--seconds 60] [--publishers 4] [--searchers 16]

One stack (its streams ``--stream-mib`` large, so every tenant's budget is an eighth of that).
First quiet: the victim publishes ``--documents`` one-paragraph documents, one every
``--every-s`` seconds, each waited for until searchable, and searches meanwhile. Then the same
again while the attacker's ``--publishers`` raw publishers send ~1 MB documents as fast as the
gate answers and its ``--searchers`` ask for whole-document contexts of 8,000 tokens. Reported:
the victim's publish-to-searchable p50/p99 and refusals, its search p95 in each phase and their
ratio, and the attacker's answers by kind. Goals (docs/performance.md): searchable p99 at most
10 s and nothing refused, search p95 at most three times the quiet one, the attacker refused
``quota_exceeded``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
from kbus_client import KbClient
from kbus_contract import DocumentAdded
from kbus_contract.topology import Topology
from nats.aio.client import Client
from nats.js.errors import APIError

from bench.stack import bench_stack

VICTIM, ATTACKER, LIBRARY = "victim", "attacker", "notes"


@dataclass
class Phase:
    """What the victim saw in one phase."""

    searchable_s: list[float] = field(default_factory=list)
    search_s: list[float] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    #: Each search's milliseconds per stage, as the searcher measured them.
    stages: dict[str, list[float]] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        return {
            "documents": len(self.searchable_s),
            "searchable_p50_s": _quantile(self.searchable_s, 0.5),
            "searchable_p99_s": _quantile(self.searchable_s, 0.99),
            "searches": len(self.search_s),
            "search_p95_s": _quantile(self.search_s, 0.95),
            "stage_p95_ms": {k: _quantile(v, 0.95) for k, v in sorted(self.stages.items())},
            "refused": self.refused,
        }


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


async def _victim(kb: KbClient, phase: Phase, documents: int, every_s: float, tag: str) -> None:
    """One-paragraph documents, each waited for, and a search between two of them."""
    for number in range(documents):
        started = time.monotonic()
        try:
            await kb.publish_document(
                library=LIBRARY,
                document_id=f"{tag}-{number}",
                text=f"The {tag}word{number} note of the victim, one short paragraph.",
                wait=True,
                timeout_s=120,
            )
            phase.searchable_s.append(time.monotonic() - started)
        except Exception as exc:
            phase.refused.append(f"{type(exc).__name__}: {exc}")
        started = time.monotonic()
        reply = await kb.search(f"{tag}word{number} note", libraries=[LIBRARY])
        phase.search_s.append(time.monotonic() - started)
        for stage, ms in reply.timings.model_dump().items():
            phase.stages.setdefault(stage, []).append(ms)
        await asyncio.sleep(max(0.0, every_s - (time.monotonic() - started)))


async def _publisher(
    nc: Client, t: Topology, seconds: float, number: int, seen: Counter[str]
) -> None:
    """Raw publishes of ~900 KB documents on the attacker's own subject, answers counted."""
    # Made once: the attacker's own machine would spend its own cores making them, not ours.
    template = (
        DocumentAdded(
            tenant=ATTACKER,
            library=LIBRARY,
            document_id="flood-ID",
            title="flood",
            text="floodword " * 90_000,
        )
        .model_dump_json()
        .encode()
    )
    end = time.monotonic() + seconds
    sent = 0
    while time.monotonic() < end:
        body = template.replace(b"flood-ID", f"flood-{number}-{sent}".encode(), 1)
        sent += 1
        try:
            await nc.jetstream(timeout=10).publish(t.added(ATTACKER, LIBRARY), body)
            seen["stored"] += 1
        except APIError as exc:
            seen[str(exc.description or exc.code).partition(":")[0]] += 1
        except Exception as exc:
            seen[type(exc).__name__] += 1


async def _searcher(kb: KbClient, seconds: float, seen: Counter[str]) -> None:
    """Whole-document contexts of 8,000 tokens, one after another."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            await kb.search(
                "floodword", libraries=[LIBRARY], budget_tokens=8_000, expand="document"
            )
            seen["searched"] += 1
        except Exception as exc:
            seen[getattr(exc, "code", type(exc).__name__)] += 1


async def measure(args: argparse.Namespace, url: str, prefix: str) -> dict[str, Any]:
    t = Topology(prefix)
    victim = KbClient(await nats.connect(url), prefix=prefix, tenant=VICTIM)
    attacker = KbClient(await nats.connect(url), prefix=prefix, tenant=ATTACKER)
    raw = [await nats.connect(url) for _ in range(args.publishers)]
    quiet, noisy = Phase(), Phase()
    seen: Counter[str] = Counter()
    try:
        await _victim(victim, quiet, args.documents, args.every_s, "quiet")
        flood_s = args.seconds
        attack = asyncio.gather(
            *(_publisher(nc, t, flood_s, n, seen) for n, nc in enumerate(raw)),
            *(_searcher(attacker, flood_s, seen) for _ in range(args.searchers)),
        )
        await asyncio.sleep(min(5.0, flood_s / 4))  # the flood is under way
        await _victim(victim, noisy, args.documents, args.every_s, "noisy")
        await attack
    finally:
        for nc in raw:
            with contextlib.suppress(Exception):
                await nc.close()
        await victim.close()
        await attacker.close()
    q, n = quiet.summary(), noisy.summary()
    ratio = (n["search_p95_s"] / q["search_p95_s"]) if q["search_p95_s"] else None
    return {
        "quiet": q,
        "attack": n,
        "search_p95_ratio": None if ratio is None else round(ratio, 2),
        "attacker": dict(seen),
        "goals": {
            "searchable_p99_at_most_10_s": (n["searchable_p99_s"] or 0) <= 10.0,
            "victim_never_refused": not n["refused"] and not q["refused"],
            "search_p95_at_most_3x_quiet": ratio is not None and ratio <= 3.0,
            "attacker_refused_quota_exceeded": seen.get("quota_exceeded", 0) > 0,
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.neighbour", description=__doc__)
    parser.add_argument("--seconds", type=float, default=60.0, help="the flood's length")
    parser.add_argument("--publishers", type=int, default=4)
    parser.add_argument("--searchers", type=int, default=16)
    parser.add_argument("--documents", type=int, default=20, help="the victim's, per phase")
    parser.add_argument("--every-s", type=float, default=2.0)
    parser.add_argument("--stream-mib", type=int, default=64)
    parser.add_argument("--out", type=Path, default=Path("neighbour-results.json"))
    args = parser.parse_args(argv)
    settings = {"KBUS_STREAM_MAX_BYTES": str(args.stream_mib * 1024**2)}
    with bench_stack("neighbour", settings) as stack:
        result = asyncio.run(measure(args, stack.nats_url, stack.prefix))
    result["command"] = "python -m bench.neighbour " + " ".join(argv or [])
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if all(result["goals"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
