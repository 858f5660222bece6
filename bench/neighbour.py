"""A noisy neighbour, side by side in one run: one tenant's flood of large documents and costly
searches against another tenant's small documents and ordinary searches.

    python -m bench.neighbour [--mode both|index|search|import] [--seconds 60] [--publishers 4]
                              [--searchers 16] [--quiet-s 40] [--every-s 2]

One stack at a deployment's defaults (1 GiB streams, every tenant's budget derived from them),
each stage in its own process as a deployment runs them (the indexer apart from the query
searcher; ``--one-searcher``: both in one process, as ``make up`` runs them).
The victim publishes a one-paragraph document every ``--every-s`` seconds, each waited for until
searchable, and beside it runs an ordinary search (k=5) every ``--search-every-s``. Three phases
in one run: ``--quiet-s`` quiet, while the attacker floods, and ``--after-s`` after the flood.
The attacker (``--mode``):

- ``index``: ``--publishers`` raw publishers send documents of 250,000 characters up to the
  payload limit as fast as the gate answers, every 60-character segment carrying a token of
  its own (so the embedding cache answers nothing);
- ``search``: ``--searchers`` concurrent searches as costly as one may be: k=100,
  rerank_depth=50, budget_tokens=32768, expand=document, a 300-word query, the relevance
  floors off (over a library of the attacker's large documents published before the quiet
  phase);
- ``both``: the two at once;
- ``import``: one publisher sends SciFact's documents (``--dataset``) as fast as the gate takes
  them, and the victim only searches (``--search-every-s 0.2``: five a second): search during
  an import, its p99 against the quiet p99 (goal: at most 2 x).

Reported per phase: the victim's publish-to-searchable p50/p99 and what was refused or lost,
its search p95, the ratios to the quiet phase, how long after the flood the victim's times came
back, and the attacker's answers by kind. Goals (docs/performance.md, "A noisy neighbour"):
searchable p99 at most 10 s with nothing refused or lost, search p95 at most 3 x the quiet
one, back to quiet within 30 s of the flood's end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import random
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

from bench.corpus import as_added
from bench.stack import bench_stack

VICTIM, ATTACKER, LIBRARY = "victim", "attacker", "notes"
#: Characters of the attacker's documents: from a quarter of the payload limit to near it.
SMALLEST, LARGEST = 250_000, 1_000_000
#: A costly search, within every bound a request may ask for.
COSTLY: dict[str, Any] = {
    "k": 100,
    "rerank_depth": 50,
    "budget_tokens": 32_768,
    "expand": "document",
    "min_evidence": -1.0,
    "min_similarity": -1.0,
}
#: The words of the flood's text (each segment also holds a token of its own).
FLOOD_WORDS = (
    "the quarterly report describes revenue growth across regions and the plans of each team "
    "for the next year with risks and mitigations"
)
#: The victim's goals, in one place (the result's "goals").
SEARCHABLE_P99_S, SEARCH_RATIO, BACK_WITHIN_S = 10.0, 3.0, 30.0
#: Search during an import: its p99 at most this times the idle p99.
IMPORT_RATIO = 2.0


@dataclass
class Phase:
    """What the victim saw in one phase."""

    searchable_s: list[float] = field(default_factory=list)
    search_s: list[float] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    #: (seconds since the flood ended, the operation's seconds, "search" or "searchable").
    timeline: list[tuple[float, float, str]] = field(default_factory=list)
    #: Each search's milliseconds per stage, as the searcher measured them.
    stages: dict[str, list[float]] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        return {
            "documents": len(self.searchable_s),
            "searchable_p50_s": _quantile(self.searchable_s, 0.5),
            "searchable_p99_s": _quantile(self.searchable_s, 0.99),
            "searches": len(self.search_s),
            "search_p50_s": _quantile(self.search_s, 0.5),
            "search_p95_s": _quantile(self.search_s, 0.95),
            "search_p99_s": _quantile(self.search_s, 0.99),
            "stage_p95_ms": {k: _quantile(v, 0.95) for k, v in sorted(self.stages.items())},
            "refused": self.refused,
        }


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def flood_text(number: int, size: int) -> str:
    """A document of about ``size`` characters whose every 60-character segment holds a token
    no other segment of any flood document holds."""
    words = FLOOD_WORDS.split()
    segments = []
    for segment in range(size // 60):
        body = " ".join(words[(segment + i) % len(words)] for i in range(6))
        segments.append(f"t{number:x}x{segment:x} {body}"[:59].ljust(59))
    return " ".join(segments)


@dataclass
class Victim:
    """The victim: a document every ``every_s``, each waited for until searchable, and an
    ordinary search every ``search_every_s``, side by side."""

    kb: KbClient
    every_s: float
    search_every_s: float
    flood_ended: float | None = None
    numbers: int = 0
    searched: int = 0
    #: Whether it publishes documents (else it only searches).
    publishing: bool = True
    #: What it asks (none: a word of its own notes).
    questions: list[str] = field(default_factory=list)

    async def run(self, phase: Phase, seconds: float, tag: str) -> None:
        """Both loops for ``seconds`` (the last document waited for, however long)."""
        end = time.monotonic() + seconds
        loops = [self._searching(phase, end, tag)]
        if self.publishing:
            loops.append(self._publishing(phase, end, tag))
        await asyncio.gather(*loops)

    async def _publishing(self, phase: Phase, end: float, tag: str) -> None:
        while time.monotonic() < end:
            started = time.monotonic()
            await self._publish(phase, tag)
            await asyncio.sleep(max(0.0, self.every_s - (time.monotonic() - started)))

    async def _searching(self, phase: Phase, end: float, tag: str) -> None:
        while time.monotonic() < end:
            started = time.monotonic()
            await self._search(phase, tag)
            await asyncio.sleep(max(0.0, self.search_every_s - (time.monotonic() - started)))

    async def _publish(self, phase: Phase, tag: str) -> None:
        number = self.numbers
        self.numbers += 1
        started = time.monotonic()
        try:
            await self.kb.publish_document(
                library=LIBRARY,
                document_id=f"{tag}-{number}",
                text=f"The {tag}word{number} note of the victim, one short paragraph.",
                wait=True,
                timeout_s=300,
            )
            took = time.monotonic() - started
            phase.searchable_s.append(took)
            self._mark(phase, started, took, "searchable")
        except Exception as exc:
            phase.refused.append(f"{type(exc).__name__}: {exc}")

    async def _search(self, phase: Phase, tag: str) -> None:
        started = time.monotonic()
        try:
            query = (
                self.questions[self.searched % len(self.questions)]
                if self.questions
                else f"{tag}word{max(0, self.numbers - 1)} note"
            )
            self.searched += 1
            reply = await self.kb.search(query, libraries=[LIBRARY], k=5)
            for stage, ms in reply.timings.model_dump().items():
                phase.stages.setdefault(stage, []).append(ms)
        except Exception as exc:
            phase.refused.append(f"search {type(exc).__name__}: {exc}")
        took = time.monotonic() - started
        phase.search_s.append(took)
        self._mark(phase, started, took, "search")

    def _mark(self, phase: Phase, started: float, took: float, kind: str) -> None:
        if self.flood_ended is not None:
            phase.timeline.append((started + took - self.flood_ended, took, kind))


async def _publisher(
    nc: Client, t: Topology, end: float, number: int, seen: Counter[str], rng: random.Random
) -> None:
    """Raw publishes of large documents on the attacker's own subject, as fast as the gate
    answers, answers counted (a refused text is sent again as it is: a new one is made only
    once one is stored)."""
    sent = 0
    body = b""
    while time.monotonic() < end:
        if not body:
            size = rng.randrange(SMALLEST, LARGEST)
            body = (
                DocumentAdded(
                    tenant=ATTACKER,
                    library=LIBRARY,
                    document_id=f"flood-{number}-{sent}",
                    title="flood",
                    text=flood_text(number * 100_000 + sent, size),
                )
                .model_dump_json()
                .encode()
            )
            sent += 1
        try:
            await nc.jetstream(timeout=10).publish(t.added(ATTACKER, LIBRARY), body)
            seen["stored"] += 1
            body = b""
        except APIError as exc:
            seen[str(exc.description or exc.code).partition(":")[0]] += 1
            await asyncio.sleep(0.05)
        except Exception as exc:
            seen[type(exc).__name__] += 1


def costly_query(rng: random.Random) -> str:
    words = flood_text(rng.randrange(1 << 20), 3_000).split()
    return " ".join(rng.choice(words) for _ in range(300))


async def _searcher(
    kb: KbClient, end: float, seen: Counter[str], rng: random.Random, polite: bool = False
) -> None:
    """Costly searches, one after another (``polite``: waiting as long as a refusal says)."""
    while time.monotonic() < end:
        try:
            await kb.search(costly_query(rng), libraries=[LIBRARY], timeout_s=1.0, **COSTLY)
            seen["searched"] += 1
        except Exception as exc:
            seen[getattr(exc, "code", type(exc).__name__)] += 1
            if polite:
                await asyncio.sleep(getattr(exc, "retry_after_s", None) or 0.0)


async def _importer(nc: Client, t: Topology, end: float, dataset: Path, seen: Counter[str]) -> None:
    """A dataset's documents, one after another as fast as the gate takes them (one it refuses
    for the tenant's budget is sent again after a moment)."""
    with (dataset / "corpus.jsonl").open() as lines:
        for line in lines:
            if time.monotonic() >= end:
                return
            if not line.strip():
                continue
            body = as_added(json.loads(line), ATTACKER, LIBRARY).model_dump_json().encode()
            while time.monotonic() < end:
                try:
                    await nc.jetstream(timeout=10).publish(t.added(ATTACKER, LIBRARY), body)
                    seen["stored"] += 1
                    break
                except APIError as exc:
                    seen[str(exc.description or exc.code).partition(":")[0]] += 1
                    await asyncio.sleep(0.05)


