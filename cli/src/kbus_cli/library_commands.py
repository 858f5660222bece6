"""``kbus libraries`` and ``kbus profile``: a tenant's libraries and each one's chain (how its
documents are cut, how its queries are transformed, what re-scores its candidates)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from kbus_client import KbClient, KbError
from kbus_contract import (
    ChunkerKind,
    ContentType,
    LibraryProfile,
    MatchingKind,
    ProfileReply,
    RerankerKind,
    Reranking,
    StatsReply,
    Transformer,
    TransformerKind,
    profiles,
)
from pydantic import ValidationError
from rich.table import Table

from kbus_cli import common


def libraries(
    tenant: common.Tenant = "default",
    as_json: common.AsJson = False,
    nats_url: common.NatsUrl = common.DEFAULT_URL,
    prefix: common.Prefix = "",
) -> None:
    """A tenant's libraries: documents, chunks and the profile each one's documents are cut by."""

    async def go() -> list[tuple[Any, Any]]:
        client = await common.connect(nats_url, prefix, tenant)
        async with client:
            stats = await client.stats(restricted=common.access.names_restricted())
            return [(lib, await client.profile(lib.library)) for lib in stats.libraries]

    try:
        rows = common.run(go())
    except KbError as exc:
        common.fail(str(exc), exc)
    if as_json:
        body = [
            {**lib.model_dump(mode="json"), "profile": reply.model_dump(mode="json")}
            for lib, reply in rows
        ]
        common.out.print_json(json.dumps(body))
        return
    if not rows:
        common.err.print(
            f"[yellow]tenant {tenant!r} has no documents yet (--tenant, KBUS_TENANT)[/]"
        )
    table = Table(
        "library",
        "documents",
        "chunks",
        "profile",
        "chunker",
        "matching",
        "transformer",
        "reranker",
        title=f"tenant {tenant}",
    )
    for lib, reply in rows:
        revision = str(reply.revision) if reply.revision else "default"
        p = reply.profile
        table.add_row(
            lib.library,
            str(lib.documents),
            str(lib.chunks),
            revision,
            _chunker(p),
            _matching(p),
            _transformer(p),
            _reranker(p),
        )
    common.out.print(table)


def _matching(profile: LibraryProfile) -> str:
    m = profile.matching
    if m.kind is MatchingKind.CONTENT:
        return "content"
    what = f"{m.count} questions" if m.kind is MatchingKind.QUESTIONS else "description"
    return f"{what} ({_short(m.prompt)})" if m.prompt else what


def _transformer(profile: LibraryProfile) -> str:
    t = profile.transformer
    if t.kind is None:
        return "server's default"
    return f"prompt ({_short(t.prompt)})" if t.prompt else t.kind.value


def _reranker(profile: LibraryProfile) -> str:
    r = profile.reranker
    depth = f", depth {r.depth}" if r.depth else ""
    if r.instruction:
        return f"prompted ({_short(r.instruction)}{depth})"
    return f"{r.kind.value} ({depth[2:]})" if depth else r.kind.value


def _short(text: str | None, chars: int = 40) -> str:
    text = text or ""
    return repr(text if len(text) <= chars else text[: chars - 1] + "…")


def _chunker(profile: LibraryProfile) -> str:
    c = profile.chunker
    sizes = ", ".join(
        f"{name} {value}" for name, value in (("size", c.size), ("overlap", c.overlap)) if value
    )
    detail = {
        ChunkerKind.RECURSIVE: sizes,
        ChunkerKind.IDENTITY: f"max {c.max_chars} characters",
        ChunkerKind.PATTERN: f"at {c.pattern!r}" + (f", {sizes}" if sizes else ""),
        ChunkerKind.SECTIONS: f"up to {c.max_chars} characters whole",
    }[c.kind]
    return f"{c.kind.value} ({detail})" if detail else c.kind.value


# The options of `kbus profile`.
_Chunker = Annotated[
    ChunkerKind | None,
    typer.Option(help="Set the chunker: recursive, identity, pattern or sections."),
]
_Size = Annotated[int | None, typer.Option(help="Characters per chunk.")]
_Overlap = Annotated[int | None, typer.Option(help="Characters neighbours share.")]
_MaxChars = Annotated[
    int, typer.Option(help="identity, sections: the longest text kept as one chunk.")
]
_Pattern = Annotated[
    str | None, typer.Option(help="pattern: where each new chunk starts (RE2, per line).")
]
_Matching = Annotated[
    MatchingKind | None,
    typer.Option(help="Set what chunks are matched by: content, questions or description."),
]
_Count = Annotated[int, typer.Option(help="questions: how many per chunk.")]
_MatchingPrompt = Annotated[
    str | None, typer.Option(help="questions, description: the library's own instruction.")
]
_Transformer = Annotated[
    TransformerKind | None,
    typer.Option(help="Set the query transformer: none, question or prompt."),
]
_Prompt = Annotated[str | None, typer.Option(help="prompt: what the model turns a query into.")]
_Reranker = Annotated[
    RerankerKind | None, typer.Option(help="Set the reranker: default, none or prompted.")
]
_Instruction = Annotated[
    str | None, typer.Option(help="prompted: what makes a passage relevant here.")
]
_Depth = Annotated[int | None, typer.Option(help="Candidates the reranker re-scores.")]
_Example = Annotated[
    Path | None,
    typer.Option(exists=True, dir_okay=False, help="A document to try the new profile on."),
]


def profile(
    library: Annotated[str, typer.Option(help="The library (as every command names it).")],
    chunker: _Chunker = None,
    size: _Size = None,
    overlap: _Overlap = None,
    max_chars: _MaxChars = 8_000,
    pattern: _Pattern = None,
    matching: _Matching = None,
    count: _Count = 3,
    matching_prompt: _MatchingPrompt = None,
    transformer: _Transformer = None,
    prompt: _Prompt = None,
    reranker: _Reranker = None,
    instruction: _Instruction = None,
    depth: _Depth = None,
    example: _Example = None,
    reset: Annotated[
        bool, typer.Option(help="Back to kbus's defaults for every link (then any named).")
    ] = False,
    tenant: common.Tenant = "default",
    as_json: common.AsJson = False,
    nats_url: common.NatsUrl = common.DEFAULT_URL,
    prefix: common.Prefix = "",
) -> None:
    """Show a library's profile, or set its links: the chunker and the matching texts (for the
    documents ingested after it), the query transformer and the reranker (for the searches
    after it). Links not named keep their current setting."""
    links = _links(
        chunker,
        size,
        overlap,
        max_chars,
        pattern,
        matching,
        count,
        matching_prompt,
        transformer,
        prompt,
        reranker,
        instruction,
        depth,
    )
    connection = (nats_url, prefix, tenant)
    tried = _example(example)

    async def go() -> tuple[ProfileReply, int]:
        async with await common.connect(*connection) as client:
            return await _set_links(client, library, links, tried, reset)

    try:
        reply, indexed = common.run(go())
    except KbError as exc:
        common.fail(str(exc), exc)
    if as_json:
        common.out.print_json(reply.model_dump_json())
        return
    _show(reply, indexed)


def documents(
    library: Annotated[str, typer.Option(help="The library.")],
    tenant: common.Tenant = "default",
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Documents to list.")] = 100,
    after: Annotated[
        str | None, typer.Option(help="List after this document id (the next page's start).")
    ] = None,
    as_json: common.AsJson = False,
    nats_url: common.NatsUrl = common.DEFAULT_URL,
    prefix: common.Prefix = "",
) -> None:
    """A library's indexed documents by id: id, title, version and source, how many there are,
    and how to ask for the next page."""

    async def go() -> StatsReply:
        async with await common.connect(nats_url, prefix, tenant) as client:
            return await client.document_page(
                library, after=after, limit=limit, restricted=common.access.names_restricted()
            )

    try:
        page = common.run(go())
    except (KbError, ValueError) as exc:
        common.fail(str(exc), exc)
    if as_json:
        shown = page.model_dump(mode="json", include={"total", "after", "documents"})
        common.out.print_json(json.dumps(shown))
        return
    table = Table("document", "title", "version", "source", title=f"{tenant}/{library}")
    for d in page.documents:
        table.add_row(d.document_id, d.title, d.version, d.source_uri)
    common.out.print(table)
    if not page.total:
        common.err.print(f"[yellow]tenant {tenant!r} has no documents in {library!r}[/]")
    elif page.after is not None or len(page.documents) < page.total:
        more = f"; the next page: --after {page.after}" if page.after is not None else ""
        common.err.print(f"{len(page.documents)} shown of {page.total}{more}")


def _example(path: Path | None) -> tuple[str, ContentType] | None:
    """An example file's text, and what it is: Markdown is cut by its sections."""
    if path is None:
        return None
    markdown = path.suffix.lower() in (".md", ".markdown")
    return path.read_text(), ContentType.MARKDOWN if markdown else ContentType.PLAIN


