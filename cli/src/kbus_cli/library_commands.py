"""``kbus libraries`` and ``kbus profile``: a tenant's libraries and how each one is cut."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from kbus_client import KbError
from kbus_contract import Chunker, ChunkerKind, LibraryProfile
from pydantic import ValidationError
from rich.table import Table

from kbus_cli.common import DEFAULT_URL, NatsUrl, Prefix, Tenant, connect, err, out, run


def libraries(
    tenant: Tenant = "default",
    nats_url: NatsUrl = DEFAULT_URL,
    prefix: Prefix = "",
) -> None:
    """A tenant's libraries: documents, chunks and the profile each one's documents are cut by."""

    async def go() -> list[tuple[Any, Any]]:
        client = await connect(nats_url, prefix, tenant)
        async with client:
            stats = await client.stats()
            return [(lib, await client.profile(lib.library)) for lib in stats.libraries]

    try:
        rows = run(go())
    except KbError as exc:
        err.print(f"[red]{exc}[/]")
        raise typer.Exit(1) from exc
    table = Table("library", "documents", "chunks", "profile", "chunker", title=f"tenant {tenant}")
    for lib, reply in rows:
        revision = str(reply.revision) if reply.revision else "default"
        table.add_row(
            lib.library, str(lib.documents), str(lib.chunks), revision, _chunker(reply.profile)
        )
    out.print(table)


def _chunker(profile: LibraryProfile) -> str:
    c = profile.chunker
    sizes = ", ".join(
        f"{name} {value}" for name, value in (("size", c.size), ("overlap", c.overlap)) if value
    )
    detail = {
        ChunkerKind.RECURSIVE: sizes,
        ChunkerKind.IDENTITY: f"max {c.max_chars} characters",
        ChunkerKind.PATTERN: f"at {c.pattern!r}" + (f", {sizes}" if sizes else ""),
    }[c.kind]
    return f"{c.kind.value} ({detail})" if detail else c.kind.value


def profile(
    library: Annotated[str, typer.Argument(help="The library.")],
    chunker: Annotated[
        ChunkerKind | None,
        typer.Option(help="Set the chunker: recursive, identity or pattern (else only show)."),
    ] = None,
    size: Annotated[int | None, typer.Option(help="Characters per chunk.")] = None,
    overlap: Annotated[int | None, typer.Option(help="Characters neighbours share.")] = None,
    max_chars: Annotated[
        int, typer.Option(help="identity: the longest document kept as one chunk.")
    ] = 8_000,
    pattern: Annotated[
        str | None, typer.Option(help="pattern: where each new chunk starts (RE2, per line).")
    ] = None,
    example: Annotated[
        Path | None,
        typer.Option(exists=True, dir_okay=False, help="A document to try the new profile on."),
    ] = None,
    tenant: Tenant = "default",
    nats_url: NatsUrl = DEFAULT_URL,
    prefix: Prefix = "",
) -> None:
    """Show a library's profile, or set its chunker (for the documents ingested after it)."""
    new = None
    if chunker is not None:
        try:
            new = LibraryProfile(
                chunker=Chunker(
                    kind=chunker, size=size, overlap=overlap, max_chars=max_chars, pattern=pattern
                )
            )
        except ValidationError as exc:
            err.print(f"[red]{exc.errors()[0]['msg']}[/]")
            raise typer.Exit(2) from exc
    text = example.read_text() if example is not None else None

    async def go() -> Any:
        client = await connect(nats_url, prefix, tenant)
        async with client:
            return await client.profile(library, set_to=new, example=text)

    try:
        reply = run(go())
    except KbError as exc:
        err.print(f"[red]{exc}[/]")
        raise typer.Exit(1) from exc
    out.print(f"library {reply.library}: revision {reply.revision or 'default'}")
    out.print(f"chunker: {_chunker(reply.profile)}")
    if reply.example_chunks is not None:
        out.print(f"the example was cut into {reply.example_chunks} chunks")
