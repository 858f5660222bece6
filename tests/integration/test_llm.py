"""The query rewriter against a real LLM: SmolLM2-135M-Instruct on llama-cpp-python's server.

What is asserted is what kbus does with the model's text (used when it is one query that keeps
the user's words, refused otherwise, given up when slow or unreachable), not the model's wisdom.
"""

from __future__ import annotations

import json

import pytest
from faststream import TestApp
from kbus_contract import DegradedReason, SearchReply
from kbus_contract.topology import Topology
from kbus_dev.llm import MODEL_NAME
from kbus_dev.servers import free_port
from kbus_runtime.chat import LLMSettings
from kbus_runtime.settings import BusSettings, StoreSettings
from kbus_searcher.app import create_app
from kbus_searcher.search.rewriting import INSTRUCTION, MalformedRewriteError, checked
from kbus_searcher.settings import SearcherSettings
from nats.aio.client import Client

from tests.helpers import LLMRecorder, ask

#: Terse queries of the kind a rewriter is for; at temperature 0 the model's answers are fixed.
QUERIES = ("location of food", "mice obesity receptor", "vitamin D bone loss elderly")


async def _search(nc: Client, topology: Topology, query: str, **extra: object) -> SearchReply:
    payload = {"tenant": "llm", "libraries": ["a"], "query": query, "search_type": "keyword"}
    reply = await ask(nc, topology, json.dumps({**payload, "rerank": False, **extra}).encode())
    return SearchReply.model_validate_json(reply.data)


def _settings(
    bus: BusSettings, store: StoreSettings, url: str, **extra: object
) -> SearcherSettings:
    llm = LLMSettings(url=url, model=MODEL_NAME)
    extra = {"rewriter": "openai", "rewrite": True, "llm": llm, **extra}
    return SearcherSettings(bus=bus, store=store, **extra)  # type: ignore[arg-type]


async def test_the_model_s_rewrite_is_searched_when_it_is_one_query_and_refused_otherwise(
    nc: Client, bus: BusSettings, store_settings: StoreSettings, topology: Topology, llm: str
) -> None:
    searched: dict[str, str | None] = {}
    with LLMRecorder(llm) as model:
        async with TestApp(
            create_app(_settings(bus, store_settings, model.url, rewrite_timeout_s=60))
        ):
            for query in QUERIES:
                reply = await _search(nc, topology, query)
                rewrite = _checked(query, model.answers[-1])
                if rewrite is None:
                    assert (reply.query, reply.transformer) == (query, "none")
                    assert reply.degraded_reason is DegradedReason.REWRITE_FAILED
                else:
                    assert (reply.query, reply.transformer) == (
                        rewrite,
                        f"question:openai/{MODEL_NAME}",
                    )
                    assert not reply.degraded
                    assert reply.timings.rewrite_ms > 0
                assert reply.searched
                searched[query] = rewrite

            asked_not_to = await _search(nc, topology, QUERIES[0], rewrite=False)
            assert (asked_not_to.query, asked_not_to.transformer) == (QUERIES[0], "none")
            assert not asked_not_to.degraded
    assert len(model.answers) == len(QUERIES)  # one question each, none when told not to
    assert {a["messages"][0]["content"] for a in model.asked} == {INSTRUCTION}
    assert any(searched.values()), f"the model rewrote none of {QUERIES} usably: {searched}"


def _checked(query: str, answer: str) -> str | None:
    """The rewrite the searcher should search, from what the model answered it."""
    try:
        return checked(query, answer)
    except MalformedRewriteError:
        return None


@pytest.mark.parametrize("where", ["slow", "down"])
async def test_a_slow_or_unreachable_model_leaves_the_query_as_given(
    nc: Client,
    bus: BusSettings,
    store_settings: StoreSettings,
    topology: Topology,
    llm: str,
    where: str,
) -> None:
    url = llm if where == "slow" else f"http://127.0.0.1:{free_port()}/v1"
    settings = _settings(
        bus, store_settings, url, rewrite_timeout_s=0.001 if where == "slow" else 5
    )
    async with TestApp(create_app(settings)):
        reply = await _search(nc, topology, QUERIES[0])
    assert (reply.query, reply.transformer) == (QUERIES[0], "none")
    assert reply.degraded_reason is DegradedReason.REWRITE_FAILED
    assert reply.searched
