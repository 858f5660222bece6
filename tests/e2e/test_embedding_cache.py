"""Unchanged text is never embedded twice: a re-ingest takes its vectors from the cache."""

from __future__ import annotations

import json

from nats.aio.client import Client

from tests.busclient import Receipts
from tests.e2e.conftest import Stack
from tests.helpers import document, metric, publish_raw


async def _counts(stack: Stack) -> tuple[float, float]:
    port = stack.http_ports["embedder"]
    return (
        await metric(port, r'kbus_embedder_chunks_total\{model="[^"]+"\} ([0-9.e+]+)'),
        await metric(port, r'kbus_embedder_cached_chunks_total\{model="[^"]+"\} ([0-9.e+]+)'),
    )


async def test_a_new_version_with_the_same_text_reuses_every_vector(
    stack: Stack, nc: Client
) -> None:
    receipts = Receipts()
    await receipts.subscribe(nc, stack.topology)
    text = "The garden shed key hangs in the kitchen. " * 40  # several chunks
    first = document("acme", "cache", "shed", text=text, version="v1")
    await publish_raw(nc, stack.topology, json.dumps(first).encode())
    await receipts.wait_for([("acme", "cache", "shed")], timeout_s=120)
    embedded_before, cached_before = await _counts(stack)

    # Another version (not a duplicate publish), same text: nothing to compute.
    second = {**first, "version": "v2"}
    receipts.indexed.clear()
    await publish_raw(nc, stack.topology, json.dumps(second).encode())
    await receipts.wait_for([("acme", "cache", "shed")], timeout_s=120)
    assert receipts.indexed[("acme", "cache", "shed")]["version"] == "v2"
    embedded_after, cached_after = await _counts(stack)
    assert embedded_after == embedded_before
    assert cached_after - cached_before >= 3
