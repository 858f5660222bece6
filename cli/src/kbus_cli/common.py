"""What every ``kbus`` command shares: the consoles, the connection options, a client."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from kbus_client import DEFAULT_URL as CLIENT_DEFAULT_URL
from kbus_client import CredentialFile, KbClient
from kbus_client.connecting import UnreachableError, connect_at_once
from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from rich.progress import Progress

T = TypeVar("T")

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

NatsUrl = Annotated[str, typer.Option(envvar="KBUS_NATS_URL", help="NATS server.")]
Prefix = Annotated[str, typer.Option(envvar="KBUS_BUS_PREFIX", help="Bus prefix.")]


def _held_tenant(named: str) -> str:
    """The tenant a command speaks for: its credential's, which wins over the option."""
    held = access.credential
    return held.tenant if held else named


Tenant = Annotated[
    str,
    typer.Option(
        envvar="KBUS_TENANT", help="Tenant (a credential names its own).", callback=_held_tenant
    ),
]
AsJson = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
DEFAULT_URL = CLIENT_DEFAULT_URL


def fail(message: str, cause: BaseException | None = None, code: int = 1) -> NoReturn:
    """Say in one red line why the command stopped, and exit ``code``."""
    err.print(f"[red]{escape(message)}[/]")
    raise typer.Exit(code) from cause


@dataclass
class Access:
    """How every command connects: a tenant's credential (the JSON file ``python -m kbus_dev
    nats-auth --credential`` writes) and TLS; neither for a development bus."""

    credential: CredentialFile | None = None
    tls: ssl.SSLContext | None = None

    def transport(self) -> dict[str, Any]:
        """``nats.connect`` keyword arguments besides the credential's: TLS, if any."""
        return {"tls": self.tls} if self.tls is not None else {}

    def names_restricted(self) -> bool:
        """Whether the credential reaches the records of restricted documents (a development
        bus, without one, enforces nothing)."""
        return self.credential.names_restricted() if self.credential else True


access = Access()


def configure(
    credential: Path | None, tls_ca: Path | None, tls_cert: Path | None, tls_key: Path | None
) -> None:
    """Read the credential file and build the TLS context, for every command that follows."""
    if credential is not None:
        try:
            access.credential = CredentialFile.read(credential)
        except ValueError as exc:
            fail(str(exc), exc, code=2)
    if tls_ca is not None or tls_cert is not None:
        context = ssl.create_default_context(cafile=str(tls_ca) if tls_ca else None)
        if tls_cert is not None:
            context.load_cert_chain(str(tls_cert), str(tls_key) if tls_key else None)
        access.tls = context


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine to its end."""
    return asyncio.run(coro)


async def connect(url: str, prefix: str, tenant: str | None) -> KbClient:
    """A client, or exit 2 saying why NATS cannot be reached, as soon as it is known
    (:func:`kbus_client.connecting.connect_at_once`). A credential names its tenant, libraries
    and bus prefix, which win over the options."""
    try:
        return await connect_at_once(
            url,
            prefix=prefix,
            tenant=tenant,
            # Without a credential (an open bus, which enforces nothing) it may claim anyone.
            acts_for=None,
            credential=access.credential,
            **access.transport(),
        )
    except UnreachableError as exc:
        _unreachable(exc)


def _unreachable(exc: UnreachableError) -> NoReturn:
    """Exit 2 with the one sentence that says why a connection failed."""
    url = exc.url
    if exc.refused_authorization:
        fail(
            f"NATS at {url} refused this connection (authorization violation): give a "
            "credential with --credential (KBUS_CREDENTIAL); `make demo` prints its own",
            exc,
            code=2,
        )
    fail(
        f"cannot reach NATS at {url} ({exc.said}): start kbus with "
        "`make up`, or point --nats-url (KBUS_NATS_URL) at your NATS server",
        exc,
        code=2,
    )


def bars() -> Progress:
    """Progress on stderr (:class:`kbus_cli.bars.Bars`; rich's progress is imported by the
    commands that draw it only)."""
    from kbus_cli.bars import Bars

    return Bars(err)
