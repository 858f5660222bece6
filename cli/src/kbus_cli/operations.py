"""Operator views of the bus: backlog per stage, dead letters, replays."""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass

from kbus_client import KbClient
from kbus_client.replays import replay_letter
from kbus_contract import DeadLetter
from kbus_contract.backlog import StageBacklog, backlogs
from kbus_contract.catalog import CHANNELS
from kbus_contract.feed import MAX_FEED_ENTRIES, FeedKind
from kbus_contract.topology import Topology
from nats.aio.client import Client
from nats.errors import Error as NatsError
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError
from pydantic import ValidationError


@dataclass(frozen=True)
class StageStatus:
    """One pipeline stage as the server sees it, with its dead letters."""

    backlog: StageBacklog
    dead_letters: int


async def stage_statuses(nc: Client, topology: Topology) -> list[StageStatus]:
    """Every stage's consumers, as the server sees them."""
    letters = await dead_letter_counts(nc, topology)
    return [
        StageStatus(backlog, letters.get(backlog.stage, 0))
        for backlog in await backlogs(nc.jetstream(), topology)
    ]


async def dead_letter_counts(nc: Client, topology: Topology) -> dict[str, int]:
    """Dead letters per stage (the operator's view: every tenant's)."""
    try:
        info = await nc.jetstream().stream_info(
            topology.dead_letter_stream.name, subjects_filter=topology.dead_letters
        )
    except NotFoundError:
        return {}
    counts: dict[str, int] = {}
    for subject, count in (info.state.subjects or {}).items():
        tokens = subject.split(".")[1 if topology.prefix else 0 :]  # deadletter.{stage}...
        stage = tokens[1] if len(tokens) > 1 else ""
        counts[stage] = counts.get(stage, 0) + int(count)
    return counts


#: Each micro service kbus runs, and the stage that runs it (from the catalog).
MICRO_SERVICES = {c.micro: c.receiver for c in CHANNELS if c.micro}


async def services_answering(nc: Client, topology: Topology, wait_s: float = 0.5) -> dict[str, int]:
    """How many instances of each of kbus's micro services (by the stage that runs it) answer
    a ``$SRV.PING`` on this bus prefix now; ``{}`` where the credential may not ping."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    found = dict.fromkeys(sorted(set(MICRO_SERVICES.values())), 0)
    try:
        await nc.publish("$SRV.PING", b"", reply=inbox)
        deadline = asyncio.get_running_loop().time() + wait_s
        while (left := deadline - asyncio.get_running_loop().time()) > 0:
            try:
                msg = await sub.next_msg(timeout=left)
            except TimeoutError:
                break
            with contextlib.suppress(ValueError, AttributeError):
                pong = json.loads(msg.data)
                prefix = (pong.get("metadata") or {}).get("bus_prefix", "")
                stage = MICRO_SERVICES.get(pong.get("name", ""))
                if stage is not None and prefix == topology.prefix:
                    found[stage] += 1
    except NatsError:
        return {}
    finally:
        await sub.unsubscribe()
    return found


@dataclass(frozen=True)
class StoredLetter:
    """A dead letter and where it is stored."""

    sequence: int
    letter: DeadLetter


async def list_dead_letters(
    client: KbClient, tenant: str | None = None, limit: int = 1_000, *, restricted: bool = True
) -> list[StoredLetter]:
    """The dead letters in the stream, oldest first: every tenant's (an operator's view, read
    from the stream), or one tenant's (what its credential may read: ``kb.feed``, with those of
    restricted documents if ``restricted``)."""
    if tenant is not None:
        return await _tenant_letters(client, limit, restricted)
    return await _stream_letters(client.nc, client.topology, limit)


async def _tenant_letters(client: KbClient, limit: int, restricted: bool) -> list[StoredLetter]:
    out: list[StoredLetter] = []
    after, more = 0, True
    while more and len(out) < limit:
        page = await client.feed(
            FeedKind.DEAD_LETTERS, after=after, limit=MAX_FEED_ENTRIES, restricted=restricted
        )
        for entry in page.entries:
            with contextlib.suppress(ValidationError):
                out.append(StoredLetter(entry.sequence, DeadLetter.model_validate(entry.message)))
        after, more = page.last, page.more and bool(page.entries)
    return out[:limit]


async def _stream_letters(nc: Client, topology: Topology, limit: int) -> list[StoredLetter]:
    js = nc.jetstream()
    config = ConsumerConfig(
        name=f"kbus-dlq-{nc.new_inbox().rsplit('.', 1)[-1]}",
        deliver_policy=DeliverPolicy.ALL,
        ack_policy=AckPolicy.NONE,
        inactive_threshold=60.0,
    )
    try:
        sub = await js.subscribe(
            topology.dead_letters, stream=topology.dead_letter_stream.name, config=config
        )
    except NotFoundError:
        return []
    out: list[StoredLetter] = []
    try:
        info = await sub.consumer_info()
        # Pending now, and what was delivered before the count was taken.
        delivered = int(info.delivered.consumer_seq or 0) if info.delivered else 0
        total = min(limit, int(info.num_pending or 0) + delivered)
        while len(out) < total:
            try:
                msg = await sub.next_msg(timeout=5)
            except TimeoutError:
                break
            with contextlib.suppress(ValidationError):
                letter = DeadLetter.model_validate_json(msg.data)
                out.append(StoredLetter(int(msg.metadata.sequence.stream), letter))
    finally:
        await sub.unsubscribe()
    return out


async def replay(
    nc: Client, topology: Topology, stored: StoredLetter, *, remove: bool = True
) -> None:
    """Send a stored dead letter's message again (:func:`kbus_client.replays.replay_letter`)."""
    await replay_letter(nc, topology, stored.sequence, stored.letter, remove=remove)
