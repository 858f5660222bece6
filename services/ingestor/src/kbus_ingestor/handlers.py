"""Subscriptions of the ingestor: thin, everything happens in :mod:`kbus_ingestor.ingesting`."""

from __future__ import annotations

from faststream import AckPolicy
from faststream.nats import NatsBroker, PullSub
from faststream.nats.annotations import NatsMessage
from kbus_shared.topology import Topology, work_consumer

from kbus_ingestor.ingesting import Ingestor


def register(broker: NatsBroker, topology: Topology, ingestor: Ingestor) -> None:
    """Consume ``document.added`` through the shared durable pull consumer."""

    @broker.subscriber(
        topology.document_added,
        stream=topology.documents_stream,
        durable=topology.ingestor_durable,
        config=work_consumer(topology.ingestor_durable),
        inbox_prefix=topology.pull_inbox,
        pull_sub=PullSub(batch_size=16, timeout=1.0),
        ack_policy=AckPolicy.MANUAL,
        title="ingestor:document.added",
        description="Validate and chunk a document; publish its chunks on chunks.ready.",
    )
    async def on_document_added(message: NatsMessage) -> None:
        await ingestor.handle(message)
