"""``kbus status`` and ``kbus dlq``: the pipeline's backlog and its dead letters."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from kbus_client import KbError
from kbus_contract.lanes import Lane
from rich.table import Table

from kbus_cli.common import (
    DEFAULT_URL,
    NatsUrl,
    Prefix,
    Tenant,
    access,
    connect,
    err,
    out,
    run,
)
from kbus_cli.operations import (
    ReplayError,
    StageStatus,
    list_dead_letters,
    replay,
    stage_statuses,
)


def status(
    tenant: Tenant = "default",
    nats_url: NatsUrl = DEFAULT_URL,
    prefix: Prefix = "",
) -> None:
    """Backlog, redeliveries and dead letters per stage; documents per library."""

    async def go() -> tuple[Any, Any]:
        client = await connect(nats_url, prefix, tenant)
        async with client:
            stages = await stage_statuses(client.nc, client.topology)
            stats: Any
            try:
                stats = await client.stats()
            except KbError as exc:
                stats = exc
            return stages, stats

    stages, stats = run(go())
    table = Table(
        "stage", "pending", "in flight", "redelivered", "pulling", "dead letters", title="pipeline"
    )
    for s in stages:
        b = s.backlog
        table.add_row(
            b.stage,
            str(b.pending) if b.found else "no consumer",
            str(b.in_flight),
            str(b.redelivered),
            str(b.waiting_pulls) if not b.fair else "by turn",
            str(s.dead_letters),
        )
    out.print(table)
    _print_tenants(stages)
    if isinstance(stats, KbError):
        out.print(f"[red]documents: {stats}[/]")
        return
    libraries = Table("library", "documents", "chunks", title=f"tenant {stats.tenant}")
    for lib in stats.libraries:
        libraries.add_row(lib.library, str(lib.documents), str(lib.chunks))
    out.print(libraries)


def _print_tenants(stages: list[StageStatus], most: int = 20) -> None:
    """Each tenant's work waiting at each stage (the tenants holding most first)."""
    held: dict[str, dict[str, int]] = {}
    for s in stages:
        for t in s.backlog.tenants:
            name = t.tenant if t.lane is Lane.BULK else f"{t.tenant} ({t.lane.value})"
            held.setdefault(name, {})[t.stage] = held.get(name, {}).get(t.stage, 0) + t.messages
    if not held:
        return
    names = [s.backlog.stage for s in stages]
    table = Table("tenant", *names, title="work held per tenant (waiting or in flight)")
    ranked = sorted(held.items(), key=lambda item: -sum(item[1].values()))
    for tenant, per_stage in ranked[:most]:
        table.add_row(tenant, *(str(per_stage.get(name, 0)) for name in names))
    out.print(table)
    if len(ranked) > most:
        out.print(f"... and {len(ranked) - most} more tenants")


def dlq_list(
    as_json: Annotated[bool, typer.Option("--json")] = False,
    nats_url: NatsUrl = DEFAULT_URL,
    prefix: Prefix = "",
) -> None:
    """List dead letters with their reasons."""

    async def go() -> Any:
        client = await connect(nats_url, prefix, None)
        async with client:
            # A tenant's credential reads its tenant's dead letters; an operator, everyone's.
            tenant = _credential_tenant()
            return await list_dead_letters(client, tenant, restricted=access.names_restricted())

    letters = run(go())
    if as_json:
        out.print_json(
            json.dumps(
                [
                    {"sequence": s.sequence, **s.letter.model_dump(exclude={"original"})}
                    for s in letters
                ]
            )
        )
        return
    table = Table("seq", "stage", "code", "tenant", "library", "document", "reason")
    for s in letters:
        lt = s.letter
        table.add_row(
            str(s.sequence),
            lt.stage,
            lt.code,
            lt.tenant or "",
            lt.library or "",
            lt.document_id or "",
            lt.reason[:160],
        )
    out.print(table)


def dlq_replay(
    sequence: Annotated[list[int] | None, typer.Argument(help="Dead letters to replay.")] = None,
    everything: Annotated[bool, typer.Option("--all", help="Replay every dead letter.")] = False,
    nats_url: NatsUrl = DEFAULT_URL,
    prefix: Prefix = "",
) -> None:
    """Publish dead letters' original messages again (after fixing the cause)."""

    async def go() -> tuple[int, list[str]]:
        client = await connect(nats_url, prefix, None)
        problems: list[str] = []
        replayed = 0
        async with client:
            tenant = _credential_tenant()
            held = await list_dead_letters(client, tenant, restricted=access.names_restricted())
            for stored in held:
                if not everything and stored.sequence not in (sequence or []):
                    continue
                try:
                    await replay(client.nc, client.topology, stored, remove=tenant is None)
                    replayed += 1
                except ReplayError as exc:
                    problems.append(str(exc))
        return replayed, problems

    if not everything and not sequence:
        err.print("[red]name dead letters by sequence, or pass --all[/]")
        raise typer.Exit(2)
    replayed, problems = run(go())
    out.print(f"replayed {replayed}")
    for problem in problems:
        err.print(f"[yellow]{problem}[/]")


def _credential_tenant() -> str | None:
    held = access.credential
    return str(held["tenant"]) if held else None
