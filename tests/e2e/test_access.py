"""Who may read a document: its access names principals; a search acting for none of them
never sees it, and a change of access takes effect without embedding anything again."""

from __future__ import annotations

import json

import pytest
from kbus_client import KbClient, KbError

from tests.e2e.conftest import Stack, embedded_chunks, kbus

TENANT = "accessco"
SALARIES = "The salary bands for 2027 are frozen at the 2026 levels."


async def _client(stack: Stack) -> KbClient:
    return await KbClient.connect(
        stack.nats_url, prefix=stack.topology.prefix, tenant=TENANT, acts_for=None
    )


async def _finds(kb: KbClient, principals: tuple[str, ...]) -> bool:
    reply = await kb.search(
        "salary bands frozen", libraries=["hr"], principals=principals, search_type="keyword"
    )
    return "salaries" in {h.document_id for h in reply.results}


async def test_access_filters_searches_and_listings_and_changes_without_reembedding(
    stack: Stack,
) -> None:
    async with await _client(stack) as kb:
        await kb.publish_document(
            library="hr", document_id="lunch", text="Lunch is served from noon.", wait=True
        )
        await kb.publish_document(
            library="hr",
            document_id="salaries",
            text=SALARIES,
            access=["group:hr", "user:ceo@example.com"],
            wait=True,
        )
        assert await _finds(kb, ("group:hr",))
        assert await _finds(kb, ("user:ceo@example.com", "group:all"))
        assert not await _finds(kb, ("group:eng",))
        assert not await _finds(kb, ())
        listed = {d.document_id for d in await kb.documents("hr", principals=("group:eng",))}
        assert listed == {"lunch"}
        assert {d.document_id for d in await kb.documents("hr", principals=("group:hr",))} == {
            "lunch",
            "salaries",
        }
        counted = {s.library: s.documents for s in (await kb.stats()).libraries}
        assert counted["hr"] == 1

        before = await embedded_chunks(stack)
        await kb.publish_document(
            library="hr", document_id="salaries", text=SALARIES, access=["group:eng"], wait=True
        )
        assert await embedded_chunks(stack) == before  # same text: its vectors come from the cache
        assert await _finds(kb, ("group:eng",))
        assert not await _finds(kb, ("group:hr",))


async def test_an_unbound_client_on_an_open_bus_claims_no_one(stack: Stack) -> None:
    """A client that says nothing of whom it may act for asks on the plain grant's subject,
    where the searcher accepts no claim (a locked bus gives that subject to such credentials)."""
    async with await KbClient.connect(
        stack.nats_url, prefix=stack.topology.prefix, tenant=TENANT
    ) as kb:
        with pytest.raises(KbError) as refused:
            await kb.search("salary", libraries=["hr"], principals=("group:hr",))
    assert refused.value.code == "principal_not_granted"
    assert "it may act for no one" in str(refused.value)


async def test_an_agent_s_memories_are_readable_by_whom_it_acts_for_only(stack: Stack) -> None:
    async with await _client(stack) as kb:
        ann = kb.memory("notes", conversation="trip", principals=("user:ann",))
        kept = await ann.remember("Ann wants a window seat on every flight.")
        assert [m.document_id for m in await ann.list()] == [kept]
        bob = kb.memory("notes", conversation="trip", principals=("user:bob",))
        assert await bob.list() == ()
        tool = kb.as_tool(libraries=["notes"], principals=("user:bob",))
        assert "window seat" not in await tool.call_json({"query": "window seat flight"})
        tool = kb.as_tool(libraries=["notes"], principals=("user:ann",))
        assert "window seat" in await tool.call_json({"query": "window seat flight"})


async def test_kbus_search_acts_for_the_principals_it_is_given(stack: Stack) -> None:
    async with await _client(stack) as kb:
        await kb.publish_document(
            library="payroll",
            document_id="bonus",
            text="The bonus pool is paid out in March.",
            access=["group:pay"],
            wait=True,
        )
    asked = ["search", "bonus pool paid", "--library", "payroll", "--tenant", TENANT]
    asked += ["--search-type", "keyword", "--json"]
    held = json.loads(kbus(stack, *asked, "--principal", "group:pay").stdout)
    assert [h["document_id"] for h in held["results"]] == ["bonus"]
    public = json.loads(kbus(stack, *asked).stdout)
    assert public["results"] == []
