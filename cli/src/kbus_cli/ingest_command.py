"""``kbus ingest``: files, folders and web pages into a library, followed to searchable."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from kbus_client import DocumentRejectedError, KbError
from kbus_contract import DocumentProgress
from rich.progress import Progress, TaskID
from rich.table import Table

from kbus_cli import common
from kbus_cli.files import Source, UnsupportedFileError, find_files, page, read_file, sitemap


def ingest(
    library: Annotated[str, typer.Option(help="Library to add the documents to.")],
    sources: Annotated[
        list[str] | None, typer.Argument(help="Files, folders and http(s) addresses.")
    ] = None,
    tenant: common.Tenant = "default",
    nats_url: common.NatsUrl = common.DEFAULT_URL,
    prefix: common.Prefix = "",
    wait: Annotated[bool, typer.Option(help="Wait until every document is searchable.")] = True,
    timeout: Annotated[
        float,
        typer.Option(
            help="Seconds to wait for a receipt with no sign of progress (a large document "
            "waits as long as its parts keep being stored)."
        ),
    ] = 600.0,
    record_text: Annotated[
        str | None, typer.Option(help="CSV and JSON records: each record's text, '{field}'s.")
    ] = None,
    record_title: Annotated[str, typer.Option(help="Records: each record's heading.")] = "",
    record_metadata: Annotated[
        list[str] | None, typer.Option(help="Records: a field kept as metadata (repeatable).")
    ] = None,
    site_map: Annotated[
        list[str] | None,
        typer.Option("--sitemap", help="A sitemap's address: each page it lists (repeatable)."),
    ] = None,
    interactive: Annotated[
        bool, typer.Option(help="A person waits: ahead of the tenant's bulk work at every stage.")
    ] = False,
    as_json: common.AsJson = False,
) -> None:
    """Publish files as they are (text, Markdown, HTML, PDF, Word, PowerPoint, Excel, CSV and
    JSON records) and web pages by address; the ingestor parses them. Lists what failed."""
    template = (
        {"text": record_text, "title": record_title, "metadata": record_metadata or []}
        if record_text
        else None
    )
    unreadable: list[tuple[str, str]] = []
    given = list(sources or [])
    for address in site_map or []:
        try:
            given.extend(sitemap(address))
        except UnsupportedFileError as exc:
            unreadable.append((address, str(exc)))
    docs = _sources(given, template, unreadable)
    failures = list(unreadable)
    publishing = Publishing(wait, timeout, interactive)
    ok = common.run(_ingest(docs, library, tenant, nats_url, prefix, publishing, failures))
    done = "indexed" if wait else "published"
    if as_json:
        failed = [{"file": name, "reason": reason} for name, reason in failures]
        total = len(docs) + len(unreadable)
        common.out.print_json(json.dumps({done: ok, "files": total, "failed": failed}))
    else:
        common.out.print(f"{ok} of {len(docs) + len(unreadable)} files {done}")
    if failures and not as_json:
        table = Table("file", "reason", title="not ingested", title_style="red")
        for name, reason in failures:
            table.add_row(name, reason)
        common.out.print(table)
    if failures:
        raise typer.Exit(1)


@dataclass(frozen=True)
class Publishing:
    """How ``kbus ingest`` publishes: waiting for receipts (how long) and in which lane."""

    wait: bool
    timeout_s: float
    interactive: bool


def _sources(
    given: list[str], template: dict[str, Any] | None, unreadable: list[tuple[str, str]]
) -> list[Source]:
    docs = [page(s) for s in given if s.startswith(("http://", "https://"))]
    paths = [Path(s) for s in given if not s.startswith(("http://", "https://"))]
    for missing in (p for p in paths if not p.exists()):
        unreadable.append((str(missing), "no such file or folder"))
    for file, root in find_files([p for p in paths if p.exists()]):
        try:
            docs.append(read_file(file, root, template))
        except UnsupportedFileError as exc:
            unreadable.append((str(file), str(exc)))
    return docs


async def _ingest(
    docs: list[Source],
    library: str,
    tenant: str,
    url: str,
    prefix: str,
    publishing: Publishing,
    failures: list[tuple[str, str]],
) -> int:
    client = await common.connect(url, prefix, tenant)
    done = failed = 0
    limit = asyncio.Semaphore(32)
    async with (
        client,
        client.progress_of(library, restricted=common.access.names_restricted()) as told,
    ):
        with common.bars() as progress:
            doing = "indexing" if publishing.wait else "publishing"
            task = progress.add_task(doing, total=len(docs))
            bars: dict[str, tuple[TaskID, int]] = {}
            following = asyncio.create_task(_follow(told, progress, bars))

            async def one(doc: Source) -> None:
                nonlocal done, failed
                async with limit:
                    try:
                        await client.publish_document(
                            library=library,
                            document_id=doc.document_id,
                            wait=publishing.wait,
                            timeout_s=publishing.timeout_s,
                            interactive=publishing.interactive,
                            **doc.fields,
                        )
                        done += 1
                        if doc.document_id in bars:  # indexed whole: its last part told nothing
                            bar, total = bars[doc.document_id]
                            progress.update(bar, completed=total)
                        progress.advance(task)
                    except (DocumentRejectedError, ValueError, TimeoutError, KbError) as exc:
                        failures.append(
                            (doc.origin or doc.document_id, str(exc) or type(exc).__name__)
                        )
                        # The bar counts what is done; what failed is said beside it.
                        failed += 1
                        progress.update(task, description=f"{doing} ({failed} failed)")

            await asyncio.gather(*(one(d) for d in docs))
            following.cancel()
    return done


async def _follow(
    told: asyncio.Queue[DocumentProgress],
    progress: Progress,
    bars: dict[str, tuple[TaskID, int]],
) -> None:
    """A bar per large document, its chunks indexed of all, as the indexer tells them."""
    while True:
        said = await told.get()
        if said.document_id not in bars:
            bar = progress.add_task(f"  {said.document_id} chunks", total=said.total)
            bars[said.document_id] = (bar, said.total)
        bar, _ = bars[said.document_id]
        progress.update(bar, completed=said.indexed, total=said.total)
