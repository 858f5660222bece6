"""A document deleted while its work is queued or under way stops costing anything: within
seconds none of it waits at any stage (the tenant's own backlog says so), the stages skip what
was queued (their counters of withdrawn work grow, the indexer's of chunks written stands
still), and a small document of the same tenant published right after, interactive or not, is
searchable as fast as one published on a quiet library."""

from __future__ import annotations

import asyncio
import time

from kbus_client import KbClient

from tests.e2e.conftest import Stack
from tests.helpers import metric, unique_text

TENANT, LIBRARY = "dropper", "big"
#: Seconds after its deletion by which nothing more of the document is written.
WORK_STOPS_S = 10.0
#: Seconds by which its skipped messages have left every stage (they wait their turn among
#: other tenants' work, then cost a read each; embedding them took minutes).
DRAINED_S = 30.0
#: A small document's bound to searchable, on a quiet stack (docs/performance.md: p99 0.5 s).
SMALL_BOUND_S = 10.0


async def _written(stack: Stack) -> float:
    """Chunks the indexer wrote for the tenant."""
    return await metric(
        stack.http_ports["searcher"],
        rf'kbus_indexer_chunks_total\{{tenant="{TENANT}"\}} ([0-9.e+]+)',
    )


async def _held(kb: KbClient) -> int:
    """The tenant's messages waiting or in flight at every stage."""
    return sum(lane.messages for lane in (await kb.backlog()).lanes)


async def test_a_large_document_deleted_mid_ingest_stops_costing_and_its_tenant_goes_on(
    stack: Stack,
) -> None:
    skipped = r'kbus_messages_withdrawn_total\{reason="deleted",stage="embedder"\} ([0-9.e+]+)'
    skipped_before = await metric(stack.http_ports["embedder"], skipped)
    kb = await KbClient.connect(stack.nats_url, prefix=stack.topology.prefix, tenant=TENANT)
    async with kb:
        # Thousands of chunks, none of them in the embedding cache.
        await kb.publish_document(
            library=LIBRARY, document_id="large", text=unique_text("dropped", 1_500_000)
        )
        deadline = time.monotonic() + 180
        while await _written(stack) < 64 or await _held(kb) < 4:
            assert time.monotonic() < deadline, "the large document's first parts never landed"
            await asyncio.sleep(0.5)
        await kb.delete_document(library=LIBRARY, document_id="large", wait=True)
        deleted = time.monotonic()
        # Within seconds the store takes none of it more ...
        await asyncio.sleep(WORK_STOPS_S)
        written = await _written(stack)
        # ... and what waited of it at every stage is skipped as its turn comes, not done.
        while await _held(kb):
            held = [lane for lane in (await kb.backlog()).lanes if lane.messages]
            assert time.monotonic() - deleted < DRAINED_S, held
            await asyncio.sleep(0.5)
        assert await _written(stack) == written
        assert await metric(stack.http_ports["embedder"], skipped) > skipped_before
        # The tenant's next documents, bulk and interactive, are not held behind it.
        for interactive in (False, True):
            began = time.monotonic()
            await kb.publish_document(
                library=LIBRARY,
                document_id=f"small-{interactive}",
                text="The sprinkler valve is behind the blue panel in the garage.",
                interactive=interactive,
                wait=True,
                timeout_s=120,
            )
            assert time.monotonic() - began <= SMALL_BOUND_S
