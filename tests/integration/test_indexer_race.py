"""Two indexer replicas racing on publishes of one document, driven through the failing order
(issue 56): whatever order the deliveries come in, whichever replica takes each, and wherever
one is killed, no chunk of an older publish is left beside the searchable one once every
message is settled.

The replicas are the real :class:`~kbus_searcher.index.indexer.Indexer` on the real store and
buckets; a test-only subclass pauses one after its check of what is stored (so the other can
make a later publish searchable meanwhile) and kills it after its write, before its own checks
(the message is then delivered again, as JetStream does).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from kbus_contract import EmbeddingsReady
from kbus_contract.errors import TransientError
from kbus_contract.topology import Topology
from kbus_runtime.bus import make_broker
from kbus_runtime.declaring import declare_streams
from kbus_runtime.settings import BusSettings
from kbus_runtime.stage import Stage
from kbus_runtime.stage_metrics import StageMetrics
from kbus_searcher.index.indexer import Indexer
from kbus_searcher.index.late_writes import LATE_WRITE_S, OvertakenError
from kbus_searcher.state.standing import Standing
from kbus_searcher.state.tombstones import Tombstones
from kbus_searcher.state.versions import Versions
from kbus_searcher.store import ChunkStore, Scope
from nats.aio.client import Client
from prometheus_client import CollectorRegistry

from tests.helpers import ready


class KilledError(Exception):
    """The replica was killed between its write and its own checks."""


class Replica(Indexer):
    """An indexer replica the test pauses after its store check and kills after its write."""

    pause = False
    kill = False

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.checked = asyncio.Event()
        self.resume = asyncio.Event()

    async def _admitted(
        self, readies: list[EmbeddingsReady], live: list[int], outcomes: list[Exception | None]
    ) -> list[int]:
        # Right after the rulings before the write (what is stored, what is deleted).
        if self.pause:
            self.checked.set()
            await self.resume.wait()
        return await super()._admitted(readies, live, outcomes)

    async def _complete(self, readies: list[EmbeddingsReady]) -> list[bool]:
        if self.kill:
            raise KilledError
        return await super()._complete(readies)


@dataclass
class Replicas:
    a: Replica
    b: Replica
    store: ChunkStore


@pytest.fixture
async def replicas(
    nc: Client, bus: BusSettings, topology: Topology, store: ChunkStore
) -> AsyncIterator[Replicas]:
    js = nc.jetstream()
    await declare_streams(js, topology)
    versions, tombstones = Versions(topology.versions_kv), Tombstones(topology.tombstones_kv)
    await versions.open(js)
    await tombstones.open(js)
    registry = CollectorRegistry()
    broker = make_broker(bus, registry, "indexer")
    await broker.connect()
    stage = Stage("indexer", broker, topology, StageMetrics(registry))

    def replica() -> Replica:
        return Replica(stage, store.writes, Standing(tombstones, versions), CollectorRegistry())

    try:
        yield Replicas(replica(), replica(), store)
    finally:
        await broker.stop()


async def _older_written_after_newer(
    r: Replicas, older: EmbeddingsReady, newer: EmbeddingsReady, *, written: bool = True
) -> None:
    """A checks the store (nothing newer yet), B makes the newer publish searchable and retires
    what is older, then A writes the older one and is killed before its own checks (where its
    check found nothing newer: ``written``; else it wrote nothing and was not killed)."""
    r.a.pause, r.a.kill = True, True
    first = asyncio.create_task(r.a._index_group([older]))
    await r.a.checked.wait()
    [outcome] = await r.b._index_group([newer])
    assert outcome is None or isinstance(outcome, OvertakenError)  # (an even newer one won)
    r.a.resume.set()
    if written:
        with pytest.raises(KilledError):
            await first
    else:
        with contextlib.suppress(KilledError):
            await first
    r.a.pause, r.a.kill = False, False
    r.a.checked.clear()
    r.a.resume.clear()


async def _stored(store: ChunkStore, *publishes: EmbeddingsReady) -> list[int]:
    return [await store.writes.count_stored(p) for p in publishes]


async def test_an_older_publish_written_after_a_newer_one_is_removed_when_delivered_again(
    replicas: Replicas,
) -> None:
    """The interleaving of the cluster chaos run (doc-00056): both replicas killed early, the
    older version's first chunk left beside the newer version's."""
    v1 = ready("t1", "lib", "doc", "v1", ["old one", "old two"], sequence=46)
    v2 = ready("t1", "lib", "doc", "v2", ["new one"], sequence=125)
    await _older_written_after_newer(replicas, v1, v2)
    assert await _stored(replicas.store, v1, v2) == [2, 1]  # the killed write landed
    # JetStream delivers v1 again, to either replica: it is superseded, and what an earlier
    # delivery of it wrote goes before it is acked.
    [outcome] = await replicas.b._index_group([v1])
    assert isinstance(outcome, OvertakenError)  # undone, not indexed
    assert await _stored(replicas.store, v1, v2) == [0, 1]


async def test_a_write_that_lands_after_its_delivery_failed_is_undone_before_it_is_acked(
    replicas: Replicas,
) -> None:
    """The interleaving of the second cluster run (seed 3: doc-00029, doc-00374): a delivery of
    the older publish fails while a Weaviate node is down (its client gives up; the server goes
    on), the newer publish becomes searchable, the older one's redelivery is undone, and then
    the write the first delivery sent lands. A redelivered publish that is undone is settled
    only after a second undo, LATE_WRITE_S later."""
    v1 = ready("t1", "lib", "late", "v1", ["old one", "old two", "old three"], sequence=63)
    v2 = ready("t1", "lib", "late", "v2", ["new one", "new two"], sequence=143)
    assert await replicas.b._index_group([v2]) == [None]
    with pytest.raises(TransientError) as paused:
        await replicas.a.index(v1, redelivered=True)  # superseded: undone, not yet settled
    assert paused.value.retry_after_s == LATE_WRITE_S
    assert await replicas.store.writes.write([v1]) == [None]  # the first delivery's write lands
    # Delivered again after the pause, to the same replica: undone again, and settled. (The
    # other replica would pause it once more first: it holds no mark of the first undo.)
    await replicas.a.index(v1, redelivered=True)
    assert await _stored(replicas.store, v1, v2) == [0, 2]
    await replicas.a.index(v1)  # a first delivery has no earlier write to wait for
    assert await _stored(replicas.store, v1, v2) == [0, 2]


async def test_a_publish_the_server_gave_up_on_leaves_nothing(replicas: Replicas) -> None:
    """Killed after every write until max deliveries: the dead-letterer hands it to the
    indexer, which removes what it wrote."""
    v1 = ready("t1", "lib", "gone", "v1", ["old one"], sequence=46)
    v2 = ready("t1", "lib", "gone", "v2", ["new one"], sequence=125)
    await _older_written_after_newer(replicas, v1, v2)
    subject = replicas.a.stage.topology.of_document("embeddings.ready", v1.document)
    await replicas.b.given_up(subject, v1.model_dump_json().encode())
    assert await _stored(replicas.store, v1, v2) == [0, 1]


@pytest.mark.parametrize("seed", range(6))
async def test_random_interleavings_leave_only_the_latest_publish(
    replicas: Replicas, seed: int
) -> None:
    """Publishes of one document in a random order of delivery, each taken by either replica,
    pairs raced in the failing order, replicas killed at random after their write (the message
    comes again): once every message is settled, only the latest publish's chunks are stored,
    and it is the searchable one."""
    rng = random.Random(seed)
    document = f"doc{seed}"
    publishes = [
        ready(
            "t1",
            "lib",
            document,
            f"v{n}",
            [f"text {n} {i}" for i in range(rng.randint(1, 4))],
            sequence=10 + 10 * n,
            seed=n,
        )
        for n in range(5)
    ]
    pending = list(publishes)
    rng.shuffle(pending)
    while pending:
        if len(pending) >= 2 and rng.random() < 0.5:
            one, other = pending.pop(0), pending.pop(0)
            older, newer = sorted((one, other), key=lambda p: p.document.sequence)
            await _older_written_after_newer(replicas, older, newer, written=False)
            pending.insert(rng.randint(0, len(pending)), older)  # delivered again later
            continue
        message = pending.pop(0)
        replica = rng.choice([replicas.a, replicas.b])
        replica.kill = rng.random() < 0.3
        try:
            await replica._index_group([message])
        except KilledError:
            pending.insert(rng.randint(0, len(pending)), message)
        finally:
            replica.kill = False
    latest = publishes[-1]
    stored = await _stored(replicas.store, *publishes)
    assert stored == [0] * (len(publishes) - 1) + [len(latest.chunks)], stored
    whole = replicas.store.view(Scope.whole("t1", ("lib",), "the test counts"))
    versions, _ = await whole.versions(None, None, 100)
    assert versions[document][0] == latest.document.version
