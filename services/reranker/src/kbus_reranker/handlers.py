"""Subscriptions of the reranker: thin; the work is in :mod:`kbus_reranker.reranking`."""

from __future__ import annotations

from faststream import AckPolicy
from faststream.nats import NatsBroker
from kbus_shared.bus import BusMessage
from kbus_shared.contracts import ErrorReply, RerankReply
from kbus_shared.topology import Topology

from kbus_reranker.reranking import Reranker


def register(
    broker: NatsBroker, topology: Topology, reranker: Reranker, concurrency: int = 1
) -> None:
    """Answer ``kb.rerank`` in a queue group, ``concurrency`` requests at once."""

    @broker.subscriber(
        topology.rerank,
        queue=topology.rerank_queue,
        ack_policy=AckPolicy.MANUAL,
        max_workers=concurrency,
        title="reranker:kb.rerank",
        description="Request-reply: RerankRequest in, RerankReply or ErrorReply out.",
    )
    async def on_rerank(message: BusMessage) -> RerankReply | ErrorReply:
        return await reranker.handle(message)
