"""An index embedded by another model is refused for vector search, never answered wrongly."""

from __future__ import annotations

import pytest
from kbus_client import KbClient, KbError
from kbus_shared.contracts import ContentType, DocumentRef, EmbeddedChunk, EmbeddingsReady
from kbus_shared.identifiers import chunk_id
from nats.aio.client import Client

from tests.e2e.conftest import Stack
from tests.helpers import find_in_stream


async def test_vectors_of_another_model_are_refused_and_keyword_search_still_works(
    stack: Stack, nc: Client
) -> None:
    # An index written by another 384-dimensional model: same shape, different meaning.
    ref = DocumentRef(
        tenant="othermodel",
        library="lib",
        document_id="doc",
        version="v1",
        title="Pump manual",
        source_uri="",
        content_type=ContentType.PLAIN,
        metadata={},
        sequence=1,
    )
    text = "The pump primes itself within ninety seconds."
    ready = EmbeddingsReady(
        document=ref,
        model="some-other-model",
        dimension=384,
        total_chunks=1,
        chunks=(
            EmbeddedChunk(
                chunk_id=chunk_id("othermodel", "lib", "doc", "v1", 0),
                position=0,
                text=text,
                char_start=0,
                char_end=len(text),
                vector=tuple([0.05] * 384),
            ),
        ),
    )
    await nc.jetstream().publish(stack.topology.embeddings_ready, ready.model_dump_json().encode())
    await find_in_stream(nc, stack.topology.document_indexed, {"tenant": "othermodel"})

    kb = KbClient(nc, prefix=stack.topology.prefix, tenant="othermodel")
    for mode in ("vector", "hybrid"):
        with pytest.raises(KbError) as refused:
            await kb.search("how fast does the pump prime", libraries=["lib"], search_type=mode)
        assert refused.value.code == "model_mismatch", refused.value
        assert "some-other-model" in str(refused.value)
    found = await kb.search("pump primes", libraries=["lib"], search_type="keyword")
    assert [hit.text for hit in found.results] == [text]
