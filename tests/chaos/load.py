"""What agents and publishers see during a chaos run: searches at a steady rate from several
clients (answered, failed, the longest stretch without an answer, latencies) and the time from
each publish to its receipt."""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import time
from dataclasses import dataclass, field

from kbus_client import KbClient, KbError
from kbus_contract.topology import Topology
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.errors import ServiceUnavailableError

from tests.chaos.ledger import LIBRARY, LedgerDoc

#: The library of the documents published before the monkey starts (then deleted).
QUIET_LIBRARY = "quiet"

#: Seconds the receipts are read for while their consumer answers 503 (no leader yet).
LEADERLESS_BOUND_S = 30.0

#: The wait each search is given: the client asks again within it after a retryable error.
SEARCH_WAIT_S = 10.0


def percentile(values: list[float], share: float) -> float:
    """The ``share`` quantile of ``values`` (0 for none), nearest rank."""
    if not values:
        return 0.0
    ranked = sorted(values)
    return ranked[min(len(ranked) - 1, max(0, round(share * len(ranked)) - 1))]


@dataclass
class SearchStats:
    """What the steady searches saw."""

    asked: int = 0
    answered: int = 0
    #: Error replies (and requests nothing answered) by code.
    errors: dict[str, int] = field(default_factory=dict)
    #: Errors that did not say the search may be asked again: each is a defect.
    not_retryable: int = 0
    #: The longest time between two successful answers (over all clients), seconds, and when
    #: it ended (seconds from the start of the searches).
    longest_gap_s: float = 0.0
    longest_gap_ended_s: float = 0.0
    #: Answers that took more than one try, and the most tries one took.
    retried: int = 0
    most_tries: int = 0
    latencies_s: list[float] = field(default_factory=list, repr=False)
    #: When each failed search was asked and when it ended, seconds from the start of the
    #: searches (to set beside the monkey's actions).
    failures: list[tuple[float, float, str]] = field(default_factory=list)
    #: When each failed search was asked (``time.monotonic()``).
    failed_asked_at: list[float] = field(default_factory=list, repr=False)

    def failed_between(self, start: float, end: float) -> int:
        """Failed searches asked between two ``time.monotonic()`` readings."""
        return sum(start <= at <= end for at in self.failed_asked_at)

    @property
    def answered_share(self) -> float:
        return self.answered / self.asked if self.asked else 0.0

    def summary(self) -> dict[str, float]:
        """Answered share and latency quantiles, for the report."""
        return {
            "answered_share": round(self.answered_share, 5),
            "p50_s": round(percentile(self.latencies_s, 0.5), 3),
            "p99_s": round(percentile(self.latencies_s, 0.99), 3),
            "max_s": round(max(self.latencies_s, default=0.0), 3),
        }


class SteadySearches:
    """Searches asked every ``1 / per_s`` seconds in all, spread over ``clients`` connections
    (each search on its own task, so a slow one does not hold the next back)."""

    def __init__(self, clients: list[KbClient], docs: list[LedgerDoc], seed: int) -> None:
        self.clients = clients
        self.docs = docs
        self.rng = random.Random(seed)
        self.last_ok = self.began = time.monotonic()

    async def run(self, per_s: float, stats: SearchStats) -> None:
        """Until cancelled."""
        self.began = self.last_ok = time.monotonic()
        pending: set[asyncio.Task[None]] = set()
        try:
            for turn in range(1 << 62):
                kb = self.clients[turn % len(self.clients)]
                task = asyncio.create_task(self._one(kb, self.rng.choice(self.docs), stats))
                pending.add(task)
                task.add_done_callback(pending.discard)
                await asyncio.sleep(1.0 / per_s)
        finally:
            for task in pending:
                task.cancel()
            stats.longest_gap_s = max(stats.longest_gap_s, time.monotonic() - self.last_ok)

    async def _one(self, kb: KbClient, doc: LedgerDoc, stats: SearchStats) -> None:
        stats.asked += 1
        started = time.monotonic()
        try:
            reply = await kb.search(
                doc.token, libraries=[LIBRARY], tenant=doc.tenant, timeout_s=SEARCH_WAIT_S
            )
        except asyncio.CancelledError:
            stats.asked -= 1  # still waiting when the searches stopped: neither way
            raise
        except KbError as exc:
            stats.errors[exc.code] = stats.errors.get(exc.code, 0) + 1
            stats.not_retryable += not exc.retryable
            ended = time.monotonic() - self.began
            stats.failures.append((round(started - self.began, 1), round(ended, 1), exc.code))
            stats.failed_asked_at.append(started)
            return
        now = time.monotonic()
        stats.answered += 1
        stats.latencies_s.append(now - started)
        stats.retried += reply.tries > 1
        stats.most_tries = max(stats.most_tries, reply.tries)
        if now - self.last_ok > stats.longest_gap_s:
            stats.longest_gap_s = now - self.last_ok
            stats.longest_gap_ended_s = round(now - self.began, 1)
        self.last_ok = now