async def _attack(args: argparse.Namespace, url: str, prefix: str) -> dict[str, int]:
    t = Topology(prefix)
    rng = random.Random(args.seed)
    seen: Counter[str] = Counter()
    publishers = args.publishers if args.mode in ("both", "index") else 0
    searchers = args.searchers if args.mode in ("both", "search") else 0
    raw = [await nats.connect(url) for _ in range(publishers)]
    # Each search asked once, and given up on after a second (a refusal it ignores is answered,
    # or left unanswered past the replica's answers a second: it asks again all the same).
    kb = KbClient(
        await nats.connect(url), prefix=prefix, tenant=ATTACKER, timeout_s=5.0, retry=None
    )
    end = time.monotonic() + args.seconds
    try:
        await asyncio.gather(
            *(
                _publisher(nc, t, end, n, seen, random.Random(rng.random()))
                for n, nc in enumerate(raw)
            ),
            *(
                _searcher(kb, end, seen, random.Random(rng.random()), args.polite)
                for _ in range(searchers)
            ),
            *([_importer(kb.nc, t, end, args.dataset, seen)] if args.mode == "import" else []),
        )
    finally:
        for nc in raw:
            with contextlib.suppress(Exception):
                await nc.close()
        await kb.close()
    return dict(seen)


def attack(url: str, prefix: str, args: argparse.Namespace, out: Any) -> None:
    """The attacker, in a process of its own at the lowest priority: its cores would be its
    own machine's (here its client's work must take no core kbus needs, and never hold up the
    victim's event loop). What it sends still reaches kbus as fast as it can make it."""
    os.nice(19)
    out.put(asyncio.run(_attack(args, url, prefix)))


