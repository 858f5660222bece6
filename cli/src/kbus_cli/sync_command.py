"""``kbus sync``: a library (or one source's part of it) made to hold exactly a folder's files
or a sitemap's pages; what the folder or the sitemap no longer has is deleted."""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer
from kbus_client import KbClient, KbError
from kbus_client.syncing import SyncResult
from rich.table import Table

from kbus_cli import common
from kbus_cli.files import (
    Selection,
    Source,
    UnsupportedFileError,
    file_source,
    find_files,
    page,
    page_version,
    read_file,
    sitemap_pages,
)

#: Seconds between two looks at what the sync's documents have become.
WATCH_S = 3.0


@dataclass
class Found:
    """What a folder or a sitemap holds: the documents, and what cannot become one (with why)."""

    sources: list[Source] = field(default_factory=list)
    unreadable: list[tuple[Source, str]] = field(default_factory=list)
    #: Each readable document's version, by id.
    versions: dict[str, str] = field(default_factory=dict)


def sync(
    origin: Annotated[str, typer.Argument(help="A folder, or a sitemap's http(s) address.")],
    library: Annotated[str, typer.Option(help="The library to keep in step.")],
    source: Annotated[
        str | None,
        typer.Option(help="The source's name: only its documents are compared and deleted."),
    ] = None,
    include: Annotated[
        list[str] | None,
        typer.Option(help="Only files whose path in the folder matches (repeat): 'docs/**/*.md'."),
    ] = None,
    exclude: Annotated[
        list[str] | None, typer.Option(help="Skip files whose path matches (repeat): '*.log'.")
    ] = None,
    hidden: Annotated[
        bool, typer.Option(help="Also hidden files and folders (.git and the like).")
    ] = False,
    tenant: common.Tenant = "default",
    nats_url: common.NatsUrl = common.DEFAULT_URL,
    prefix: common.Prefix = "",
    settle: Annotated[
        float, typer.Option(help="Seconds kbus waits for the new and changed documents.")
    ] = 300.0,
    as_json: common.AsJson = False,
) -> None:
    """Publish the files or pages that are new or changed, then the whole list: kbus deletes
    what the list does not name and says what it did. A file kbus cannot read is skipped with
    a warning, unless it was indexed before: then nothing is sent (its document would be
    deleted)."""
    try:
        if origin.startswith(("http://", "https://")):
            found = _pages(origin)
        else:
            found = _files(origin, Selection(include or (), exclude or (), hidden))
    except UnsupportedFileError as exc:
        common.fail(f"nothing synced: {exc}")
    try:
        result = common.run(_sync(found, library, source, tenant, nats_url, prefix, settle))
    except UnsupportedFileError as exc:
        common.fail(f"nothing synced: {exc}")
    except (KbError, ValueError) as exc:
        common.fail(f"sync failed: {exc}")
    except TimeoutError as exc:
        common.fail(f"sync failed: no receipt within {settle:.0f} s and a minute", exc)
    _show(result, as_json)
    if result.receipt.failed:
        raise typer.Exit(1)


def _files(folder: str, selection: Selection) -> Found:
    root = Path(folder)
    if not root.is_dir():
        raise UnsupportedFileError(f"{folder} is not a folder")
    found = Found()
    for file, base in find_files([root], selection):
        try:
            found.sources.append(read_file(file, base, None))
        except UnsupportedFileError as exc:
            found.unreadable.append((file_source(file, base), str(exc)))
    return found


def _pages(address: str) -> Found:
    found = Found()
    for url, lastmod in sitemap_pages(address):
        one = page(url)
        version = lastmod or page_version(url)
        found.sources.append(Source(one.document_id, {**one.fields, "version": version}, url))
    return found


async def _sync(
    found: Found,
    library: str,
    source: str | None,
    tenant: str,
    url: str,
    prefix: str,
    settle_s: float,
) -> SyncResult:
    async with await common.connect(url, prefix, tenant) as client:
        _check_each(client, found, library, source)
        indexed = await client.versions(library, source=source)
        blocked = [(s, why) for s, why in found.unreadable if s.document_id in indexed]
        if blocked:
            named = "; ".join(f"{s.origin}: {why}" for s, why in blocked)
            raise UnsupportedFileError(
                f"cannot read {named}. It is indexed, and a sync without it would delete it: "
                "fix the file, or move it out of the folder to delete its document"
            )
        for skipped, why in found.unreadable:
            common.err.print(f"[yellow]skipped {skipped.origin}: {why}[/]")
        changed = {i: v for i, v in found.versions.items() if indexed.get(i) != v}
        new = sum(1 for i in changed if i not in indexed)
        common.err.print(
            f"{len(found.sources)} documents listed: {new} new, {len(changed) - new} changed; "
            f"kbus waits up to {settle_s:.0f} s for them"
        )
        documents: list[dict[str, Any]] = [
            {"document_id": s.document_id, **s.fields} for s in found.sources
        ]
        syncing = asyncio.ensure_future(
            client.sync_library(
                library, documents, source=source, settle_s=settle_s, indexed=indexed
            )
        )
        await _watch(client, library, source, changed, syncing)
        return await syncing


async def _watch(
    client: KbClient,
    library: str,
    source: str | None,
    changed: dict[str, str],
    syncing: asyncio.Future[SyncResult],
) -> None:
    """A bar of the new and changed documents searchable at their listed version, read
    every few seconds until the sync's receipt comes."""
    with common.bars() as progress:
        bar = progress.add_task("indexed", total=len(changed))
        while not syncing.done():
            await asyncio.wait({syncing}, timeout=WATCH_S)
            with contextlib.suppress(KbError, TimeoutError):
                now = await client.versions(library, source=source)
                progress.update(bar, completed=sum(now.get(i) == v for i, v in changed.items()))


def _check_each(client: KbClient, found: Found, library: str, source: str | None) -> None:
    """Move each document kbus would refuse (an id too long, a field out of range) to the
    unreadable, naming its file; note the version of the others."""
    kept: list[Source] = []
    for one in found.sources:
        try:
            fields = {**one.fields, "library": library, "source": source}
            made = client.new_document(document_id=one.document_id, **fields)
            found.versions[one.document_id] = made.effective_version()
            kept.append(one)
        except ValueError as exc:
            found.unreadable.append((one, str(exc)))
    found.sources = kept


def _show(result: SyncResult, as_json: bool) -> None:
    receipt = result.receipt
    if as_json:
        body = {
            **receipt.model_dump(mode="json"),
            "published": result.published,
            "added_documents": list(result.added),
            "changed_documents": list(result.changed),
            "deleted_documents": list(result.deleted),
        }
        common.out.print_json(json.dumps(body))
        return
    table = Table("added", "changed", "unchanged", "deleted", "failed", title="sync")
    counts = (receipt.added, receipt.changed, receipt.unchanged, receipt.deleted, receipt.failed)
    table.add_row(*(str(n) for n in counts))
    common.out.print(table)
    common.out.print(f"{result.published} documents published")
    for word, ids in (("added", result.added), ("changed", result.changed)):
        for document_id in ids:
            common.out.print(f"{word}: {document_id}", markup=False, highlight=False)
    for document_id in result.deleted:
        common.out.print(f"deleted: {document_id}", markup=False, highlight=False)
    for named in receipt.dead_lettered:
        common.err.print(
            f"dead-lettered (kbus dlq list shows it): {named}", style="red", markup=False
        )
    for document_id in receipt.unsettled:
        common.err.print(f"not searchable in time: {document_id}", style="red", markup=False)
