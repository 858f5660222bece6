"""``kbus search`` and ``kbus delete``: a tenant's documents."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from kbus_client import (
    KbError,
    degraded_note,
    format_context,
    nothing_matched,
    why_no_match,
)
from kbus_contract import SearchReply
from rich.table import Table

from kbus_cli import common


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