async def _set_links(
    client: KbClient,
    library: str,
    links: dict[str, Any],
    example: tuple[str, ContentType] | None,
    reset: bool = False,
) -> tuple[ProfileReply, int]:
    """The library's profile with ``links`` set (on kbus's defaults with ``reset``; tried on
    ``example``, cut as its type is), and how many of its documents a new cut leaves as they
    were."""
    current = await client.profile(library)
    if reset:
        current = current.model_copy(update={"profile": LibraryProfile()})
        links = {"chunker": current.profile.chunker, **links}
    if not links:
        return current, 0
    text, kind = example or (None, ContentType.MARKDOWN)
    reply = await client.profile(
        library,
        set_to=current.profile.model_copy(update=links),
        example=text,
        example_type=kind,
    )
    if not links.keys() & {"chunker", "matching"}:
        return reply, 0
    listed = [s for s in (await client.stats()).libraries if s.library == library]
    return reply, listed[0].documents if listed else 0


def _links(
    chunker: ChunkerKind | None,
    size: int | None,
    overlap: int | None,
    max_chars: int,
    pattern: str | None,
    matching: MatchingKind | None,
    count: int,
    matching_prompt: str | None,
    transformer: TransformerKind | None,
    prompt: str | None,
    reranker: RerankerKind | None,
    instruction: str | None,
    depth: int | None,
) -> dict[str, Any]:
    """The links the options name, checked; a wrong one exits with the reason."""
    try:
        links: dict[str, Any] = {}
        if chunker is not None:
            links["chunker"] = profiles.Chunker(
                kind=chunker, size=size, overlap=overlap, max_chars=max_chars, pattern=pattern
            )
        if matching is not None:
            links["matching"] = profiles.Matching(
                kind=matching, count=count, prompt=matching_prompt
            )
        if transformer is not None:
            links["transformer"] = Transformer(kind=transformer, prompt=prompt)
        if reranker is not None:
            links["reranker"] = Reranking(kind=reranker, instruction=instruction, depth=depth)
    except ValidationError as exc:
        common.err.print(f"[red]{exc.errors()[0]['msg']}[/]")
        raise typer.Exit(2) from exc
    return links


def _show(reply: ProfileReply, indexed: int) -> None:
    """A library's profile, link by link, and what a new cut leaves to do."""
    common.out.print(f"library {reply.library}: revision {reply.revision or 'default'}")
    common.out.print(f"chunker: {_chunker(reply.profile)}")
    common.out.print(f"matching: {_matching(reply.profile)}")
    common.out.print(f"transformer: {_transformer(reply.profile)}")
    common.out.print(f"reranker: {_reranker(reply.profile)}")
    if reply.example_chunks is not None:
        common.out.print(f"the example was cut into {reply.example_chunks} chunks")
    if indexed:
        common.out.print(
            f"documents already indexed: {indexed}. They keep their chunks until they are "
            "published again, or until `python -m kbus_searcher.jobs.reprocess --tenant "
            f"{reply.tenant} --library {reply.library}` cuts them again.",
            markup=False,
            soft_wrap=True,
        )
