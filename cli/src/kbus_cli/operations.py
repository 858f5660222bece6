"""Operator views of the bus: backlog per stage, dead letters, replays."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from kbus_contract import ORIGINAL_LIMIT, DeadLetter
from kbus_contract.topology import Topology
from nats.aio.client import Client
from nats.js.api import ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError
from pydantic import ValidationError


@dataclass(frozen=True)
class StageStatus:
    """The backlog of one pipeline stage's durable consumer."""

    stage: str
    stream: str
    consumer: str
    pending: int
    in_flight: int
    redelivered: int
    waiting_pulls: int
    dead_letters: int
    found: bool


async def stage_statuses(nc: Client, topology: Topology) -> list[StageStatus]:
    """Every stage's consumer, as the server sees it."""
    js = nc.jetstream()
    letters = await dead_letter_counts(nc, topology)
    stages = [
        ("ingestor", topology.documents_stream.name, topology.ingestor_durable),
        ("embedder", topology.chunks_stream.name, topology.embedder_durable),
        ("indexer", topology.embeddings_stream.name, topology.indexer_durable),
        ("deleter", topology.documents_stream.name, topology.deleter_durable),
    ]
    out = []
    for stage, stream, durable in stages:
        try:
            info = await js.consumer_info(stream, durable)
        except NotFoundError:
            out.append(
                StageStatus(stage, stream, durable, 0, 0, 0, 0, letters.get(stage, 0), False)
            )
            continue
        out.append(
            StageStatus(
                stage,
                stream,
                durable,
                int(info.num_pending or 0),
                int(info.num_ack_pending or 0),
                int(info.num_redelivered or 0),
                int(info.num_waiting or 0),
                letters.get(stage, 0),
                True,
            )
        )
    return out


async def dead_letter_counts(nc: Client, topology: Topology) -> dict[str, int]:
    """Dead letters per stage."""
    try:
        info = await nc.jetstream().stream_info(
            topology.dead_letter_stream.name, subjects_filter=topology.dead_letters
        )
    except NotFoundError:
        return {}
    prefix = topology.dead_letter("")
    return {
        subject.removeprefix(prefix): int(count)
        for subject, count in (info.state.subjects or {}).items()
    }


@dataclass(frozen=True)
class StoredLetter:
    """A dead letter and where it is stored."""

    sequence: int
    letter: DeadLetter


async def list_dead_letters(
    nc: Client, topology: Topology, limit: int = 1_000
) -> list[StoredLetter]:
    """The dead letters in the stream, oldest first."""
    js = nc.jetstream()
    try:
        info = await js.stream_info(topology.dead_letter_stream.name)
    except NotFoundError:
        return []
    total = int(info.state.messages or 0)
    if total == 0:
        return []
    sub = await js.subscribe(
        topology.dead_letters,
        ordered_consumer=True,
        config=ConsumerConfig(deliver_policy=DeliverPolicy.ALL),
    )
    out: list[StoredLetter] = []
    try:
        while len(out) < min(total, limit):
            try:
                msg = await sub.next_msg(timeout=5)
            except TimeoutError:
                break
            with contextlib.suppress(ValidationError):
                out.append(
                    StoredLetter(
                        int(msg.metadata.sequence.stream), DeadLetter.model_validate_json(msg.data)
                    )
                )
    finally:
        await sub.unsubscribe()
    return out


class ReplayError(Exception):
    """A dead letter that cannot be replayed as it was."""


async def replay(nc: Client, topology: Topology, stored: StoredLetter) -> None:
    """Publish the original message again on its subject, then remove the dead letter."""
    letter = stored.letter
    body = letter.original.encode("utf-8")
    if letter.original_size > ORIGINAL_LIMIT or len(body) != letter.original_size:
        raise ReplayError(
            f"dead letter {stored.sequence} holds only part of its message "
            f"({letter.original_size} bytes): it cannot be replayed as it was"
        )
    js = nc.jetstream()
    await js.publish(letter.subject, body, headers={"content-type": "application/json"})
    await js.delete_msg(topology.dead_letter_stream.name, stored.sequence)
