"""``kbus status`` and ``kbus dlq``: the pipeline's backlog and its dead letters."""

from __future__ import annotations

import dataclasses
import json
from typing import Annotated, Any

import typer
from kbus_client import KbClient, KbError
from kbus_client.replays import NO_MESSAGE, ReplayError
from kbus_contract.lanes import Lane
from nats.js.errors import APIError
from rich.table import Table

from kbus_cli import common
from kbus_cli.operations import (
    StageStatus,
    StoredLetter,
    list_dead_letters,
    replay,
    services_answering,
    stage_statuses,
)


def status(
    tenant: common.Tenant = "default",
    as_json: common.AsJson = False,
    nats_url: common.NatsUrl = common.DEFAULT_URL,
    prefix: common.Prefix = "",
) -> None:
    """Backlog, redeliveries and dead letters per stage; the tenant's own work waiting at each
    stage; documents per library."""

    async def go() -> tuple[Any, Any, Any, dict[str, int]]:
        client = await common.connect(nats_url, prefix, tenant)
        async with client:
            # A tenant's credential reaches neither kbus's services' pings nor its streams.
            operator = _credential_tenant() is None
            answering, stages = {}, []
            if operator:
                answering = await services_answering(client.nc, client.topology)
                stages = await stage_statuses(client.nc, client.topology)
            stats: Any
            try:
                stats = await client.stats(restricted=common.access.names_restricted())
            except KbError as exc:
                stats = exc
            own: Any
            try:
                own = await client.backlog()
            except KbError as exc:
                own = exc
            return stages, stats, own, answering

    stages, stats, own, answering = common.run(go())
    if as_json:
        _status_json(stages, stats, own, answering)
        return
    _print_services(answering)
    if stages:
        _print_stages(stages)
    _print_own(own)
    if isinstance(stats, KbError):
        common.out.print(f"[red]documents: {stats}[/]")
        return
    libraries = Table("library", "documents", "chunks", title=f"tenant {stats.tenant}")
    for lib in stats.libraries:
        libraries.add_row(lib.library, str(lib.documents), str(lib.chunks))
    common.out.print(libraries)


def _print_stages(stages: list[StageStatus]) -> None:
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
    common.out.print(table)
    _print_tenants(stages)


def _print_services(answering: dict[str, int]) -> None:
    """Which services answer requests now (those that only consume show in the pipeline's
    "pulling" column)."""
    if not answering:
        common.out.print("services: this credential cannot see which are running")
        return
    common.out.print(
        "services answering requests: " + ", ".join(f"{s} {n}" for s, n in answering.items())
    )
    for stage in (s for s, n in answering.items() if n == 0):
        common.err.print(
            f"[yellow]no {stage} is running: what needs it waits (make up starts every service)[/]"
        )


def _print_own(own: Any) -> None:
    """The tenant's own work at each stage, lane by lane: what its next document waits behind
    (other tenants' work is served in turn with it, and not shown)."""
    if isinstance(own, KbError):
        common.out.print(f"[red]your work per stage: {own}[/]")
        return
    held: dict[str, dict[Lane, int]] = {}
    for lane in own.lanes:
        held.setdefault(lane.stage, {})[lane.lane] = lane.messages
    table = Table(
        "stage",
        "interactive",
        "bulk",
        title=f"tenant {own.tenant}: its messages waiting or in flight at each stage",
    )
    for stage, lanes in held.items():
        table.add_row(stage, str(lanes.get(Lane.INTERACTIVE, 0)), str(lanes.get(Lane.BULK, 0)))
    common.out.print(table)
    common.out.print(
        "a document waits behind its tenant's own messages in its lane (interactive ones go "
        "first); other tenants' work is served in turn with it, by what each costs"
    )


def _status_json(
    stages: list[StageStatus], stats: Any, own: Any, answering: dict[str, int]
) -> None:
    body = {
        "services_answering": answering,
        "stages": [
            {**dataclasses.asdict(s.backlog), "dead_letters": s.dead_letters} for s in stages
        ],
        "own_work": None if isinstance(own, KbError) else own.model_dump(mode="json"),
        "libraries": None if isinstance(stats, KbError) else stats.model_dump(mode="json"),
        "error": str(stats) if isinstance(stats, KbError) else None,
    }
    common.out.print_json(json.dumps(body, default=str))


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
    common.out.print(table)
    if len(ranked) > most:
        common.out.print(f"... and {len(ranked) - most} more tenants")


