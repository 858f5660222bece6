"""The reranker scores a search's candidates from the token states the embedder kept, and the
query from the states the embedder sent with its vector: no encoder runs in the reranker."""

from __future__ import annotations

import re

import httpx
from kbus_client import KbClient
from nats.aio.client import Client

from tests.e2e.conftest import Stack


async def _counted(stack: Stack) -> dict[str, float]:
    """The reranker's passages and queries by where their states came from."""
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"http://127.0.0.1:{stack.http_ports['reranker']}/metrics")).text
    found = re.findall(r'kbus_rerank_(\w+)_total\{states="(\w+)"\} ([0-9.]+)', text)
    return {f"{what} {states}": float(value) for what, states, value in found}


async def test_a_reranked_search_encodes_neither_its_candidates_nor_its_query_again(
    stack: Stack, nc: Client
) -> None:
    kb = KbClient(nc, prefix=stack.topology.prefix, tenant="acme")
    for i, text in enumerate(
        (
            "The boiler room key is kept in the red box by the loading dock.",
            "Visitors sign in at the front desk and wear a badge at all times.",
            "The cafeteria serves lunch from noon until two in the afternoon.",
        )
    ):
        await kb.publish_document(
            library="tokens", document_id=f"doc-{i}", text=text, wait=True, timeout_s=120
        )
    before = await _counted(stack)

    reply = await kb.search("where is the boiler room key?", libraries=["tokens"], rerank=True)

    after = await _counted(stack)
    assert reply.results[0].document_id == "doc-0"
    assert after.get("passages stored", 0) - before.get("passages stored", 0) >= 1
    assert after.get("passages encoded", 0) == before.get("passages encoded", 0)
    assert after.get("queries sent", 0) - before.get("queries sent", 0) == 1
    assert after.get("queries encoded", 0) == before.get("queries encoded", 0)
