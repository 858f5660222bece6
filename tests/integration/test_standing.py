"""A publish's standing (kbus_searcher.state.standing), on real buckets, over every
interleaving of docs/reliability.md's table "The indexer's rulings": what each publish is ruled
before its write and after it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from kbus_contract import ContentType, DocumentDeleted, DocumentRef
from kbus_contract.topology import Topology
from kbus_runtime.withdrawals import Withdrawals
from kbus_searcher.state.standing import Ruling, Standing
from kbus_searcher.state.syncmarks import SyncMarks
from kbus_searcher.state.tombstones import Tombstones
from kbus_searcher.state.versions import Versions
from nats.aio.client import Client

K, W, D, U, S, OVER = (
    Ruling.KEEP,
    Ruling.WITHDRAWN,
    Ruling.DELETED,
    Ruling.UNLISTED,
    Ruling.SUPERSEDED,
    Ruling.OVERTAKEN,
)


@dataclass
class Buckets:
    standing: Standing
    tombstones: Tombstones
    versions: Versions
    syncs: SyncMarks
    withdrawals: Withdrawals


@pytest.fixture
async def buckets(nc: Client, topology: Topology) -> AsyncIterator[Buckets]:
    js = nc.jetstream()
    tombstones, versions = Tombstones(topology.tombstones_kv), Versions(topology.versions_kv)
    syncs = SyncMarks(topology.sync_marks_kv, topology.sync_lists_kv)
    withdrawals = Withdrawals(topology)
    for bucket in (tombstones, versions, syncs):
        await bucket.open(js)
    await withdrawals.open(nc)
    await tombstones.follow()
    await syncs.follow()

    async def wanted(doc: DocumentRef) -> bool:
        return (
            await withdrawals.reason(doc.tenant, doc.library, doc.document_id, doc.sequence) is None
        )

    yield Buckets(
        Standing(tombstones, versions, syncs, wanted), tombstones, versions, syncs, withdrawals
    )
    await tombstones.stop()
    await syncs.stop()


def doc(sequence: int, version: str = "v", document_id: str = "d", source: str = "") -> DocumentRef:
    return DocumentRef(
        tenant="t",
        library="lib",
        document_id=document_id,
        version=version,
        title="",
        source_uri="",
        content_type=ContentType.PLAIN,
        metadata={},
        source=source,
        sequence=sequence,
    )


async def _settled(b: Buckets) -> None:
    """Give the followed copies a moment to take in what was just written."""
    await asyncio.sleep(0.2)


async def test_a_first_publish_alone_is_kept_and_made_searchable(buckets: Buckets) -> None:
    p = doc(10)
    assert await buckets.standing.before_write([p], {}) == [K]
    assert await buckets.standing.after_write([p], [True]) == [K]
    assert await buckets.versions.entry("t", "lib", "d") == (10, "v")


async def test_a_deletion_applied_before_the_publish_arrives_skips_it(buckets: Buckets) -> None:
    await buckets.tombstones.record(DocumentDeleted(tenant="t", library="lib", document_id="d"), 20)
    await _settled(buckets)
    assert await buckets.standing.before_write([doc(10)], {}) == [D]
    # ... and one of its library or tenant does too; a publish after the deletion stands.
    await buckets.tombstones.record(DocumentDeleted(tenant="t", library="lib"), 30)
    await _settled(buckets)
    assert await buckets.standing.before_write([doc(25, document_id="e"), doc(40)], {}) == [D, K]


async def test_a_deletion_recorded_between_the_write_and_its_check_takes_it_back(
    buckets: Buckets,
) -> None:
    p = doc(10)
    assert await buckets.standing.before_write([p], {}) == [K]
    await buckets.tombstones.record(DocumentDeleted(tenant="t", library="lib", document_id="d"), 20)
    assert await buckets.standing.after_write([p], [True]) == [D]


async def test_a_sync_that_did_not_list_it_skips_it_before_or_takes_it_back_after(
    buckets: Buckets,
) -> None:
    await buckets.syncs.record("t", "lib", "wiki", 20, ["other"])
    await _settled(buckets)
    assert await buckets.standing.before_write([doc(10, source="wiki")], {}) == [U]
    listed = doc(30, document_id="late", source="wiki")
    assert await buckets.standing.before_write([listed], {}) == [K]
    await buckets.syncs.record("t", "lib", "wiki", 40, ["other"])
    assert await buckets.standing.after_write([listed], [True]) == [U]


async def test_a_document_published_again_skips_the_older_publish(buckets: Buckets) -> None:
    await buckets.withdrawals.published("t", "lib", "d", 20)
    assert await buckets.standing.before_write([doc(10), doc(20, "v2")], {}) == [W, K]


async def test_a_later_publish_stored_or_in_the_same_batch_supersedes(buckets: Buckets) -> None:
    assert await buckets.standing.before_write([doc(10)], {("lib", "d"): 15}) == [S]
    assert await buckets.standing.before_write([doc(10), doc(12, "v2")], {}) == [S, K]
    # Another document's later publish changes nothing.
    assert await buckets.standing.before_write([doc(10), doc(12, document_id="e")], {}) == [K, K]


async def test_a_publish_a_later_one_overtook_after_its_check_loses_after_its_write(
    buckets: Buckets,
) -> None:
    older, newer = doc(10, "v1"), doc(20, "v2")
    assert await buckets.standing.before_write([older], {}) == [K]
    # Another replica makes the newer publish searchable meanwhile.
    assert await buckets.standing.after_write([newer], [True]) == [K]
    assert await buckets.standing.after_write([older], [True]) == [OVER]
    # A part of the older publish, written later still, can never complete: it lost too.
    assert await buckets.standing.after_write([older], [False]) == [OVER]
    assert await buckets.versions.entry("t", "lib", "d") == (20, "v2")


async def test_a_part_of_the_newest_publish_stands_until_its_publish_completes(
    buckets: Buckets,
) -> None:
    assert await buckets.standing.after_write([doc(10, "v1")], [True]) == [K]
    assert await buckets.standing.after_write([doc(20, "v2")], [False]) == [K]
    assert await buckets.versions.entry("t", "lib", "d") == (10, "v1")


async def test_the_same_publish_again_and_a_text_cut_again_at_its_sequence(
    buckets: Buckets,
) -> None:
    p = doc(10, "v1")
    assert await buckets.standing.after_write([p], [True]) == [K]
    assert await buckets.standing.after_write([p], [True]) == [K]  # a redelivery
    recut = doc(10, "v1+profile3")  # ranks as the publish it was cut from, then newer
    assert await buckets.standing.after_write([recut], [True]) == [K]
    assert await buckets.standing.after_write([p], [True]) == [OVER]  # the old cut lost to it
    # The publisher's next version wins over the re-cut, published before it or not.
    assert await buckets.standing.after_write([doc(11, "v2")], [True]) == [K]
