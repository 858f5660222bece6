"""The index on a three-node Weaviate cluster: with replication factor 3, writes and reads at
QUORUM go on while a node is down, and the node that missed writes has them after it returns;
with factor 1 (the negative control), a tenant whose shard is on the stopped node is lost to
reads."""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from kbus_contract import EmbeddingsReady, SearchType
from kbus_contract.errors import TransientError
from kbus_dev.cluster import (
    raft_leader,
    start_weaviate_cluster,
    wait_for_weaviate_nodes,
    weaviate_hosts,
)
from kbus_dev.servers import Server
from kbus_runtime.settings import StoreSettings
from kbus_runtime.store import WeaviateNodes, weaviate_client
from kbus_searcher.store import ChunkStore, Query, Scope
from kbus_searcher.store.schema import Replication
from weaviate.exceptions import WeaviateBaseError

from tests.helpers import ready, upsert

pytestmark = [pytest.mark.integration, pytest.mark.alone]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Server]]:
    servers = start_weaviate_cluster(Path(tmp_path_factory.mktemp("weaviate-cluster")))
    try:
        yield servers
    finally:
        for server in servers:
            server.stop()


async def _store(
    node: Server, factor: int, read: str = "QUORUM", write: str = "QUORUM"
) -> AsyncIterator[ChunkStore]:
    """A store through ``node`` (writes at QUORUM unless said: what goes on while a node is
    down; kbus's default, ALL, waits for it)."""
    settings = StoreSettings(hosts=f"127.0.0.1:{node.ports['http']}:{node.ports['grpc']}")
    client = weaviate_client(settings)
    await client.connect()
    replication = Replication(factor=factor, read=read, write=write)
    name = f"Cluster{uuid.uuid4().hex[:8]}"
    store = ChunkStore.create(client, name, flat_search_cutoff=10_000, replication=replication)
    try:
        yield store
    finally:
        await client.close()


async def _documents(store: ChunkStore, tenant: str) -> set[str]:
    view = store.view(Scope.of_caller(tenant, None, ("*",)))
    rows, _ = await view.documents("ledger", {}, 1_000)
    return {row["document_id"] for row in rows}


async def _write(store: ChunkStore, tenant: str, ids: range) -> None:
    for n in ids:
        await upsert(store.writes, ready(tenant, "ledger", f"d{n}", "v1", [f"entry {n}"], seed=n))


async def _caught_up(node: Server, alias: str, tenant: str, expected: set[str]) -> None:
    """Until a read at ALL through ``node`` (one that was down) has every expected document."""
    async for store_all in _store(node, factor=3, read="ALL"):
        store_all.collections.alias = alias
        deadline = time.monotonic() + 180
        seen: set[str] | str = set()
        while True:
            try:
                seen = await _documents(store_all, tenant)
                if seen == expected:
                    return
            except WeaviateBaseError as exc:
                seen = str(exc)
            assert time.monotonic() < deadline, f"the returned node never caught up: {seen}"
            await asyncio.sleep(1)


def _victim(cluster: list[Server]) -> Server:
    """A node to stop: neither the one the test's client talks to nor the schema's Raft leader
    (losing the leader pauses schema changes for an election; this test is about the copies of
    the data)."""
    leader = raft_leader(cluster[0])
    return next(s for s in cluster[1:] if s.env and s.env["CLUSTER_HOSTNAME"] != leader)


async def test_the_index_moves_to_a_live_node_when_the_one_in_use_stops(
    cluster: list[Server],
) -> None:
    victim = _victim(cluster)
    order = [victim, *(s for s in cluster if s is not victim)]
    nodes = WeaviateNodes(StoreSettings(hosts=weaviate_hosts(order), failover_check_s=0.5))
    await nodes.connect()
    name = f"Failover{uuid.uuid4().hex[:8]}"
    store = ChunkStore.create(
        nodes, name, flat_search_cutoff=10_000, replication=Replication(factor=3, write="QUORUM")
    )
    try:
        await _write(store, "acme", range(10))
        assert nodes.current == 0
        _down(victim, cluster)
        failed, started = 0, time.monotonic()
        while True:
            try:
                found = await _documents(store, "acme")
                break
            except WeaviateBaseError:
                failed += 1
                assert time.monotonic() - started < 15, "the index never left the lost node"
                await asyncio.sleep(0.2)
        assert found == {f"d{n}" for n in range(10)}
        assert nodes.current != 0
        await _write(store, "acme", range(10, 20))
        assert await _documents(store, "acme") == {f"d{n}" for n in range(20)}
    finally:
        await nodes.close()
        victim.restart()
        await asyncio.to_thread(wait_for_weaviate_nodes, cluster, 3)


def _down(server: Server, cluster: list[Server]) -> None:
    server.kill()
    # The others notice the missing node before the test goes on.
    deadline = time.monotonic() + 60
    while True:
        answers = httpx.get(f"http://127.0.0.1:{cluster[0].ports['http']}/v1/nodes").json()
        if sum(n["status"] == "HEALTHY" for n in answers["nodes"]) == len(cluster) - 1:
            return
        assert time.monotonic() < deadline, "the cluster never noticed the stopped node"
        time.sleep(0.5)


async def test_factor_three_writes_and_reads_through_a_node_down(cluster: list[Server]) -> None:
    victim = _victim(cluster)
    async for store in _store(cluster[0], factor=3):
        await _write(store, "acme", range(10))
        _down(victim, cluster)
        try:
            await _write(store, "acme", range(10, 20))  # QUORUM: two of three copies
            assert await _documents(store, "acme") == {f"d{n}" for n in range(20)}
        finally:
            victim.restart()
            await asyncio.to_thread(wait_for_weaviate_nodes, cluster, 3)
    # Every copy, the returned node's included, answers with everything (read at ALL).
    await _caught_up(victim, store.collections.alias, "acme", {f"d{n}" for n in range(20)})


