"""Subscriptions of the ingestor: thin, everything happens in :mod:`kbus_ingestor.ingesting`."""

from __future__ import annotations

from faststream.nats import NatsBroker
from kbus_shared.bus import BusMessage, work_subscriber
from kbus_shared.topology import Topology

from kbus_ingestor.ingesting import Ingestor


def register(broker: NatsBroker, topology: Topology, ingestor: Ingestor) -> None:
    """Consume ``document.added`` through the shared durable pull consumer."""

    @work_subscriber(
        broker,
        topology,
        topology.document_added,
        topology.documents_stream,
        topology.ingestor_durable,
        max_workers=16,
        title="ingestor:document.added",
        description="Validate and chunk a document; publish its chunks on chunks.ready.",
    )
    async def on_document_added(message: BusMessage) -> None:
        await ingestor.handle(message)
