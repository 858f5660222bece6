"""``kbus sync``: a library (or one source's part of it) made to hold exactly a folder's files
or a sitemap's pages; what the folder or the sitemap no longer has is deleted."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from kbus_client import KbError
from kbus_client.syncing import SyncResult
from rich.table import Table

from kbus_cli.common import DEFAULT_URL, NatsUrl, Prefix, Tenant, connect, err, out, run
from kbus_cli.files import (
    Source,
    UnsupportedFileError,
    find_files,
    page,
    page_version,
    read_file,
    sitemap_pages,
)


def sync(
    origin: Annotated[str, typer.Argument(help="A folder, or a sitemap's http(s) address.")],
    library: Annotated[str, typer.Option(help="The library to keep in step.")],
    source: Annotated[
        str | None,
        typer.Option(help="The source's name: only its documents are compared and deleted."),
    ] = None,
    tenant: Tenant = "default",
    nats_url: NatsUrl = DEFAULT_URL,
    prefix: Prefix = "",
    settle: Annotated[
        float, typer.Option(help="Seconds kbus waits for the new and changed documents.")
    ] = 300.0,
) -> None:
    """Publish the files or pages that are new or changed, then the whole list: kbus deletes
    what the list does not name and says what it did. Nothing is sent when a file cannot be
    read (its document would be deleted)."""
    try:
        found = _pages(origin) if origin.startswith(("http://", "https://")) else _files(origin)
    except UnsupportedFileError as exc:
        err.print(f"[red]nothing synced: {exc}[/]")
        raise typer.Exit(1) from exc
    try:
        result = run(_sync(found, library, source, tenant, nats_url, prefix, settle))
    except (KbError, ValueError, TimeoutError) as exc:
        err.print(f"[red]sync failed: {exc or type(exc).__name__}[/]")
        raise typer.Exit(1) from exc
    _show(result)
    if result.receipt.failed:
        raise typer.Exit(1)


def _files(folder: str) -> list[Source]:
    root = Path(folder)
    if not root.is_dir():
        raise UnsupportedFileError(f"{folder} is not a folder")
    sources, unreadable = [], []
    for file, base in find_files([root]):
        try:
            sources.append(read_file(file, base, None))
        except UnsupportedFileError as exc:
            unreadable.append(f"{file}: {exc}")
    if unreadable:
        raise UnsupportedFileError("cannot read " + "; ".join(unreadable))
    return sources


def _pages(address: str) -> list[Source]:
    sources = []
    for url, lastmod in sitemap_pages(address):
        found = page(url)
        version = lastmod or page_version(url)
        sources.append(Source(found.document_id, {**found.fields, "version": version}))
    return sources


async def _sync(
    found: list[Source],
    library: str,
    source: str | None,
    tenant: str,
    url: str,
    prefix: str,
    settle_s: float,
) -> SyncResult:
    documents: list[dict[str, Any]] = [{"document_id": s.document_id, **s.fields} for s in found]
    async with await connect(url, prefix, tenant) as client:
        return await client.sync_library(library, documents, source=source, settle_s=settle_s)


def _show(result: SyncResult) -> None:
    receipt = result.receipt
    table = Table("added", "changed", "unchanged", "deleted", "failed", title="sync")
    table.add_row(
        *(
            str(n)
            for n in (
                receipt.added,
                receipt.changed,
                receipt.unchanged,
                receipt.deleted,
                receipt.failed,
            )
        )
    )
    out.print(table)
    out.print(f"{result.published} documents published")
    for document_id in receipt.unsettled:
        err.print(f"[red]not searchable in time: {document_id}[/]")
