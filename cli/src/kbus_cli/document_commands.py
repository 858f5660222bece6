"""``kbus ingest``, ``kbus search`` and ``kbus delete``: a tenant's documents."""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from kbus_client import (
    DocumentRejectedError,
    KbError,
    degraded_note,
    format_context,
    nothing_matched,
    why_no_match,
)
from kbus_contract import DocumentProgress, SearchReply
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


def search(
    query: Annotated[str, typer.Argument(help="The question.")],
    library: Annotated[list[str], typer.Option(help="Library to search (repeat for more).")],
    tenant: common.Tenant = "default",
    k: Annotated[int | None, typer.Option(min=1, max=100, help="Results (default 5).")] = None,
    search_type: Annotated[str, typer.Option(help="hybrid, vector or keyword")] = "hybrid",
    rerank: Annotated[
        bool | None,
        typer.Option("--rerank/--no-rerank", help="Rerank (the server's default if not given)."),
    ] = None,
    budget_tokens: Annotated[
        int | None, typer.Option(help="Print passages that fill this many tokens, with citations.")
    ] = None,
    expand: Annotated[
        str, typer.Option(help="With --budget-tokens: none, neighbours, section or document.")
    ] = "none",
    adaptive: Annotated[
        bool, typer.Option(help="With --budget-tokens: as many passages as score well.")
    ] = False,
    cursor: Annotated[
        str | None, typer.Option(help="The cursor a --budget-tokens search printed: what follows.")
    ] = None,
    principal: Annotated[
        list[str] | None,
        typer.Option(help="Whom the search acts for (repeat): documents with access they hold."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the reply as JSON.")] = False,
    nats_url: common.NatsUrl = common.DEFAULT_URL,
    prefix: common.Prefix = "",
) -> None:
    """Search and print the top results."""

    async def go() -> tuple[SearchReply, list[str]]:
        async with await common.connect(nats_url, prefix, tenant) as client:
            reply = await client.search(
                query,
                libraries=library,
                k=k,
                search_type=search_type,
                rerank=rerank,
                budget_tokens=budget_tokens,
                expand=expand,
                adaptive=adaptive,
                cursor=cursor,
                principals=principal or (),
            )
            return reply, [lib.library for lib in (await client.stats()).libraries]

    try:
        reply, held = common.run(go())
    except (KbError, ValueError) as exc:
        common.fail(str(exc), exc)
    _print_reply(reply, as_json)
    if not as_json:
        _say_empty(tenant, library, held)


def _say_empty(tenant: str, asked: list[str], held: list[str]) -> None:
    """Name the libraries searched that hold nothing of the tenant (a wrong name or tenant)."""
    empty = [lib for lib in asked if lib not in held]
    if empty:
        common.err.print(
            f"[yellow]tenant {tenant!r} has no documents in {', '.join(map(repr, empty))}; "
            f"its libraries: {', '.join(held) or 'none'}. --tenant (KBUS_TENANT) and --library "
            "choose where to search.[/]"
        )


def _print_reply(reply: SearchReply, as_json: bool) -> None:
    """A search's reply as JSON, its context with citations, or a table of its hits."""
    if as_json:
        common.out.print_json(reply.model_dump_json())
        return
    if reply.degraded:
        common.err.print(f"[yellow]{degraded_note(reply).strip()}[/]")
    if reply.no_match:
        common.out.print(f"no match: {why_no_match(reply)}")
        return
    if reply.context is not None:
        common.out.print(
            format_context(reply, nothing_matched(reply)), markup=False, highlight=False
        )
        return
    table = Table("#", reply.score_kind, "title", "section", "source", "text")
    for rank, hit in enumerate(reply.results, 1):
        table.add_row(
            str(rank),
            f"{hit.scores.final:.3f}",
            hit.title,
            " > ".join(hit.heading_path),
            hit.source_uri or hit.document_id,
            " ".join(hit.text.split())[:120],
        )
    common.out.print(table)
    common.out.print(
        f"{reply.timings.total_ms:.0f} ms, model {reply.model or '-'}, "
        f"reranker {reply.reranker or '-'}"
    )


def delete(
    library: Annotated[
        str | None, typer.Option(help="Library (all of it without --document).")
    ] = None,
    document: Annotated[str | None, typer.Option(help="Document id.")] = None,
    everything: Annotated[
        bool, typer.Option("--tenant-wide", help="Delete the whole tenant.")
    ] = False,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Delete a whole library or tenant without asking.")
    ] = False,
    tenant: common.Tenant = "default",
    nats_url: common.NatsUrl = common.DEFAULT_URL,
    prefix: common.Prefix = "",
) -> None:
    """Delete a document, a library or a whole tenant, and wait for the receipt. A whole
    library or tenant is deleted only after a confirmation (or --yes)."""
    if library is None and not everything:
        common.fail("name a --library (and --document), or pass --tenant-wide", code=2)
    if document is None:
        what = f"library {library!r}" if library else "every library"
        _confirm(f"Delete {what} of tenant {tenant!r}, every document in it?", yes)

    async def go() -> tuple[Any, list[str]]:
        async with await common.connect(nats_url, prefix, tenant) as client:
            held = [lib.library for lib in (await client.stats()).libraries]
            removed = await client.delete_document(library=library, document_id=document, wait=True)
            return removed, held

    try:
        removed, held = common.run(go())
    except (KbError, ValueError) as exc:
        common.fail(str(exc), exc)
    except TimeoutError as exc:
        common.fail("no receipt in time: the deletion is published and will still take effect", exc)
    common.out.print(f"deleted {removed.chunks_deleted} chunks")
    if library is not None and library not in held:
        common.fail(f"tenant {tenant!r} has no library {library!r}: nothing was there")
    if removed.chunks_deleted == 0:
        common.fail(
            "no chunk of it was indexed, so nothing searchable was removed (a copy still on "
            "its way will not be indexed)"
        )


def _confirm(question: str, yes: bool) -> None:
    """Go on only if the person confirms (or passed --yes); without a terminal, --yes."""
    if yes:
        return
    if not sys.stdin.isatty():
        common.fail(f"{question} Pass --yes to confirm.", code=2)
    if not typer.confirm(question, default=False, err=True):
        common.fail("nothing deleted", code=1)
