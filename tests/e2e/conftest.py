"""End-to-end: NATS, Weaviate and every service as a separate process."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import nats
import pytest
from kbus_contract.topology import Topology
from kbus_dev.servers import Server
from kbus_dev.services import service_env, start_all
from nats.aio.client import Client

from tests.conftest import Servers
from tests.helpers import TEST_STORAGE, metric

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class Stack:
    nats_url: str
    topology: Topology
    logs: Path
    http_ports: dict[str, int]
    #: The services' environment (what an admin job such as kbus_searcher.jobs.reprocess runs with).
    env: dict[str, str]
    processes: dict[str, Server]


@pytest.fixture(scope="session")
def stack(servers: Servers, llm: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tag = uuid.uuid4().hex[:8]
    prefix, collection = f"e2e{tag}", f"E2e{tag}"
    logs = tmp_path_factory.mktemp("service-logs")
    env = service_env(
        servers.nats_url,
        servers.weaviate_http,
        servers.weaviate_grpc,
        prefix=prefix,
        collection=collection,
        extra={
            **TEST_STORAGE,
            "KBUS_STREAM_MAX_BYTES": str(256 * 1024**2),
            "KBUS_BACKLOG_INTERVAL_S": "1",
            # The pages of tests/webserver.py are served on loopback.
            "KBUS_INGESTOR_FETCH_ALLOW": '["127.0.0.1/32"]',
            "KBUS_INGESTOR_MAX_UNPACKED_BYTES": str(32 * 1024**2),
            # One sync at a time: test_sync holds the syncer with a waiting sync to apply
            # another only after what was published behind it.
            "KBUS_SEARCHER_SYNC_CONCURRENCY": "1",
            # The generator writes matching texts with the real local model.
            "KBUS_LLM_URL": llm,
            "KBUS_LLM_TIMEOUT_S": "300",
            # ... and profiles may name a query transformer and a prompted reranker on it.
            "KBUS_SEARCHER_REWRITER": "openai",
            "KBUS_RERANKER_PROMPTED": "openai",
        },
    )
    running = start_all(env, logs)
    try:
        ports = {s.name: s.ports["http"] for s in running}
        yield Stack(
            servers.nats_url, Topology(prefix), logs, ports, env, {s.name: s for s in running}
        )
    finally:
        for server in running:
            server.stop()


@pytest.fixture
async def nc(stack: Stack) -> AsyncIterator[Client]:
    client = await nats.connect(stack.nats_url)
    yield client
    await client.close()


def kbus(stack: Stack, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "KBUS_NATS_URL": stack.nats_url,
        "KBUS_BUS_PREFIX": stack.topology.prefix,
        "KBUS_TENANT": "cli-co",
        "COLUMNS": "200",
    }
    result = subprocess.run(["kbus", *args], env=env, capture_output=True, text=True, timeout=300)
    if check and result.returncode != 0:
        raise AssertionError(f"kbus {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result


async def embedded_chunks(stack: Stack) -> float:
    """Chunks the embedder computed vectors for (not those it took from its cache)."""
    pattern = r'kbus_embedder_chunks_total\{model="[^"]+"\} ([0-9.e+]+)'
    return await metric(stack.http_ports["embedder"], pattern)
