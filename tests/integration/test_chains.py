"""A library's chain on real servers: its profile names a query transformer and a prompted
reranker, which run on a real LLM (SmolLM2-135M-Instruct on llama-cpp-python's server).

What is asserted is what kbus does with the model's output: the transformed query searched when
it passes the checks, each candidate scored by the model's own probability of "yes" blended with
the first stage's score, the request's override honoured, and the first stage's order kept,
saying why, where no model can judge. Not the model's wisdom.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import pytest
from faststream import TestApp
from kbus_client import KbClient
from kbus_contract import (
    DegradedReason,
    LibraryProfile,
    RerankerKind,
    Reranking,
    SearchReply,
    Transformer,
    TransformerKind,
)
from kbus_contract.topology import Topology
from kbus_dev.llm import MODEL_NAME
from kbus_ingestor.app import create_app as ingestor_app
from kbus_ingestor.settings import IngestorSettings
from kbus_reranker.app import create_app as reranker_app
from kbus_reranker.prompting import ANSWERS, MESSAGE, SYSTEM
from kbus_reranker.settings import RerankerSettings
from kbus_runtime.chat import LLMSettings, OpenAIChat
from kbus_runtime.passages import passage_text
from kbus_runtime.settings import BusSettings, StoreSettings
from kbus_searcher.app import create_app as searcher_app
from kbus_searcher.search.rewriting import PROMPT_TAIL, MalformedRewriteError, checked
from kbus_searcher.settings import SearcherSettings
from kbus_searcher.store import ChunkStore
from nats.aio.client import Client

from tests.helpers import LLMRecorder, ask, ready, upsert

PRODUCTS = [
    "Trail runner 2: a light running shoe for wet forest paths, with a grippy sole.",
    "City sneaker: a white leather shoe for offices and dry pavements.",
    "Shoe polish: a tin of black wax that keeps leather shoes shining.",
]
PROMPT = "Turn the shopper's words into a one-sentence description of the product they want."
INSTRUCTION = "The passage describes the product the shopper wants, not an accessory for it."
PROFILE = LibraryProfile(
    transformer=Transformer(kind=TransformerKind.PROMPT, prompt=PROMPT),
    reranker=Reranking(kind=RerankerKind.PROMPTED, instruction=INSTRUCTION),
)
QUERY = "shoe for running in the rain"


async def _search(nc: Client, topology: Topology, **extra: object) -> SearchReply:
    payload = {"tenant": "shop", "libraries": ["products"], "query": QUERY, "min_evidence": -1}
    body = json.dumps({**payload, "search_type": "keyword", "budget_ms": 120_000, **extra})
    reply = await ask(nc, topology, body.encode(), timeout_s=130)
    return SearchReply.model_validate_json(reply.data)


async def _profiled(nc: Client, topology: Topology) -> SearchReply:
    """The first search that runs the library's profile (searchers follow the bucket)."""
    for _ in range(50):
        reply = await _search(nc, topology, transformer="none")
        if reply.reranker.startswith("prompted") or reply.degraded:
            return reply
        await asyncio.sleep(0.2)
    raise AssertionError("the searcher never ran the library's profile")


def _expected_query(answer: str) -> str | None:
    try:
        return checked(QUERY, answer, sentences=2)
    except MalformedRewriteError:
        return None


async def _p_yes(chat: OpenAIChat, query: str, passage: str) -> float:
    system = SYSTEM.format(instruction=INSTRUCTION)
    message = MESSAGE.format(query=query, passage=passage)
    return (await chat.choose(system, message, ANSWERS))["yes"]


@dataclass(frozen=True)
class Shop:
    """The model, asked directly, and what it answered the searcher (through a recorder)."""

    chat: OpenAIChat
    rewrites: LLMRecorder


@pytest.fixture
async def shop(
    nc: Client,
    bus: BusSettings,
    store_settings: StoreSettings,
    store: ChunkStore,
    topology: Topology,
    llm: str,
    request: pytest.FixtureRequest,
) -> Any:
    """The ingestor (which keeps profiles), a reranker and a searcher on the real LLM, and a
    library of three products whose profile is set."""
    await upsert(store.writes, ready("shop", "products", "sheet", "v1", PRODUCTS))
    model = LLMSettings(url=llm, model=MODEL_NAME, timeout_s=60)
    prompted = request.param
    async with AsyncExitStack() as apps:
        rewrites = apps.enter_context(LLMRecorder(llm))
        await apps.enter_async_context(TestApp(ingestor_app(IngestorSettings(bus=bus))))
        searching = SearcherSettings(
            bus=bus,
            store=store_settings,
            rewriter="openai",
            llm=model.model_copy(update={"url": rewrites.url}),
            rewrite_timeout_s=60,
        )
        await apps.enter_async_context(TestApp(searcher_app(searching)))
        reranking = RerankerSettings(
            bus=bus, prompted="openai", llm=model, token_states=False, query_states=False
        )
        kb = KbClient(nc, prefix=topology.prefix, tenant="shop")
        # The profile is kept while a reranker's model answers; without one (None), that
        # reranker is gone by the time the library is searched.
        async with TestApp(reranker_app(reranking)):
            await kb.profile("products", set_to=PROFILE)
        reranking = reranking.model_copy(update={"prompted": prompted})
        await apps.enter_async_context(TestApp(reranker_app(reranking)))
        yield Shop(OpenAIChat(model), rewrites)


@pytest.mark.parametrize("shop", ["openai"], indirect=True)
async def test_a_library_s_profile_transforms_its_queries_and_prompts_its_reranker(
    nc: Client, topology: Topology, shop: Shop
) -> None:
    first = await _profiled(nc, topology)
    assert first.transformer == "none"  # the request's own choice wins over the profile
    # Keyword search sends no first-stage prior: the score is the model's own, and named so.
    assert first.reranker == f"prompted:openai/{MODEL_NAME}"
    assert not first.degraded

    reply = await _search(nc, topology)
    [asked] = shop.rewrites.asked  # once, with the profile's prompt
    assert asked["messages"][0]["content"] == PROMPT + PROMPT_TAIL
    [answer] = shop.rewrites.answers
    searched = _expected_query(answer)
    if searched is None:
        assert (reply.query, reply.degraded_reason) == (QUERY, DegradedReason.REWRITE_FAILED)
    else:
        assert (reply.query, reply.transformer) == (searched, f"prompt:openai/{MODEL_NAME}")

    hits = {h.text: h for h in first.results}
    assert hits
    assert set(hits) <= set(PRODUCTS)
    # The reranker reads a candidate as its title, headings and text.
    passages = [passage_text(h.title, h.heading_path, h.text) for h in first.results]
    judged = [await _p_yes(shop.chat, QUERY, p) for p in passages]
    assert [h.scores.rerank for h in first.results] == pytest.approx(judged, abs=1e-3)
    assert judged == sorted(judged, reverse=True)  # and the hits are in the model's order
    await shop.chat.close()


@pytest.mark.parametrize("shop", [None], indirect=True)
async def test_without_a_model_to_judge_the_first_stage_order_stands_and_says_why(
    nc: Client, topology: Topology, shop: Shop
) -> None:
    reply = await _profiled(nc, topology)
    assert reply.degraded_reason is DegradedReason.RERANK_UNAVAILABLE
    assert reply.reranker == ""
    assert [h.scores.final for h in reply.results] == [h.scores.first_stage for h in reply.results]
    await shop.chat.close()
