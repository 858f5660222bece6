"""The reranker scores a search's candidates from the token states the embedder kept."""

from __future__ import annotations

import re

import httpx
from kbus_client import KbClient
from nats.aio.client import Client

from tests.e2e.conftest import Stack


async def _passages(stack: Stack) -> dict[str, float]:
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"http://127.0.0.1:{stack.http_ports['reranker']}/metrics")).text
    found = re.findall(r'kbus_rerank_passages_total\{states="(\w+)"\} ([0-9.]+)', text)
    return {states: float(value) for states, value in found}


async def test_a_reranked_search_encodes_no_candidate_the_embedder_kept(
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
    before = await _passages(stack)

    reply = await kb.search("where is the boiler room key?", libraries=["tokens"], rerank=True)

    after = await _passages(stack)
    assert reply.results[0].document_id == "doc-0"
    assert after.get("stored", 0) - before.get("stored", 0) >= 1
    assert after.get("encoded", 0) == before.get("encoded", 0)
