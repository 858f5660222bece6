"""A stack whose embedders call an OpenAI-compatible server (llama-cpp-python on loopback, set
by its URL alone: ``auto`` picks it): documents are indexed and searched with its vectors, the
local reranker scores them without token states, and while the server is out a publish waits
for it (nothing dead-lettered) and a search says which server is out."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest
from kbus_client import KbClient, KbError
from kbus_dev.llm import MODEL_NAME
from kbus_dev.servers import Server

from tests.conftest import Servers
from tests.helpers import LLMRecorder, own_services

DOCS = {
    "pump": "The pump primes itself within ninety seconds of power-on.",
    "valve": "Close the relief valve before you open the inspection hatch.",
    "filter": "Replace the intake filter every three hundred running hours.",
}


@pytest.fixture
def relay(embeddings_server: str) -> Iterator[LLMRecorder]:
    with LLMRecorder(embeddings_server) as relay:
        yield relay


@pytest.fixture
def served_stack(
    servers: Servers, tmp_path: Path, relay: LLMRecorder
) -> Iterator[tuple[dict[str, str], dict[str, Server]]]:
    weaviate = (servers.weaviate_http, servers.weaviate_grpc)
    extra = {"KBUS_EMBEDDER_OPENAI_URL": relay.url, "KBUS_EMBEDDER_OPENAI_MODEL": MODEL_NAME}
    with own_services(servers.nats_url, weaviate, tmp_path, "openai", extra) as stack:
        yield stack


async def test_documents_are_embedded_searched_and_reranked_through_an_openai_server(
    served_stack: tuple[dict[str, str], dict[str, Server]], servers: Servers, relay: LLMRecorder
) -> None:
    env, _ = served_stack
    nc = await nats.connect(servers.nats_url)
    kb = KbClient(nc, prefix=env["KBUS_BUS_PREFIX"], tenant="plant")
    try:
        for doc_id, text in DOCS.items():
            await kb.publish_document(
                library="manuals", document_id=doc_id, title=doc_id, text=text, wait=True
            )
        reply = await kb.search("relief valve inspection hatch", libraries=["manuals"])
        assert reply.results[0].document_id == "valve"
        vector = await kb.search("ninety seconds", libraries=["manuals"], search_type="vector")
        assert {hit.document_id for hit in vector.results} <= set(DOCS)
        assert vector.results, "nothing found by the server's vectors"
        reranked = await kb.search(
            "how long does the pump take to prime", libraries=["manuals"], rerank=True
        )
        assert reranked.results[0].document_id == "pump"
        assert reranked.reranker  # the local reranker ran, encoding what it had no states for
        inputs = [text for asked in relay.asked for text in asked.get("input", [])]
        assert any("primes itself" in text for text in inputs)  # documents went to the server
        assert "relief valve inspection hatch" in inputs  # and the queries

        # The server out: a search says so in one sentence, a publish waits for it.
        relay.faults = [(503, {})] * 1000
        with pytest.raises(KbError) as out:
            await kb.search("intake filter", libraries=["manuals"], search_type="vector")
        assert out.value.code == "unavailable", out.value
        assert "the embeddings server at http://127.0.0.1:" in out.value.reason
        refused = len(relay.asked)
        publish = asyncio.create_task(
            kb.publish_document(
                library="manuals",
                document_id="gasket",
                title="gasket",
                text="A cracked gasket hisses when the line is pressurised.",
                wait=True,
                timeout_s=240,
            )
        )
        deadline = time.monotonic() + 120
        while len(relay.asked) < refused + 3:  # its embedding refused, and tried again
            assert not publish.done(), publish
            assert time.monotonic() < deadline, "the embedder did not try again"
            await asyncio.sleep(0.5)
        relay.faults = []
        await publish  # a dead letter would raise
        found = await kb.search("cracked gasket hisses", libraries=["manuals"])
        assert found.results[0].document_id == "gasket"
    finally:
        await nc.close()