def _train_questions(dataset: Path) -> list[str]:
    """The dataset's training questions (its test questions are read once, elsewhere)."""
    with (dataset / "qrels" / "train.tsv").open() as lines:
        wanted = {line.split("\t", 1)[0] for line in list(lines)[1:]}
    with (dataset / "queries.jsonl").open() as lines:
        asked = [json.loads(line) for line in lines if line.strip()]
    return [q["text"] for q in asked if q["_id"] in wanted]


async def _seed_victim(kb: KbClient, dataset: Path, documents: int = 200) -> None:
    """The victim's own library to search during an import: the first documents of the
    dataset, each waited for."""
    with (dataset / "corpus.jsonl").open() as lines:
        docs = [json.loads(line) for _, line in zip(range(documents), lines, strict=False)]
    await asyncio.gather(
        *(
            kb.publish_document(
                library=LIBRARY,
                document_id=doc["_id"],
                title=doc.get("title", ""),
                text=doc["text"] or doc.get("title") or "-",
                wait=True,
                timeout_s=600,
            )
            for doc in docs
        )
    )


async def _seed_attacker(kb: KbClient, documents: int) -> None:
    """Large documents for the costly searches to read (before the quiet phase)."""
    for n in range(documents):
        await kb.publish_document(
            library=LIBRARY,
            document_id=f"seed-{n}",
            title="seed",
            text=flood_text(900_000 + n, SMALLEST),
            wait=True,
            timeout_s=900,
        )


