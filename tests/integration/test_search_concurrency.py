"""One searcher answers several searches at once, up to its limit."""

from __future__ import annotations

import asyncio
import json
import time

from faststream import TestApp
from kbus_contract import RerankReply, RerankRequest, SearchReply
from kbus_contract.topology import Topology
from kbus_runtime.budgets import BudgetSettings, TenantBudget
from kbus_runtime.settings import BusSettings, StoreSettings
from kbus_searcher.app import create_app
from kbus_searcher.settings import SearcherSettings
from nats.aio.client import Client
from nats.aio.msg import Msg

from tests.helpers import ask, read_stream, ready


async def test_searches_are_answered_side_by_side(
    nc: Client, bus: BusSettings, store_settings: StoreSettings, topology: Topology
) -> None:
    # A reranker that takes half a second per request, as a remote one can, and answers any
    # number at once: while a search waits for it, the searcher must go on with the others.
    in_flight, most = 0, 0
    answering: set[asyncio.Task[None]] = set()

    async def answer(msg: Msg) -> None:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.5)
        in_flight -= 1
        asked = RerankRequest.model_validate_json(msg.data)
        scores = tuple(float(i) for i in range(len(asked.candidates)))
        await msg.respond(RerankReply(model="slow", scores=scores).model_dump_json().encode())

    async def slow_reranker(msg: Msg) -> None:
        task = asyncio.create_task(answer(msg))
        answering.add(task)
        task.add_done_callback(answering.discard)

    await nc.subscribe(topology.every("kb.rerank"), cb=slow_reranker)
    # The tenant may hold every slot (by default one tenant holds a quarter of them).
    budgets = BudgetSettings(tenant_budgets={"t1": TenantBudget.of(requests_in_flight=3)})
    settings = SearcherSettings(bus=bus, store=store_settings, search_concurrency=3)
    app = create_app(settings.model_copy(update={"budgets": budgets}))
    async with TestApp(app):
        indexed = ready("t1", "lib", "doc", "v1", ["one common", "two common"])
        await nc.jetstream().publish(
            topology.of_document("embeddings.ready", indexed.document),
            indexed.model_dump_json().encode(),
        )
        await read_stream(nc, topology.document_indexed, count=1)
        request = json.dumps(
            {"tenant": "t1", "libraries": ["lib"], "query": "common", "search_type": "keyword"}
        ).encode()

        started = time.monotonic()
        replies = await asyncio.gather(*(ask(nc, topology, request) for _ in range(5)))
        elapsed = time.monotonic() - started

    for reply in replies:
        assert SearchReply.model_validate_json(reply.data).reranker == "slow"
    # Five searches, at most three at once: two rounds of the reranker's half second.
    assert most == 3
    assert 1.0 <= elapsed < 2.4  # one at a time: at least 2.5 s
