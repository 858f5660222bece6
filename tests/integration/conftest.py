"""Integration fixtures: a bus connection and settings pointing at this test's namespace."""

from __future__ import annotations

from collections.abc import AsyncIterator

import nats
import pytest
from kbus_contract.topology import Topology
from kbus_runtime.settings import BusSettings, StoreSettings
from kbus_runtime.store import weaviate_client
from kbus_searcher.store import ChunkStore
from nats.aio.client import Client

from tests.conftest import Namespace, Servers
from tests.helpers import drop_namespace

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
async def _drop_namespace(servers: Servers, namespace: Namespace) -> AsyncIterator[None]:
    """After the test, give back what its streams and buckets reserved on the shared server."""
    yield
    client = await nats.connect(servers.nats_url)
    try:
        await drop_namespace(client, namespace.prefix)
    finally:
        await client.close()


@pytest.fixture
def bus(servers: Servers, namespace: Namespace) -> BusSettings:
    return BusSettings(
        nats_url=servers.nats_url, bus_prefix=namespace.prefix, stream_max_bytes=64 * 1024**2
    )


@pytest.fixture
def store_settings(servers: Servers, namespace: Namespace) -> StoreSettings:
    return StoreSettings(
        hosts=f"127.0.0.1:{servers.weaviate_http}:{servers.weaviate_grpc}",
        collection=namespace.collection,
    )


@pytest.fixture
def topology(bus: BusSettings) -> Topology:
    return bus.topology


@pytest.fixture
async def nc(servers: Servers) -> AsyncIterator[Client]:
    client = await nats.connect(servers.nats_url)
    yield client
    await client.close()


@pytest.fixture
async def store(store_settings: StoreSettings) -> AsyncIterator[ChunkStore]:
    client = weaviate_client(store_settings)
    await client.connect()
    s = ChunkStore.create(client, store_settings.collection, flat_search_cutoff=10_000)
    await s.collections.ensure()
    await s.collections.ensure()  # idempotent
    yield s
    await s.collections.drop()
    await client.close()
