"""The versions bucket on a real NATS: a later publish is never replaced by an earlier one."""

from __future__ import annotations

from kbus_contract.buckets import scope_key
from kbus_contract.topology import Topology
from kbus_searcher.state.versions import Versions
from nats.aio.client import Client


async def test_advance_only_moves_forward_also_when_the_copy_lags(
    nc: Client, topology: Topology
) -> None:
    versions = Versions(topology.versions_kv)
    await versions.open(nc.jetstream())
    await versions.follow()
    try:
        assert await versions.advance("t1", "lib", "doc", 10, "v1")
        assert await versions.advance("t1", "lib", "doc", 10, "v1")  # the same publish again
        assert not await versions.advance("t1", "lib", "doc", 5, "v0")
        assert await versions.advance("t1", "lib", "doc", 20, "v2")
        # Another indexer wrote an entry this copy has not seen yet: the create fails and the
        # entry is read, so an earlier publish does not win.
        key = scope_key("t1", "lib", "fresh")
        await versions.kv.put(key, b"30 theirs")
        assert not await versions.advance("t1", "lib", "fresh", 25, "mine")
        assert (await versions.kv.get(key)).value == b"30 theirs"
    finally:
        await versions.stop()
    entry = await versions.kv.get(scope_key("t1", "lib", "doc"))
    assert entry.value == b"20 v2"


async def test_a_text_cut_again_takes_the_place_of_its_publish_and_no_later_one(
    nc: Client, topology: Topology
) -> None:
    versions = Versions(topology.versions_kv)
    await versions.open(nc.jetstream())
    assert await versions.advance("t1", "lib", "doc", 10, "v1")
    assert await versions.advance("t1", "lib", "doc", 10, "v1+profile3")  # cut again
    assert not await versions.advance("t1", "lib", "doc", 10, "v1")  # the original, redelivered
    assert not await versions.advance("t1", "lib", "doc", 10, "v1+profile2")
    assert await versions.advance("t1", "lib", "doc", 11, "v2")  # the publisher's next
    assert not await versions.advance("t1", "lib", "doc", 10, "v1+profile9")
    entry = await versions.kv.get(scope_key("t1", "lib", "doc"))
    assert entry.value == b"11 v2"
