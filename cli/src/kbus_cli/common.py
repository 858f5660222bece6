"""What every ``kbus`` command shares: the consoles, the connection options, a client."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Annotated, Any, TypeVar

import typer
from kbus_client import KbClient
from rich.console import Console

T = TypeVar("T")

out = Console()
err = Console(stderr=True)

NatsUrl = Annotated[str, typer.Option(envvar="KBUS_NATS_URL", help="NATS server.")]
Prefix = Annotated[str, typer.Option(envvar="KBUS_BUS_PREFIX", help="Bus prefix.")]
Tenant = Annotated[str, typer.Option(envvar="KBUS_TENANT", help="Tenant.")]
DEFAULT_URL = "nats://127.0.0.1:4222"


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine to its end."""
    return asyncio.run(coro)


async def connect(url: str, prefix: str, tenant: str | None) -> KbClient:
    """A client, or exit 2 saying why NATS cannot be reached."""
    try:
        return await KbClient.connect(
            url, prefix=prefix, tenant=tenant, max_reconnect_attempts=2, connect_timeout=5
        )
    except Exception as exc:
        err.print(f"[red]cannot reach NATS at {url}: {exc}[/]")
        raise typer.Exit(2) from exc
