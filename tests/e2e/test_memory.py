"""Memory for agents: what an agent learned is kept as a document, found by later searches,
listed by conversation and forgotten on request, through as_tool(write=True) and MCP."""

from __future__ import annotations

import sys
import uuid

from kbus_client import KbClient
from mcp import Client, StdioServerParameters
from mcp.types import TextContent

from tests.e2e.conftest import Stack
from tests.helpers import cli_env

FACT = "The customer Vandelay Industries prefers invoices in Swiss francs, sent on the 3rd."


async def test_a_tool_that_writes_remembers_lists_and_forgets(stack: Stack) -> None:
    library = f"mem{uuid.uuid4().hex[:8]}"
    async with await KbClient.connect(
        stack.nats_url, prefix=stack.topology.prefix, tenant="mcp"
    ) as kb:
        tool = kb.as_tool(libraries=[library], write=True, conversation="c1")
        other = kb.as_tool(libraries=[library], write=True, conversation="c2")
        schema = tool.openai()["function"]["parameters"]
        assert schema["properties"]["action"]["enum"] == ["search", "remember", "list", "forget"]
        assert "action" not in kb.as_tool(libraries=[library]).parameters["properties"]

        said = await tool.call_json({"action": "remember", "text": FACT})
        memory_id = said.removeprefix("Remembered as ").removesuffix(".")
        assert memory_id.startswith("memory/c1/")
        await other.call_json({"action": "remember", "text": "The office plant is a ficus."})

        found = await tool.call_json({"query": "which currency does Vandelay want invoices in"})
        assert "Swiss francs" in found.split("\n\n")[0]
        listed = await tool.call_json({"action": "list"})
        assert memory_id in listed
        assert "ficus" not in listed
        [entry] = await kb.memory(library, conversation="c1").list()
        assert entry.metadata["source"] == "search_knowledge_base"
        assert {"kind", "conversation", "time"} <= set(entry.metadata)

        assert await tool.call_json({"action": "forget", "memory_id": memory_id}) == (
            f"Forgot {memory_id}."
        )
        assert await tool.call_json({"action": "list"}) == (
            "Nothing is remembered from this conversation."
        )
        after = await kb.search("Vandelay invoices currency", libraries=[library], rerank=False)
        assert all("Swiss" not in hit.text for hit in after.results)
        read_only = kb.as_tool(libraries=[library])
        assert "only searches" in await read_only.call_json({"action": "remember", "text": "x"})


async def test_mcp_memory_tools(stack: Stack) -> None:
    library = f"mcpmem{uuid.uuid4().hex[:6]}"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "kbus_cli", "mcp", "--library", "rooms", "--memory-library", library],
        env=cli_env(stack.nats_url, stack.topology.prefix, "mcp"),
    )
    async with Client(params) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"remember", "list_memories", "forget"} <= tools
        said = await client.call_tool("remember", {"text": FACT})
        assert _text(said).startswith("Remembered as memory/default/")
        found = await client.call_tool(
            "search_knowledge_base", {"query": "Vandelay invoice currency", "k": 1}
        )
        assert "Swiss francs" in _text(found)
        listed = await client.call_tool("list_memories", {})
        [entry] = listed.structured_content["result"]
        assert entry["conversation"] == "default"
        forgot = await client.call_tool("forget", {"memory_id": entry["memory_id"]})
        assert _text(forgot) == f"Forgot {entry['memory_id']}."
        assert (await client.call_tool("list_memories", {})).structured_content == {"result": []}


def _text(result: object) -> str:
    content = getattr(result, "content", [])
    return "".join(c.text for c in content if isinstance(c, TextContent))
