"""``kbus mcp``: the knowledge base served to an agent host over MCP."""

from __future__ import annotations

from typing import Annotated

import typer

from kbus_cli import common


def mcp(
    library: Annotated[list[str], typer.Option(help="Library the agent may search (repeat).")],
    tenant: common.Tenant = "default",
    transport: Annotated[str, typer.Option(help="stdio or http")] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
    nats_url: common.NatsUrl = common.DEFAULT_URL,
    prefix: common.Prefix = "",
    memory_library: Annotated[
        str | None,
        typer.Option(help="Library where remember keeps what the agent learned (searched too)."),
    ] = None,
    conversation: Annotated[str, typer.Option(help="The conversation memories belong to.")] = (
        "default"
    ),
    budget_tokens: Annotated[
        int | None,
        typer.Option(help="Tokens of context a search returns unless it asks (numbered passages)."),
    ] = None,
    expand: Annotated[
        str, typer.Option(help="What a passage holds: none, neighbours, section or document.")
    ] = "none",
) -> None:
    """Serve the knowledge base to an agent host over MCP (stdio or streamable HTTP)."""
    from kbus_contract import Expand

    from kbus_cli.mcp_server import McpConfig, build_server

    server = build_server(
        McpConfig(
            nats_url=nats_url,
            tenant=tenant,
            libraries=tuple(
                dict.fromkeys([*library, *([memory_library] if memory_library else [])])
            ),
            prefix=prefix,
            credential=common.access.credential,
            nats_options=common.access.transport(),
            memory_library=memory_library,
            conversation=conversation,
            budget_tokens=budget_tokens,
            expand=Expand(expand),
        )
    )
    if transport == "stdio":
        server.run("stdio")
    elif transport == "http":
        server.run("streamable-http", host=host, port=port)
    else:
        common.err.print("[red]--transport is stdio or http[/]")
        raise typer.Exit(2)