def back_within(after: Phase, quiet: Phase, window_s: float = 5.0) -> float | None:
    """Seconds after the flood's end from which the victim's times met the goals again: the
    end of the first ``window_s`` window from which on every window's search p95 is within
    the ratio of the quiet p95 and every document became searchable within the bound (None:
    the last window still missed)."""
    search_bound = SEARCH_RATIO * (quiet.summary()["search_p95_s"] or 0.0)
    windows: dict[int, list[tuple[float, str]]] = {}
    for at, took, kind in after.timeline:
        windows.setdefault(int(at // window_s), []).append((took, kind))

    def met(ops: list[tuple[float, str]]) -> bool:
        searches = [took for took, kind in ops if kind == "search"]
        p95 = _quantile(searches, 0.95) or 0.0
        slow = any(kind == "searchable" and took > SEARCHABLE_P99_S for took, kind in ops)
        return p95 <= search_bound and not slow

    missed = [n for n, ops in windows.items() if not met(ops)]
    if not missed:
        return 0.0
    if max(missed) == max(windows):
        return None
    return round((max(missed) + 1) * window_s, 1)


async def measure(args: argparse.Namespace, url: str, prefix: str) -> dict[str, Any]:
    victim_kb = KbClient(await nats.connect(url), prefix=prefix, tenant=VICTIM)
    importing = args.mode == "import"
    victim = Victim(victim_kb, args.every_s, args.search_every_s, publishing=not importing)
    quiet, noisy, after = Phase(), Phase(), Phase()
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    try:
        if args.mode in ("both", "search"):
            attacker = KbClient(await nats.connect(url), prefix=prefix, tenant=ATTACKER)
            async with attacker:
                await _seed_attacker(attacker, args.seed_documents)
        if importing:
            await _seed_victim(victim_kb, args.dataset)
            victim.questions = _train_questions(args.dataset)
        await victim.run(quiet, args.quiet_s, "quiet")
        flooder = context.Process(target=attack, args=(url, prefix, args, results))
        flooder.start()
        end = time.monotonic() + args.seconds
        await asyncio.sleep(min(5.0, args.seconds / 4))  # the flood is under way
        await victim.run(noisy, end - time.monotonic(), "noisy")
        seen = await asyncio.to_thread(results.get, True, args.seconds + 120)
        await asyncio.to_thread(flooder.join, 30)
        victim.flood_ended = time.monotonic()
        if not importing:
            await victim.run(after, args.after_s, "after")
    finally:
        await victim_kb.close()
    q, n, a = quiet.summary(), noisy.summary(), after.summary()
    ratio = (n["search_p95_s"] / q["search_p95_s"]) if q["search_p95_s"] else None
    back = back_within(after, quiet)
    if importing:
        p99 = (n["search_p99_s"] / q["search_p99_s"]) if q["search_p99_s"] else None
        return {
            "mode": args.mode,
            "quiet": q,
            "import": n,
            "search_p99_ratio": None if p99 is None else round(p99, 2),
            "importer": dict(seen),
            "goals": {
                "search_p99_at_most_2x_idle": p99 is not None and p99 <= IMPORT_RATIO,
                "victim_never_refused": not (q["refused"] or n["refused"]),
            },
        }
    return {
        "mode": args.mode,
        "quiet": q,
        "flood": n,
        "after": a,
        "search_p95_ratio": None if ratio is None else round(ratio, 2),
        "back_to_quiet_s": back,
        "attacker": dict(seen),
        "goals": {
            "searchable_p99_at_most_10_s": (n["searchable_p99_s"] or 0) <= SEARCHABLE_P99_S,
            "victim_never_refused_nor_lost": not (q["refused"] or n["refused"] or a["refused"]),
            "search_p95_at_most_3x_quiet": ratio is not None and ratio <= SEARCH_RATIO,
            "back_to_quiet_within_30_s": back is not None and back <= BACK_WITHIN_S,
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.neighbour", description=__doc__)
    parser.add_argument("--mode", choices=("both", "index", "search", "import"), default="both")
    parser.add_argument("--dataset", type=Path, default=Path("../shared/datasets/scifact"))
    parser.add_argument("--seconds", type=float, default=60.0, help="the flood's length")
    parser.add_argument("--after-s", type=float, default=40.0, help="the victim's, after it")
    parser.add_argument("--publishers", type=int, default=4)
    parser.add_argument("--searchers", type=int, default=16)
    parser.add_argument("--seed-documents", type=int, default=2)
    parser.add_argument("--quiet-s", type=float, default=40.0, help="the quiet phase's length")
    parser.add_argument("--every-s", type=float, default=2.0, help="the victim's documents")
    parser.add_argument("--search-every-s", type=float, default=0.5, help="its searches")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--polite", action="store_true", help="the attacker waits as long as a refusal says"
    )
    parser.add_argument("--set", action="append", default=[], help="KEY=VALUE for the services")
    parser.add_argument(
        "--one-searcher",
        action="store_true",
        help="index and answer searches in one searcher process (make up's way), instead of "
        "an indexer and a query searcher apart (a deployment's)",
    )
    parser.add_argument("--out", type=Path, default=Path("neighbour-results.json"))
    args = parser.parse_args(argv)
    settings = dict(item.split("=", 1) for item in args.set)
    with bench_stack("neighbour", settings, deployed=not args.one_searcher) as stack:
        result = asyncio.run(measure(args, stack.nats_url, stack.prefix))
    result["command"] = "python -m bench.neighbour " + " ".join(argv or [])
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if all(result["goals"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
