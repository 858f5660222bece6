"""A fair stage shares its work, not its messages, on a real NATS: tenants with random weights
publish chunk messages of 1 to 500 chunks, and a stage built from the runtime's own parts
(:class:`~kbus_runtime.lanes.LanePuller` taking the tenants' lanes by turn, a
:class:`~kbus_runtime.batching.Batcher` doing each message's chunks a quantum at a time, as the
embedder does) works through them. While every tenant has work waiting, each one's share of the
chunks done is within 20 % of its weight's share, and a one-chunk message published meanwhile
waits for at most its weight's worth of quanta of each other tenant (and the quanta already
under way)."""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from kbus_contract.lanes import Lane
from kbus_contract.topology import Topology
from kbus_contract.work import QUANTUM, work_header, work_of
from kbus_runtime.batching import Batcher
from kbus_runtime.declaring import declare_streams
from kbus_runtime.fair_share import FairShare, Stride
from kbus_runtime.lanes import LanePuller
from nats.aio.client import Client
from nats.aio.msg import Msg

#: Seconds one chunk of work takes the stage (its model call, here a pause).
CHUNK_S = 0.0004
WORKERS = 8
#: Chunks each tenant has waiting when the stage starts (about 1.6 s of its work alone).
BACKLOG = 4_000


@dataclass
class Log:
    """The quanta the stage worked on: (tenant, chunks, when it started), in order."""

    quanta: list[tuple[str, int, float]] = field(default_factory=list)
    done: Counter[str] = field(default_factory=Counter)


Calls = Batcher[tuple[str, int], None]


def _stage(
    nc: Client, topology: Topology, weights: dict[str, float], log: Log
) -> tuple[LanePuller, Calls]:
    """The stage's source of messages and its model calls (a pause per chunk)."""

    async def run(batch: list[tuple[str, int]]) -> list[None]:
        started = time.monotonic()
        for tenant, chunks in batch:
            log.quanta.append((tenant, chunks, started))
        await asyncio.sleep(CHUNK_S * sum(chunks for _, chunks in batch))
        return [None] * len(batch)

    calls: Calls = Batcher(
        run, max_size=QUANTUM, in_flight=1, size=lambda item: item[1], turns=Stride(weights)
    )
    stage = topology.stage("embedder")
    share = FairShare(weights, window=stage.window)
    return LanePuller(lambda: nc, topology, stage, share, poll_s=0.02), calls


async def _handle(calls: Calls, log: Log, message: Msg) -> None:
    """A message's chunks, a quantum at a time (each a turn of its tenant), then its ack."""
    tenant = message.subject.rsplit(".", 1)[-1]
    chunks = int(work_of(message.headers, message.data))
    pieces = [min(QUANTUM, chunks - start) for start in range(0, chunks, QUANTUM)]
    await asyncio.gather(*(calls.submit((tenant, n), tenant) for n in pieces))
    log.done[tenant] += chunks
    await message.ack()


async def _publish(nc: Client, topology: Topology, tenant: str, chunks: int) -> None:
    js = nc.jetstream()
    subject = topology.in_lane("chunks.ready", Lane.BULK, tenant=tenant)
    await js.publish(subject, b"{}", headers=work_header(chunks))


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_each_tenant_gets_its_weight_s_share_of_the_work_and_a_small_message_waits_little(
    nc: Client, topology: Topology, seed: int
) -> None:
    rng = random.Random(seed)
    await declare_streams(nc.jetstream(), topology)
    weights = {f"t{n}": float(rng.choice([1, 2, 3])) for n in range(rng.randint(2, 4))}
    # One tenant's messages are small, another's large, any others' anywhere between.
    spreads = [(1, 20), (300, 500)]
    for n, tenant in enumerate(weights):
        low, high = spreads[n] if n < len(spreads) else sorted(rng.sample(range(1, 501), 2))
        backlog = 0
        while backlog < BACKLOG:
            chunks = rng.randint(low, high)
            await _publish(nc, topology, tenant, chunks)
            backlog += chunks
    log = Log()
    puller, calls = _stage(nc, topology, weights, log)
    running = True
    stopping = asyncio.Event()

    async def consume(message: Msg) -> None:
        await _handle(calls, log, message)

    tasks = [asyncio.create_task(puller.watch(lambda: running))]
    tasks += [
        asyncio.create_task(puller.work(consume, lambda: running, stopping)) for _ in range(WORKERS)
    ]
    try:
        await asyncio.sleep(2.0)  # under way: every tenant's lane is being served
        published = time.monotonic()
        await _publish(nc, topology, "probe", 1)
        await _until(lambda: log.done["probe"] == 1, 30.0)
        window_end = time.monotonic()
        await asyncio.sleep(4.0)
    finally:
        running = False
        stopping.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # Shares over the window in which every tenant still had work waiting.
    last = {t: max(at for tenant, _, at in log.quanta if tenant == t) for t in weights}
    end = min(last.values())
    work: Counter[str] = Counter()
    for tenant, chunks, at in log.quanta:
        if tenant in weights and at < end:
            work[tenant] += chunks
    total, weight = sum(work.values()), sum(weights.values())
    assert total > 10 * QUANTUM * len(weights), work
    for tenant, w in weights.items():
        expected = w / weight
        assert abs(work[tenant] / total - expected) <= 0.2 * expected, (weights, work)
    # The probe waited for at most its weight's worth of quanta of each other tenant (a
    # tenant of weight 3 takes three turns to the probe's one), and those under way.
    probe_at = next(at for tenant, _, at in log.quanta if tenant == "probe")
    before = sum(c for t, c, at in log.quanta if t != "probe" and published <= at < probe_at)
    turns = sum(math.ceil(w) for w in weights.values())
    assert before <= (turns + 2) * QUANTUM, (before, weights)
    assert probe_at <= window_end


async def _until(done: Callable[[], bool], within_s: float) -> None:
    deadline = time.monotonic() + within_s
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError("the probe's message was not worked on in time")
        await asyncio.sleep(0.01)
