"""Tombstones on a real NATS: the bucket, and the copy the indexer's first check reads."""

from __future__ import annotations

import asyncio

from kbus_contract import DocumentDeleted
from kbus_contract.topology import Topology
from kbus_searcher.state.tombstones import Tombstones
from nats.aio.client import Client


async def _copy_barrier(tombstones: Tombstones, *scope: str, want: int) -> int:
    """The copy's answer once it shows ``want`` (or whatever it shows after 5 s)."""
    for _ in range(100):
        found = await tombstones.barrier(*scope, fresh=False)
        if found == want:
            return found
        await asyncio.sleep(0.05)
    return found


async def test_the_copy_follows_deletions_and_a_fresh_read_never_waits_for_it(
    nc: Client, topology: Topology
) -> None:
    tombstones = Tombstones(topology.tombstones_kv)
    await tombstones.open(nc.jetstream())
    await tombstones.record(DocumentDeleted(tenant="t1", library="lib"), 40)
    await tombstones.follow()
    try:
        # Existing tombstones are in the copy, and ones recorded while following arrive.
        assert await _copy_barrier(tombstones, "t1", "lib", "doc", want=40) == 40
        await tombstones.record(DocumentDeleted(tenant="t1", library="lib", document_id="d"), 70)
        assert await tombstones.barrier("t1", "lib", "d") == 70
        assert await _copy_barrier(tombstones, "t1", "lib", "d", want=70) == 70
        # The widest scope counts for every library and document under it.
        await tombstones.record(DocumentDeleted(tenant="t1"), 90)
        assert await _copy_barrier(tombstones, "t1", "other", "x", want=90) == 90
        assert await tombstones.barrier("t2", "lib", "doc", fresh=False) == 0
    finally:
        await tombstones.stop()
    # Not following: the bucket answers, also when a copy was asked for.
    await tombstones.record(DocumentDeleted(tenant="t3"), 120)
    assert await tombstones.barrier("t3", "lib", "doc", fresh=False) == 120