Library = Annotated[str | None, typer.Option(help="Only this library's dead letters.")]
Code = Annotated[str | None, typer.Option(help="Only dead letters with this code.")]


async def _letters(client: KbClient, library: str | None, code: str | None) -> list[StoredLetter]:
    """The dead letters the credential may read, of one library or code if asked."""
    tenant = _credential_tenant()
    held = await list_dead_letters(client, tenant, restricted=common.access.names_restricted())
    return [
        s
        for s in held
        if (library is None or s.letter.library == library)
        and (code is None or s.letter.code == code)
    ]


def dlq_list(
    library: Library = None,
    code: Code = None,
    as_json: common.AsJson = False,
    nats_url: common.NatsUrl = common.DEFAULT_URL,
    prefix: common.Prefix = "",
) -> None:
    """List dead letters with their reasons."""

    async def go() -> list[StoredLetter]:
        # A tenant's credential reads its tenant's dead letters; an operator, everyone's.
        async with await common.connect(nats_url, prefix, None) as client:
            return await _letters(client, library, code)

    letters = common.run(go())
    if as_json:
        body = [
            {"sequence": s.sequence, **s.letter.model_dump(exclude={"original"})} for s in letters
        ]
        common.out.print_json(json.dumps(body))
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
    common.out.print(table)
    if not letters:
        common.out.print("no dead letters")


def dlq_replay(
    sequence: Annotated[list[int] | None, typer.Argument(help="Dead letters to replay.")] = None,
    everything: Annotated[
        bool, typer.Option("--all", help="Replay every dead letter (of --library, --code).")
    ] = False,
    library: Library = None,
    code: Code = None,
    nats_url: common.NatsUrl = common.DEFAULT_URL,
    prefix: common.Prefix = "",
) -> None:
    """Publish dead letters' original messages again (after fixing the cause)."""
    if not everything and not sequence:
        common.fail(
            "name dead letters by sequence (kbus dlq list shows them), or pass --all", code=2
        )

    async def go() -> tuple[int, list[str]]:
        problems: list[str] = []
        replayed = 0
        async with await common.connect(nats_url, prefix, None) as client:
            held = await _letters(client, library, code)
            chosen = held if everything else [s for s in held if s.sequence in (sequence or [])]
            problems += [f"no dead letter {n}" for n in _missing(sequence, held, everything)]
            for stored in chosen:
                try:
                    remove = _credential_tenant() is None
                    await replay(client.nc, client.topology, stored, remove=remove)
                    replayed += 1
                except ReplayError as exc:
                    problems.append(str(exc))
        return replayed, problems

    replayed, problems = common.run(go())
    common.out.print(f"replayed {replayed}")
    for problem in problems:
        common.err.print(f"[yellow]{problem}[/]")
    if problems:
        raise typer.Exit(1)


def _missing(asked: list[int] | None, held: list[StoredLetter], everything: bool) -> list[int]:
    there = {s.sequence for s in held}
    return [] if everything else [n for n in asked or [] if n not in there]


def dlq_drop(
    sequence: Annotated[list[int], typer.Argument(help="Dead letters to drop.")],
    nats_url: common.NatsUrl = common.DEFAULT_URL,
    prefix: common.Prefix = "",
) -> None:
    """Remove dead letters for good (an operator's credential; a tenant's are removed by the
    stream's age limit)."""
    if _credential_tenant() is not None:
        common.fail("a tenant's credential cannot drop dead letters: they expire after 30 days")

    async def go() -> list[int]:
        async with await common.connect(nats_url, prefix, None) as client:
            js = client.nc.jetstream()
            stream = client.topology.dead_letter_stream.name
            missing = []
            for n in sequence:
                try:
                    await js.delete_msg(stream, n)
                except APIError as exc:
                    if exc.err_code not in NO_MESSAGE:
                        raise
                    missing.append(n)
            return missing

    missing = common.run(go())
    common.out.print(f"dropped {len(sequence) - len(missing)}")
    if missing:
        common.fail("no dead letter " + ", ".join(map(str, missing)))


def _credential_tenant() -> str | None:
    held = common.access.credential
    return held.tenant if held else None


dlq = typer.Typer(
    help="Dead letters: messages a stage could not process.",
    no_args_is_help=True,
    add_completion=False,
)
dlq.command("list")(dlq_list)
dlq.command("replay")(dlq_replay)
dlq.command("drop")(dlq_drop)
