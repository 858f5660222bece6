"""Switching the embedding model: refused while the index is the old model's, then re-embedded
into the new model's collection and switched over when complete."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest
from kbus_client import KbClient, KbError
from kbus_dev.servers import Server
from kbus_dev.services import start_service, wait_healthy

from tests.conftest import Servers
from tests.helpers import own_services

DOCS = {
    "pump": "The pump primes itself within ninety seconds of power-on.",
    "valve": "Close the relief valve before you open the inspection hatch.",
    "filter": "Replace the intake filter every three hundred running hours.",
}


@pytest.fixture
def own_stack(
    servers: Servers, tmp_path: Path
) -> Iterator[tuple[dict[str, str], dict[str, Server]]]:
    weaviate = (servers.weaviate_http, servers.weaviate_grpc)
    with own_services(servers.nats_url, weaviate, tmp_path, "switch") as stack:
        yield stack


async def test_a_new_model_is_refused_until_the_index_is_re_embedded_then_it_is_searched(
    own_stack: tuple[dict[str, str], dict[str, Server]], servers: Servers, tmp_path: Path
) -> None:
    env, running = own_stack
    nc = await nats.connect(servers.nats_url)
    kb = KbClient(nc, prefix=env["KBUS_BUS_PREFIX"], tenant="plant")
    try:
        for doc_id, text in DOCS.items():
            await kb.publish_document(
                library="manuals", document_id=doc_id, title=doc_id, text=text, wait=True
            )
        before = await kb.search("how long does priming take", libraries=["manuals"])
        assert before.results[0].document_id == "pump"

        # Redeploy the embedders with another model.
        embedder = running["embedder"]
        embedder.stop()
        new_env = {**env, "KBUS_EMBEDDER_MODEL": "all-MiniLM-L6-v2-int8"}
        replacement = start_service("embedder", new_env, tmp_path, embedder.ports["http"])
        running["embedder"] = replacement
        wait_healthy([replacement])

        # The index holds the old model's vectors: refused, never answered with them.
        with pytest.raises(KbError) as refused:
            await kb.search("how long does priming take", libraries=["manuals"])
        assert refused.value.code == "model_mismatch"
        assert (await kb.search("priming", libraries=["manuals"], search_type="keyword")).results
        # A document published now is embedded by the new model, not yet searched.
        await kb.publish_document(
            library="manuals",
            document_id="gasket",
            title="gasket",
            text="A cracked gasket hisses when the line is pressurised.",
            wait=True,
        )
        hiss = await kb.search("hisses", libraries=["manuals"], search_type="keyword")
        assert hiss.results == ()

        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "kbus_searcher.jobs.reembed", "--timeout", "180"],
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert done.returncode == 0, done.stderr[-3000:]

        after = await kb.search("how long does priming take", libraries=["manuals"])
        assert "int8" in after.model
        assert after.results[0].document_id == "pump"
        seal = await kb.search("a broken seal makes a hissing sound", libraries=["manuals"])
        assert seal.results[0].document_id == "gasket"
        every = await kb.search(
            "pump valve filter gasket",
            libraries=["manuals"],
            search_type="keyword",
            k=10,
            group_by_document=True,
        )
        assert {hit.document_id for hit in every.results} == {*DOCS, "gasket"}
    finally:
        await nc.close()
