"""A search bounded by its caller's deadline, against the services as processes.

The budgets are set from what a full search took a moment earlier in the same run, so the test
holds on a fast machine and a slow one: a budget a third of a rerank's time cannot hold the
rerank, and the answer must still come, in first-stage order, within it. The candidates' token
states are purged from the embedder's bucket first: a rerank from kept states takes a few
milliseconds, less than the test's margins, and one that encodes its candidates takes long
enough to miss a budget for certain.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from kbus_client import KbClient, KbError
from kbus_contract import DegradedReason, RerankCandidate, RerankReply, RerankRequest
from kbus_contract.wire import request

from tests.e2e.conftest import Stack

TOPICS = ("glacier", "volcano", "estuary", "savanna", "tundra", "reef", "canyon", "delta")
DEPTH = 50


def _long_text() -> str:
    paragraphs = []
    for i in range(70):
        topic = TOPICS[i % len(TOPICS)]
        paragraphs.append(
            f"Field note {i} on the {topic}: the survey team measured the {topic}'s extent, its "
            f"seasonal change and the species recorded along transect {i}. Readings were taken "
            f"at dawn and dusk; the {topic} showed a shift of {i % 7} units against last year's "
            "baseline, which the team attributes to rainfall and to grazing pressure nearby."
        )
    return "\n\n".join(paragraphs)


async def _publish(client: KbClient) -> None:
    await client.publish_document(
        library="notes", document_id="survey", title="Survey notes", text=_long_text(), wait=True
    )


async def test_a_search_with_a_short_deadline_is_answered_within_it_degraded(
    stack: Stack,
) -> None:
    async with await KbClient.connect(
        stack.nats_url, prefix=stack.topology.prefix, tenant="deadline"
    ) as client:
        await _publish(client)
        await client.nc.jetstream().purge_stream(f"KV_{stack.topology.token_states_bucket}")
        query = "what shift did the glacier show against the baseline?"
        await client.search(query, libraries=["notes"], rerank_depth=DEPTH)  # warm up
        full = await client.search(query, libraries=["notes"], rerank_depth=DEPTH)
        assert full.reranker
        assert not full.degraded
        assert full.budget_ms > 5_000
        rerank_ms = full.timings.rerank_ms
        first_stage_ms = full.timings.embed_ms + full.timings.search_ms
        wait_s = (first_stage_ms + rerank_ms / 3) / 1000 + 0.1
        sent = time.perf_counter()
        short = await client.search(
            query, libraries=["notes"], rerank_depth=DEPTH, timeout_s=wait_s
        )
        waited_ms = (time.perf_counter() - sent) * 1000
        assert short.results, "answered, in first-stage order"
        assert short.degraded
        assert short.degraded_reason in {
            DegradedReason.RERANK_OVER_BUDGET,
            DegradedReason.RERANK_TIMEOUT,
        }
        assert short.reranker == ""
        assert short.score_kind == "first_stage"
        assert short.budget_ms < wait_s * 1000
        assert short.timings.total_ms <= short.budget_ms
        # Insisting on the rerank: it is tried with what is left and the error comes back
        # before the caller stops waiting (the caller's own timeout is "searcher_timeout").
        sent = time.perf_counter()
        with pytest.raises(KbError) as info:
            await client.search(
                query, libraries=["notes"], rerank_depth=DEPTH, rerank=True, timeout_s=wait_s
            )
        insisted_ms = (time.perf_counter() - sent) * 1000
        assert info.value.code == "reranker_timeout"
        print(
            f"\ninsisting on the rerank: reranker_timeout after {insisted_ms:.0f} ms at the client"
            f"\nfull search {full.timings.total_ms:.0f} ms (rerank {rerank_ms:.0f} ms); "
            f"wait {wait_s * 1000:.0f} ms, budget {short.budget_ms} ms: answered in "
            f"{short.timings.total_ms:.0f} ms ({waited_ms:.0f} ms at the client), "
            f"{short.degraded_reason}"
        )


async def test_a_rerank_whose_caller_has_gone_is_not_scored(stack: Stack) -> None:
    """Requests queued behind a long rerank with a budget already spent get no model time."""
    async with await KbClient.connect(stack.nats_url, prefix=stack.topology.prefix) as client:
        passages = tuple(
            RerankCandidate(id=str(i), text=f"passage {i} " * 60) for i in range(DEPTH)
        )
        long = RerankRequest(query="which passage?", candidates=passages, budget_ms=60_000)
        short = RerankRequest(query="which passage?", candidates=passages[:5], budget_ms=1)

        async def ask(payload: RerankRequest) -> RerankReply | KbError:
            try:
                return await request(
                    client.nc,
                    stack.topology.subject("kb.rerank", tenant="_"),
                    payload,
                    RerankReply,
                    stage="reranker",
                    timeout_s=60,
                )
            except KbError as exc:
                return exc

        busy = asyncio.create_task(ask(long))
        await asyncio.sleep(0.05)  # the long one holds the model
        replies = await asyncio.gather(*(ask(short) for _ in range(3)))
        assert isinstance(await busy, RerankReply)
        assert all(isinstance(r, KbError) and r.code == "deadline_exceeded" for r in replies)
