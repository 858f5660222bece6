"""The client library against the running services: publish and wait, search, tools."""

from __future__ import annotations

import asyncio

import pytest
from kbus_client import DocumentRejectedError, KbClient, KbError, SyncKbClient

from tests.e2e.conftest import Stack

TEXT = (
    "# Onboarding\n\n## Laptop\n\nNew hires collect their laptop from the IT desk on the "
    "second floor on their first morning. Bring a photo ID.\n"
)


@pytest.fixture
async def client(stack: Stack) -> KbClient:
    return await KbClient.connect(stack.nats_url, prefix=stack.topology.prefix, tenant="initech")


async def test_publish_waits_for_the_receipt_then_the_document_is_searchable(
    client: KbClient,
) -> None:
    async with client:
        result = await client.publish_document(
            library="hr",
            document_id="onboarding.md",
            title="Onboarding",
            text=TEXT,
            content_type="text/markdown",
            source_uri="https://wiki/onboarding",
            wait=True,
            metadata={"team": "people"},
        )
        assert result.receipt is not None
        assert result.receipt.version == result.version
        reply = await client.search(
            "where do new employees pick up their computer?", libraries=["hr"]
        )
        assert reply.results[0].document_id == "onboarding.md"
        assert reply.results[0].heading_path == ("Onboarding", "Laptop")
        filtered = await client.search("laptop", libraries=["hr"], filters={"team": "other"})
        assert filtered.no_match


async def test_an_identical_publish_is_dropped_as_a_duplicate_a_changed_one_is_not(
    client: KbClient,
) -> None:
    async with client:
        first = await client.publish_document(
            library="dedupe", document_id="note", title="Note", text="Lunch is at noon.", wait=True
        )
        again = await client.publish_document(
            library="dedupe", document_id="note", title="Note", text="Lunch is at noon.", wait=True
        )
        changed = await client.publish_document(
            library="dedupe", document_id="note", title="Note", text="Lunch is at one.", wait=True
        )
        assert first.receipt is not None
        assert not first.duplicate
        assert again.duplicate
        assert again.receipt is None
        assert changed.receipt is not None
        assert not changed.duplicate
        reply = await client.search("lunch", libraries=["dedupe"], search_type="keyword")
        assert [hit.text for hit in reply.results] == ["Lunch is at one."]


async def test_a_rejected_document_raises_with_the_reason(client: KbClient) -> None:
    async with client:
        # Accepted by the gate, refused by the ingestor when it reads the bytes.
        with pytest.raises(DocumentRejectedError) as info:
            await client.publish_document(
                library="hr",
                document_id="fake",
                title="Fake",
                data=b"this is not a PDF at all",
                content_type="application/pdf",
                wait=True,
                timeout_s=60,
            )
        assert info.value.code == "content_type_mismatch"
        assert "%PDF-" in str(info.value)
        with pytest.raises(ValueError, match="tenant"):
            await client.publish_document(
                library="hr", document_id="x", title="x", text="x", tenant="bad.tenant"
            )


async def test_search_errors_are_typed(client: KbClient) -> None:
    async with client:
        with pytest.raises(ValueError, match="k"):
            await client.search("q", libraries=["hr"], k=10_000)
        other = await KbClient.connect(
            client.nc.connected_url.geturl() if client.nc.connected_url else "",
            prefix="nobody-listens",
            tenant="initech",
            timeout_s=2,
        )
        async with other:
            with pytest.raises(KbError) as info:
                await other.search("q", libraries=["hr"])
            assert info.value.code == "searcher_unavailable"
            assert info.value.tries > 1  # asked again while its wait allowed


async def test_as_tool_gives_schemas_and_text_a_model_can_read(client: KbClient) -> None:
    async with client:
        await client.publish_document(
            library="hr",
            document_id="onboarding.md",
            title="Onboarding",
            text=TEXT,
            content_type="text/markdown",
            wait=True,
        )
        tool = client.as_tool(libraries=["hr"], name="hr_docs", k=3)
        assert tool.openai()["function"]["name"] == "hr_docs"
        assert tool.openai()["function"]["parameters"]["required"] == ["query"]
        assert tool.anthropic()["input_schema"]["properties"]["k"]["maximum"] == 20
        text = await tool.call_json({"query": "laptop pickup", "k": 2})
        assert text.startswith("[1] score ")
        assert "title: Onboarding" in text
        assert "section: Onboarding > Laptop" in text
        assert "IT desk" in text


def test_the_sync_client_does_the_same_without_an_event_loop(stack: Stack) -> None:
    with SyncKbClient(stack.nats_url, prefix=stack.topology.prefix, tenant="initech") as kb:
        kb.publish_document(
            library="sync",
            document_id="d",
            title="Kettle",
            text="The kettle in the kitchen is descaled every Friday.",
            wait=True,
        )
        reply = kb.search("when is the kettle cleaned", libraries=["sync"])
        assert reply.results[0].document_id == "d"
        assert "kettle" in kb.as_tool(libraries=["sync"])("kettle").lower()
    assert asyncio.get_event_loop_policy() is not None


async def test_delete_a_document_then_publish_it_again(client: KbClient) -> None:
    async with client:
        await client.publish_document(
            library="tmp",
            document_id="memo",
            title="Memo",
            text="The quarterly memo about parking permits.",
            wait=True,
        )
        assert (await client.search("parking permits", libraries=["tmp"])).results
        removed = await client.delete_document(library="tmp", document_id="memo", wait=True)
        assert removed is not None
        assert removed.chunks_deleted == 1
        assert (await client.search("parking permits", libraries=["tmp"])).no_match
        again = await client.publish_document(
            library="tmp",
            document_id="memo",
            title="Memo",
            text="The quarterly memo about parking permits.",
            wait=True,
        )
        assert again.receipt is not None
        assert (await client.search("parking permits", libraries=["tmp"])).results
        with pytest.raises(ValueError, match="library"):
            await client.delete_document(document_id="memo")
