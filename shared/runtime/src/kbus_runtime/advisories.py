"""Dead letters for what the server gave up on: messages that reached max deliveries unsettled.

A stage dead-letters a message itself when a delivery fails for the last time. When no delivery
ever settles (the worker is killed by the message, or hangs past every ack wait), the server
gives up instead and publishes a max-deliveries advisory. The advisories stream keeps those, and
this handler turns each into a dead letter and removes the message from its work queue.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable

from faststream.nats.message import NatsMessage
from kbus_contract import MaxDeliveriesAdvisory
from kbus_contract.errors import ErrorCode
from kbus_contract.topology import Topology
from nats.js.errors import NotFoundError

from kbus_runtime.stage import Stage

log = logging.getLogger("kbus")


def stage_of(topology: Topology, consumer: str) -> str:
    """The stage that owns a consumer: a stage's durable or one of its tenants' lanes (the
    deleter and the syncer are part of the indexer)."""
    durable = consumer.split("_", 1)[0]
    indexing = (topology.deleter_durable, topology.syncer_durable)
    return "indexer" if durable in indexing else durable


#: What a stage does with a message the server gave up on, before it leaves its work queue
#: (the indexer takes out what it may have written): its subject and body.
GivenUp = Callable[[str, bytes], Awaitable[None]]


class MaxDeliveries:
    """Consumes the advisories stream through its own durable consumer."""

    def __init__(self, stage: Stage, given_up: GivenUp | None = None) -> None:
        self.stage = stage
        self.given_up = given_up

    async def handle(self, message: NatsMessage) -> None:
        """Settle one advisory."""
        await self.stage.settle(message, MaxDeliveriesAdvisory, self.dead_letter)

    async def dead_letter(self, advisory: MaxDeliveriesAdvisory) -> None:
        """Record the message the advisory names, then take it off its work queue."""
        topology = self.stage.topology
        if advisory.stream not in {s.name for s in topology.work_streams}:
            return
        js = self.stage.broker.connection.jetstream()
        try:
            raw = await js.get_msg(advisory.stream, advisory.stream_seq)
        except NotFoundError:
            return  # settled after all (a late ack, or the stage dead-lettered it itself)
        stage = stage_of(topology, advisory.consumer)
        await self.stage.record_dead_letter(
            stage=stage,
            code=ErrorCode.MAX_DELIVERIES,
            reason=(
                f"the server gave up after {advisory.deliveries} deliveries that were never "
                f"settled (the {stage} crashed or hung on this message each time)"
            ),
            subject=raw.subject or "",
            sequence=advisory.stream_seq,
            deliveries=advisory.deliveries,
            body=raw.data or b"",
        )
        if self.given_up is not None:
            await self.given_up(raw.subject or "", raw.data or b"")
        with contextlib.suppress(NotFoundError):
            await js.delete_msg(advisory.stream, advisory.stream_seq)
        log.warning(
            "dead-lettered %s/%d after max deliveries", advisory.stream, advisory.stream_seq
        )