async def searches_for(
    clients: list[KbClient], docs: list[LedgerDoc], per_s: float, seconds: float, seed: int
) -> SearchStats:
    """Steady searches for ``seconds`` (the idle reference, with nothing failing)."""
    stats = SearchStats()
    task = asyncio.create_task(SteadySearches(clients, docs, seed).run(per_s, stats))
    await asyncio.sleep(seconds)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await asyncio.sleep(SEARCH_WAIT_S / 4)  # the last few answers
    return stats


@dataclass
class Published:
    """When each document version was published (wall clock: receipts carry server time)."""

    at: dict[tuple[str, str, str], float] = field(default_factory=dict)

    def mark(self, tenant: str, document_id: str, version: str) -> None:
        self.at.setdefault((tenant, document_id, version), time.time())


async def quiet_receipts(kb: KbClient, count: int, tenant: str) -> dict[str, float]:
    """Publish-to-receipt times with nothing failing yet (the figure beside the run's): ``count``
    documents of a library of their own, each published and waited for in turn, then deleted
    (waiting for their removal) so that the checker finds only the ledger's."""
    delays: list[float] = []
    for i in range(count):
        started = time.monotonic()
        await kb.publish_document(
            library=QUIET_LIBRARY,
            document_id=f"quiet-{i:03d}",
            title=f"quiet {i}",
            text=" ".join(f"calm baseline sentence {i} number {n}." for n in range(40)),
            tenant=tenant,
            wait=True,
        )
        delays.append(time.monotonic() - started)
    for i in range(count):
        await kb.delete_document(
            library=QUIET_LIBRARY, document_id=f"quiet-{i:03d}", tenant=tenant, wait=True
        )
    return {
        "indexed": len(delays),
        "p50_s": round(statistics.median(delays), 2) if delays else 0.0,
        "p99_s": round(percentile(delays, 0.99), 2),
        "max_s": round(max(delays, default=0.0), 2),
    }


async def receipt_delays(
    js: JetStreamContext, topology: Topology, published: Published
) -> dict[str, float]:
    """Publish-to-receipt times of the versions that were indexed (the first receipt of each,
    stored time from the receipts stream): p50, p99 and max, seconds."""
    sub = await js.pull_subscribe(topology.document_indexed, stream=topology.receipts_stream.name)
    first: dict[tuple[str, str, str], float] = {}
    try:
        while batch := await _next_receipts(sub):
            for msg in batch:
                body = json.loads(msg.data)
                key = (body["tenant"], body["document_id"], body["version"])
                first.setdefault(key, msg.metadata.timestamp.timestamp())
    finally:
        await sub.unsubscribe()
    delays = [first[k] - at for k, at in published.at.items() if k in first]
    return {
        "indexed": len(delays),
        "p50_s": round(statistics.median(delays), 2) if delays else 0.0,
        "p99_s": round(percentile(delays, 0.99), 2),
        "max_s": round(max(delays, default=0.0), 2),
    }


async def _next_receipts(sub: JetStreamContext.PullSubscription) -> list[Msg]:
    """The next batch of receipts, or none once the stream is read. A fresh consumer on a
    cluster that was just rolled may have no leader for a moment (each fetch answers 503
    at once): asked again until it has one, for up to ``LEADERLESS_BOUND_S``."""
    deadline = time.monotonic() + LEADERLESS_BOUND_S
    while True:
        try:
            return await sub.fetch(500, timeout=2.0)
        except TimeoutError:
            return []
        except ServiceUnavailableError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)
