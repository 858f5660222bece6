"""The MCP server, driven by the MCP SDK's own client over stdio and streamable HTTP."""

from __future__ import annotations

import asyncio
import socket
import sys

import pytest
from kbus_client import KbClient
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, TextContent

from tests.e2e.conftest import Stack
from tests.helpers import cli_env

TEXT = "Conference room Aurora has a video bar; book it in the calendar as 'Aurora'."


@pytest.fixture(scope="module")
async def published(stack: Stack) -> Stack:
    client = await KbClient.connect(stack.nats_url, prefix=stack.topology.prefix, tenant="mcp")
    async with client:
        await client.publish_document(
            library="rooms", document_id="aurora", title="Rooms", text=TEXT, wait=True
        )
    return stack


async def _exercise(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) >= {"search_knowledge_base", "list_libraries"}
    assert "query" in tools["search_knowledge_base"].input_schema["properties"]
    result = await client.call_tool(
        "search_knowledge_base", {"query": "which meeting room has video?", "k": 2}
    )
    text = "".join(c.text for c in result.content if isinstance(c, TextContent))
    assert "[1] score" in text
    assert "Aurora" in text
    assert "title: Rooms" in text
    refused = await client.call_tool(
        "search_knowledge_base", {"query": "x", "libraries": ["secret"]}
    )
    assert refused.is_error
    assert "Unknown libraries: secret" in _text(refused)
    empty = await client.call_tool("search_knowledge_base", {"query": " "})
    assert empty.is_error
    assert "needs a query" in _text(empty)


def _text(result: CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, TextContent))


async def test_a_server_scoped_to_a_library_the_tenant_lacks_says_so(published: Stack) -> None:
    """It starts (the library may come later), but a search or a listing is an error naming
    the missing library and the tenant's real ones: never "nothing matches"."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "kbus_cli", "mcp", "--library", "rooms", "--library", "ghost"],
        env=cli_env(published.nats_url, published.topology.prefix, "mcp"),
    )
    async with Client(params) as client:
        for tool, arguments in [
            ("search_knowledge_base", {"query": "which meeting room has video?"}),
            ("list_libraries", {}),
        ]:
            result = await client.call_tool(tool, arguments)
            assert result.is_error, tool
            assert "has no library 'ghost' (its libraries: rooms)" in _text(result), tool


async def test_an_agent_tool_scoped_to_a_library_the_tenant_lacks_says_so(
    published: Stack,
) -> None:
    client = await KbClient.connect(
        published.nats_url, prefix=published.topology.prefix, tenant="mcp"
    )
    async with client:
        tool = client.as_tool(libraries=["rooms", "ghost"])
        answer = await tool.call_json({"query": "which meeting room has video?"})
        assert "has no library 'ghost' (its libraries: rooms)" in answer
        assert "No passage" not in answer


async def test_stdio(published: Stack) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "kbus_cli", "mcp", "--library", "rooms"],
        env=cli_env(published.nats_url, published.topology.prefix, "mcp"),
    )
    async with Client(params) as client:
        await _exercise(client)


async def test_streamable_http(published: Stack) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kbus_cli",
        "mcp",
        "--library",
        "rooms",
        "--transport",
        "http",
        "--port",
        str(port),
        env=cli_env(published.nats_url, published.topology.prefix, "mcp"),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            await asyncio.sleep(0.1)
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            await _exercise(client)
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 10)
