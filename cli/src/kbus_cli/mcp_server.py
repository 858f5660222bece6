"""kbus as an MCP server: an agent host searches the knowledge base through tools."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any

from kbus_client import (
    CredentialFile,
    KbClient,
    KbError,
    format_context,
    format_for_model,
    nothing_matched,
)
from kbus_client.memory import Memory
from kbus_client.tool import NEEDS_QUERY, UnknownLibraryError, failed
from kbus_contract import MAX_BUDGET_TOKENS, MIN_BUDGET_TOKENS, Expand
from kbus_contract.wire import describe_validation_error
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, InputRequiredResult
from pydantic import Field, ValidationError

INSTRUCTIONS = (
    "This server searches a kbus knowledge base. Call search_knowledge_base with a full "
    "question; each passage comes with its title, section, source and relevance score (with "
    "budget_tokens: numbered passages that fill it, each with a one-line citation). "
    "Cite sources. list_libraries names the libraries you may search."
)


@dataclass
class McpConfig:
    """What the MCP server connects to and what it may search."""

    nats_url: str
    tenant: str
    libraries: tuple[str, ...]
    prefix: str = ""
    default_k: int = 5
    #: The libraries the credential may reach (None: every library of the tenant).
    granted: tuple[str, ...] | None = None
    #: The principals the credential may claim (None: anyone; the MCP tools claim none).
    acts_for: tuple[str, ...] | None = ()
    nats_options: dict[str, Any] = field(default_factory=dict)
    #: The holder's credential: its tenant, libraries, principals and prefix win over the above.
    credential: CredentialFile | None = None
    #: Where remember keeps what the agent learned (None: the server only searches).
    memory_library: str | None = None
    conversation: str = "default"
    #: The context a search returns unless it asks for another (None: the top passages).
    budget_tokens: int | None = None
    expand: Expand = Expand.NONE


class KbusMcpServer(MCPServer[Any]):
    """An MCP server whose tools answer a model's bad arguments in one sentence it can act on
    (the SDK answers with pydantic's report)."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        """Call a tool; arguments that fail its schema are said in words."""
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(exc, UnexpectedToolError) or not isinstance(cause, ValidationError):
                raise
            said = describe_validation_error(cause)
            raise ToolError(
                f"Invalid arguments: {said}. Call {name} again with corrected arguments."
            ) from cause


def build_server(config: McpConfig) -> MCPServer[Any]:
    """An MCP server with the tools ``search_knowledge_base`` and ``list_libraries``, and
    with a memory library, ``remember``, ``list_memories`` and ``forget``."""
    holder: dict[str, KbClient] = {}
    lock = asyncio.Lock()

    async def client() -> KbClient:
        async with lock:
            if "client" not in holder:
                holder["client"] = await KbClient.connect(
                    config.nats_url,
                    prefix=config.prefix,
                    tenant=config.tenant,
                    granted=config.granted,
                    acts_for=config.acts_for,
                    credential=config.credential,
                    **config.nats_options,
                )
            return holder["client"]

    @asynccontextmanager
    async def lifespan(_: MCPServer[Any]) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if "client" in holder:
                await holder.pop("client").close()

    server = KbusMcpServer(name="kbus", instructions=INSTRUCTIONS, lifespan=lifespan)
    _search_tool(server, config, client)

    @server.tool(name="list_libraries", description="The libraries this server can search.")
    async def list_libraries() -> list[str]:
        try:
            await _exist(await client(), config.libraries, config.memory_library)
        except (KbError, ValueError) as exc:
            raise ToolError(failed(exc, "listing")) from exc
        return list(config.libraries)

    if config.memory_library is not None:
        _memory_tools(server, config, client)
    return server


async def _exist(kb: KbClient, libraries: Sequence[str], memory: str | None) -> None:
    """Raise :class:`UnknownLibraryError` for a library the tenant does not have (the memory's
    is made by its first memory)."""
    wanted = [library for library in libraries if library != memory]
    names = set(await kb.library_names()) if wanted else set()
    if missing := [library for library in wanted if library not in names]:
        raise UnknownLibraryError(kb.tenant_for(), missing, sorted(names))


def _search_tool(
    server: MCPServer[Any], config: McpConfig, client: Callable[[], Awaitable[KbClient]]
) -> None:
    """``search_knowledge_base``, within the configured libraries."""

    @server.tool(
        name="search_knowledge_base",
        description="Search the knowledge base and return the most relevant passages with "
        "their titles, sections, sources and relevance scores.",
    )
    async def search_knowledge_base(
        query: Annotated[str, Field(description="A full question, or keywords.")],
        k: Annotated[int, Field(ge=1, le=20, description="Passages to return.")] = config.default_k,
        libraries: Annotated[
            list[str] | None,
            Field(description="Some of the libraries from list_libraries; all by default."),
        ] = None,
        budget_tokens: Annotated[
            int | None,
            Field(
                ge=MIN_BUDGET_TOKENS,
                le=MAX_BUDGET_TOKENS,
                description="Tokens of context you can afford: numbered passages fill it, each "
                "with its citation.",
            ),
        ] = config.budget_tokens,
        expand: Annotated[
            Expand,
            Field(description="With budget_tokens: none, neighbours, section or document."),
        ] = config.expand,
        cursor: Annotated[
            str | None, Field(description="The cursor a result ended with: its next passages.")
        ] = None,
    ) -> str:
        chosen = tuple(libraries) if libraries else config.libraries
        unknown = sorted(set(chosen) - set(config.libraries))
        if unknown:
            raise ToolError(f"Unknown libraries: {', '.join(unknown)}. Use list_libraries.")
        if not query.strip():
            raise ToolError(NEEDS_QUERY)
        try:
            kb = await client()
            await _exist(kb, chosen, config.memory_library)
            reply = await kb.search(
                query,
                libraries=chosen,
                k=k if budget_tokens is None else None,
                budget_tokens=budget_tokens,
                expand=expand if budget_tokens else Expand.NONE,
                cursor=cursor if budget_tokens else None,
            )
        except (KbError, ValueError) as exc:
            raise ToolError(failed(exc)) from exc
        if budget_tokens is None:
            return format_for_model(reply)
        return format_context(reply, nothing_matched(reply))


def _memory_tools(
    server: MCPServer[Any], config: McpConfig, client: Callable[[], Awaitable[KbClient]]
) -> None:
    """``remember``, ``list_memories`` and ``forget``, over the configured memory library."""
    assert config.memory_library is not None
    library, conversation = config.memory_library, config.conversation

    async def memory() -> Memory:
        return (await client()).memory(library, conversation=conversation, source="mcp")

    @server.tool(
        name="remember",
        description="Keep a fact learned in this conversation, so later searches find it.",
    )
    async def remember(
        text: Annotated[str, Field(min_length=1, description="The fact, in full sentences.")],
    ) -> str:
        try:
            return f"Remembered as {await (await memory()).remember(text)}."
        except KbError as exc:
            return f"Could not remember ({exc.code}): {exc.message}"

    @server.tool(name="list_memories", description="What this conversation asked to remember.")
    async def list_memories() -> list[dict[str, Any]]:
        kept = await (await memory()).list()
        return [{"memory_id": e.document_id, "text": e.title, **e.metadata} for e in kept]

    @server.tool(name="forget", description="Remove a memory by the id list_memories gave.")
    async def forget(memory_id: Annotated[str, Field(pattern=r"^memory/")]) -> str:
        removed = await (await memory()).forget(memory_id)
        return f"Forgot {memory_id}." if removed else f"No memory {memory_id} was found."