async def test_factor_one_loses_reads_of_a_tenant_on_the_stopped_node(
    cluster: list[Server],
) -> None:
    async for store in _store(cluster[0], factor=1):
        victim = _victim(cluster)
        placed: set[str] = set()
        # Tenants until one's shard lands on the node to stop (a third of them do; in one run,
        # the node restarted seconds before by the test above got none of thirty).
        deadline = time.monotonic() + 90
        for n in itertools.count():
            await _write(store, f"t{n}", range(3))
            collection = await store.collections.active()
            assert collection is not None
            placed = _shards_on(victim, collection)
            if placed:
                break
            assert time.monotonic() < deadline, f"{n + 1} tenants, none placed on {victim.name}"
            await asyncio.sleep(0.5 if n >= 10 else 0)
        _down(victim, cluster)
        try:
            failed = 0
            for tenant in sorted(placed):
                try:
                    failed += len(await _documents(store, tenant)) < 3
                except WeaviateBaseError:
                    failed += 1
            assert failed == len(placed)
        finally:
            victim.restart()
            await asyncio.to_thread(wait_for_weaviate_nodes, cluster, 3)


def _shards_on(node: Server, collection: str) -> set[str]:
    """The tenants whose shard of ``collection`` lives on ``node``."""
    url = f"http://127.0.0.1:{node.ports['http']}/v1/nodes/{collection}?output=verbose"
    answers = httpx.get(url, timeout=10).json()["nodes"]
    mine = next(n for n in answers if n["name"] == node.env["CLUSTER_HOSTNAME"])  # type: ignore[index]
    return {shard["name"] for shard in mine.get("shards") or []}


async def test_a_new_tenant_while_a_node_is_down_is_written_and_reaches_it_on_return(
    cluster: list[Server],
) -> None:
    """A tenant's first document while a node is down: Weaviate 1.38 creates the tenant's
    shard and takes the writes at QUORUM on two nodes (it does not wait for the third), and the
    node that was down holds them once it is back (read at ALL through it)."""
    victim = _victim(cluster)
    async for store in _store(cluster[0], factor=3):
        await _write(store, "first", range(1))  # the collection exists before the node goes
        _down(victim, cluster)
        try:
            await _write(store, "newcomer", range(3))
            assert await _documents(store, "newcomer") == {"d0", "d1", "d2"}
        finally:
            victim.restart()
            await asyncio.to_thread(wait_for_weaviate_nodes, cluster, 3)
    await _caught_up(victim, store.collections.alias, "newcomer", {"d0", "d1", "d2"})


async def _found_through(node: Server, alias: str, missed: EmbeddingsReady) -> list[str]:
    """What a hybrid search through ``node`` finds for the document's word and vector."""
    async for through in _store(node, factor=3):
        through.collections.alias = alias
        query = Query(
            libraries=("ledger",),
            text="zeppelinword",
            vector=list(missed.chunks[0].vector),
            search_type=SearchType.HYBRID,
            alpha=0.5,
            limit=10,
        )
        view = through.view(Scope.of_caller("acme", None, ("*",)))
        return [str(c.properties["document_id"]) for c in await view.search(query)]
    raise AssertionError("unreachable")


@pytest.mark.parametrize("write", ["ALL", "QUORUM"])
async def test_a_receipt_means_searchable_through_every_node(
    cluster: list[Server], write: str
) -> None:
    """A node searches its own copy of a shard. At ALL (kbus's default) a write is refused
    while a node is down, and once the node is back it succeeds and is found by a hybrid search
    through that node at once. At QUORUM (the negative control) the write succeeds without the
    node, which then answers without it until Weaviate repairs its copy."""
    victim = _victim(cluster)
    async for store in _store(cluster[0], factor=3, write=write):
        await _write(store, "acme", range(1))  # the tenant's shard is on every node
        missed = ready("acme", "ledger", "missed", "v1", ["the zeppelinword entry"], seed=77)
        _down(victim, cluster)
        try:
            if write == "ALL":
                with pytest.raises(TransientError):  # refused: a copy cannot confirm it
                    await upsert(store.writes, missed)
            else:
                await upsert(store.writes, missed)
        finally:
            victim.restart()
            await asyncio.to_thread(wait_for_weaviate_nodes, cluster, 3)
        if write == "ALL":
            await upsert(store.writes, missed)  # what the indexer's retry does
        found = await _found_through(victim, store.collections.alias, missed)
        assert ("missed" in found) == (write == "ALL"), found


async def test_a_deletion_a_copy_missed_fails_and_succeeds_once_the_node_is_back(
    cluster: list[Server],
) -> None:
    """A deletion at ALL while a node is down fails (its message is delivered again), though the
    live copies apply it (``left``: nothing found through one); delivered again once the node is
    back, nothing of the document is found through any node."""
    victim = _victim(cluster)
    async for store in _store(cluster[0], factor=3, write="ALL"):
        doomed = ready("acme", "ledger", "doomed", "v1", ["the zeppelinword entry"], seed=78)
        await upsert(store.writes, doomed)
        _down(victim, cluster)
        try:
            with pytest.raises((TransientError, WeaviateBaseError)):
                await store.writes.delete_publish(doomed)
            left = await _found_through(cluster[0], store.collections.alias, doomed)
            assert "doomed" not in left
        finally:
            victim.restart()
            await asyncio.to_thread(wait_for_weaviate_nodes, cluster, 3)
        await store.writes.delete_publish(doomed)  # the redelivery
        found = [await _found_through(n, store.collections.alias, doomed) for n in cluster]
        assert not any("doomed" in hits for hits in found), (left, found)
