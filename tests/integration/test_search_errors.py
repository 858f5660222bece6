"""The searcher's replies when a request is bad or a stage is missing: typed, never silence."""

from __future__ import annotations

import json
import time
from typing import Any

from faststream import TestApp
from kbus_contract import SearchReply
from kbus_contract.topology import Topology
from kbus_runtime.settings import BusSettings, StoreSettings
from kbus_searcher.app import create_app
from kbus_searcher.settings import SearcherSettings
from nats.aio.client import Client

from tests.helpers import ask, read_stream, ready


async def _ask(nc: Client, topology: Topology, payload: bytes) -> dict[str, Any]:
    reply = await ask(nc, topology, payload)
    result: dict[str, Any] = json.loads(reply.data)
    return result


async def test_replies_without_any_other_stage_running(
    nc: Client, bus: BusSettings, store_settings: StoreSettings, topology: Topology
) -> None:
    app = create_app(SearcherSettings(bus=bus, store=store_settings, embed_timeout_s=2))
    async with TestApp(app):
        # No library: nothing is searched and no model is called (no embedder is running).
        empty = await _ask(
            nc,
            topology,
            json.dumps({"tenant": "acme", "libraries": [], "query": "anything"}).encode(),
        )
        assert empty["kind"] == "search_results"
        assert empty["searched"] is False
        assert empty["results"] == []

        malformed = await _ask(nc, topology, b"{nope")
        assert malformed["kind"] == "error"
        assert malformed["error"]["code"] == "invalid_message"

        too_many = await _ask(
            nc,
            topology,
            json.dumps({"tenant": "acme", "libraries": ["a"], "query": "q", "k": 10_000}).encode(),
        )
        assert too_many["error"]["code"] == "invalid_message"
        assert "k" in too_many["error"]["message"]

        started = time.monotonic()
        missing = await _ask(
            nc, topology, json.dumps({"tenant": "acme", "libraries": ["a"], "query": "q"}).encode()
        )
        assert missing["error"]["code"] == "embedder_unavailable"
        assert missing["error"]["retryable"] is True
        assert time.monotonic() - started < 5

        # Keyword search needs no model: an unknown tenant simply has no match.
        keyword = await _ask(
            nc,
            topology,
            json.dumps(
                {
                    "tenant": "nobody",
                    "libraries": ["a"],
                    "query": "q",
                    "search_type": "keyword",
                    "rerank": False,
                }
            ).encode(),
        )
        assert keyword["searched"] is True
        assert keyword["no_match"] is True


async def test_search_is_a_discoverable_nats_micro_service(
    nc: Client, bus: BusSettings, store_settings: StoreSettings, topology: Topology
) -> None:
    app = create_app(SearcherSettings(bus=bus, store=store_settings))
    async with TestApp(app):

        async def gather(subject: str) -> list[dict[str, Any]]:
            inbox = nc.new_inbox()
            sub = await nc.subscribe(inbox)
            await nc.publish(subject, b"", reply=inbox)
            found = []
            try:
                while True:
                    found.append(json.loads((await sub.next_msg(timeout=1)).data))
            except TimeoutError:
                pass
            await sub.unsubscribe()
            return found

        pings = await gather("$SRV.PING.kbus-search")
        assert any(p["metadata"]["bus_prefix"] == topology.prefix for p in pings)
        infos = await gather("$SRV.INFO.kbus-search")
        info = next(i for i in infos if i["metadata"]["bus_prefix"] == topology.prefix)
        endpoints = {e["name"]: e for e in info["endpoints"]}
        assert endpoints["search"]["subject"] == topology.every("kb.search")
        assert endpoints["search"]["queue_group"] == "searcher"
        request_schema = json.loads(endpoints["search"]["metadata"]["request_schema"])
        assert "query" in request_schema["properties"]
        response_schema = json.loads(endpoints["search"]["metadata"]["response_schema"])
        assert {s["title"] for s in response_schema["oneOf"]} == {"SearchReply", "ErrorReply"}
        assert endpoints["stats"]["subject"] == topology.every("kb.stats")

        await _ask(
            nc, topology, json.dumps({"tenant": "acme", "libraries": [], "query": "q"}).encode()
        )
        stats = await nc.request(f"$SRV.STATS.kbus-search.{info['id']}", b"", timeout=5)
        counted = {e["name"]: e for e in json.loads(stats.data)["endpoints"]}
        assert counted["search"]["num_requests"] >= 1


async def test_without_a_reranker_a_default_search_keeps_first_stage_order(
    nc: Client, bus: BusSettings, store_settings: StoreSettings, topology: Topology
) -> None:
    app = create_app(SearcherSettings(bus=bus, store=store_settings, rerank_timeout_s=2))
    async with TestApp(app):
        indexed = ready("t1", "lib", "doc", "v1", ["one common", "two common"])
        await nc.jetstream().publish(
            topology.of_document("embeddings.ready", indexed.document),
            indexed.model_dump_json().encode(),
        )
        await read_stream(nc, topology.document_indexed, count=1)
        request = {
            "tenant": "t1",
            "libraries": ["lib"],
            "query": "common",
            "search_type": "keyword",
        }

        default = await ask(nc, topology, json.dumps(request).encode())
        reply = SearchReply.model_validate_json(default.data)
        assert len(reply.results) == 2
        assert (reply.reranker, reply.score_kind) == ("", "bm25")

        asked = await _ask(nc, topology, json.dumps({**request, "rerank": True}).encode())
        assert asked["error"]["code"] == "reranker_unavailable"


async def test_a_request_acts_for_the_tenant_and_grant_its_subject_names(
    nc: Client, bus: BusSettings, store_settings: StoreSettings, topology: Topology
) -> None:
    app = create_app(SearcherSettings(bus=bus, store=store_settings))

    async def on(subject: str, body: dict[str, Any]) -> dict[str, Any]:
        reply = await nc.request(subject, json.dumps(body).encode(), timeout=10)
        result: dict[str, Any] = json.loads(reply.data)
        return result

    search = {"libraries": ["faq"], "query": "q", "search_type": "keyword", "rerank": False}
    async with TestApp(app):
        foreign = await on(topology.asked("kb.search", "acme"), {**search, "tenant": "globex"})
        assert foreign["error"]["code"] == "tenant_mismatch"
        stats = await on(topology.asked("kb.stats", "acme"), {"tenant": "globex"})
        assert stats["error"]["code"] == "tenant_mismatch"
        beyond = await on(
            topology.asked("kb.search", "acme", "faq"),
            {**search, "tenant": "acme", "libraries": ["faq", "hr"]},
        )
        assert beyond["error"]["code"] == "library_not_granted"
        assert "'hr'" in beyond["error"]["message"]
        # Within its grant (and for its own tenant) the same request is answered.
        within = await on(topology.asked("kb.search", "acme", "faq"), {**search, "tenant": "acme"})
        assert within["kind"] == "search_results"
