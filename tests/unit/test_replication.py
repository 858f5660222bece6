"""The store's replication settings become each new collection's configuration and the
consistency level of its writes and reads."""

from __future__ import annotations

import asyncio

import pytest
from kbus_runtime.settings import StoreSettings
from kbus_runtime.store import WeaviateNodes, _Guarded
from kbus_searcher.settings import SearcherSettings
from kbus_searcher.store import ChunkStore
from pydantic import ValidationError
from weaviate.classes.config import ConsistencyLevel, ReplicationDeletionStrategy
from weaviate.exceptions import WeaviateConnectionError


def test_replication_settings_become_the_collections_config_and_levels() -> None:
    settings = SearcherSettings(
        store=StoreSettings(replication_factor=3, write_consistency="ALL", read_consistency="ONE")
    )
    store = ChunkStore.configured(None, settings)  # type: ignore[arg-type]  # nothing connects
    replication = store.collections.replication
    config = replication.config()
    assert config.factor == 3
    assert config.deletionStrategy is ReplicationDeletionStrategy.DELETE_ON_CONFLICT
    assert replication.level(write=True) is ConsistencyLevel.ALL
    assert replication.level(write=False) is ConsistencyLevel.ONE


def test_hosts_name_one_client_per_node_and_one_node_is_the_default() -> None:
    cluster = StoreSettings(hosts="w0:8080:50051,10.0.0.7:8081:50052")
    assert [(n.host, n.http_port, n.grpc_port) for n in cluster.nodes()] == [
        ("w0", 8080, 50051),
        ("10.0.0.7", 8081, 50052),
    ]
    assert len(WeaviateNodes(cluster).clients) == 2  # built, not connected
    single = StoreSettings(hosts="a:1:2:b")
    assert [(n.host, n.http_port, n.grpc_host, n.grpc_port) for n in single.nodes()] == [
        ("a", 1, "b", 2)
    ]


@pytest.mark.parametrize("hosts", ["w0", "w0:8080", "w0:8080:x", "w0:1:2,", "w0:1:2;w1:1:2"])
def test_a_malformed_hosts_list_is_refused(hosts: str) -> None:
    with pytest.raises(ValidationError):
        StoreSettings(hosts=hosts)


class _Handle:
    """Stands in for a client object: a builder and a call that waits until released."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.cancelled = False

    def with_tenant(self, tenant: str) -> _Handle:
        return self

    async def fetch(self) -> str:
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return "rows"


async def test_a_call_waiting_on_a_node_that_is_left_ends_with_a_connection_error() -> None:
    nodes = WeaviateNodes(StoreSettings(hosts="w0:1:2,w1:3:4"))
    handle = _Handle()
    guarded = _Guarded(handle, nodes, 0).with_tenant("acme")  # builders are guarded too
    waiting = asyncio.create_task(guarded.fetch())
    await asyncio.sleep(0.05)
    nodes._lost[0].set()  # what the watcher does when it leaves node 0
    with pytest.raises(WeaviateConnectionError):
        await waiting
    await asyncio.sleep(0)
    assert handle.cancelled
    answered = _Handle()
    answered.release.set()
    assert await _Guarded(answered, nodes, 1).fetch() == "rows"
