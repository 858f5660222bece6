"""The services on a three-server NATS cluster (streams at three replicas): documents
published while the documents stream's leader is SIGKILLed, and then the server every service
happens to use, are all indexed, once; searches answer after."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kbus_client import KbClient
from kbus_dev.cluster import start_nats_cluster, urls, wait_for_meta_leader
from kbus_dev.servers import Server
from kbus_dev.services import service_env, start_all

from tests.conftest import Servers
from tests.helpers import TEST_STORAGE, kill_stream_leader

pytestmark = [pytest.mark.e2e, pytest.mark.alone]

DOCUMENTS = 45
LIBRARY = "ledger"


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, servers: Servers
) -> Iterator[tuple[list[Server], str]]:
    nats = start_nats_cluster(Path(tmp_path_factory.mktemp("nats-cluster-e2e")))
    tag = uuid.uuid4().hex[:8]
    env = service_env(
        urls(nats),
        servers.weaviate_http,
        servers.weaviate_grpc,
        prefix=f"cl{tag}",
        collection=f"Cl{tag}",
        extra={**TEST_STORAGE, "KBUS_STREAM_REPLICAS": "3"},
    )
    running: list[Server] = []
    try:
        running = start_all(env, Path(tmp_path_factory.mktemp("cluster-logs")))
        yield nats, f"cl{tag}"
    finally:
        for server in [*running, *nats]:
            server.stop()


async def test_documents_flow_through_stream_leader_kills(
    cluster: tuple[list[Server], str],
) -> None:
    nats, prefix = cluster
    kb = await KbClient.connect(urls(nats), prefix=prefix, tenant="acme")
    stream = f"{prefix.upper()}_DOCUMENTS"
    killed = []
    try:
        for n in range(DOCUMENTS):
            if n and n % (DOCUMENTS // 3) == 0:
                killed.append(await kill_stream_leader(kb.nc, nats, stream))
            await kb.publish_document(
                library=LIBRARY,
                document_id=f"d{n}",
                title=f"Entry {n}",
                text=f"Ledger entry {n}: the shipment {n} left the warehouse on time.",
            )
        await asyncio.to_thread(wait_for_meta_leader, nats)
        deadline = time.monotonic() + 240
        listed: set[str] = set()
        while time.monotonic() < deadline:
            try:
                listed = {d.document_id for d in await kb.documents(LIBRARY, limit=1_000)}
            except Exception:  # the searcher may be reconnecting
                listed = set()
            if len(listed) >= DOCUMENTS:
                break
            await asyncio.sleep(1)
        assert listed == {f"d{n}" for n in range(DOCUMENTS)}
        assert len(killed) == 2
        stats = await kb.stats()
        [ledger] = [lib for lib in stats.libraries if lib.library == LIBRARY]
        assert ledger.documents == DOCUMENTS  # none twice
        reply = await kb.search("when did shipment 7 leave", libraries=[LIBRARY], rerank=False)
        assert reply.results
    finally:
        await kb.close()
