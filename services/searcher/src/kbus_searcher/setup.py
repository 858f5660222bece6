"""One-shot set-up: streams, key-value buckets and the index's settings.

``python -m kbus_searcher.setup`` runs with rights the services need not have (creating streams
and collections), so that services can run with ``KBUS_DECLARE_STREAMS=false`` and
least-privilege NATS users. It is idempotent. Weaviate collections are made per embedding model
by the indexer when that model's first vectors arrive (``KBUS_WEAVIATE_COLLECTION`` is the alias
searches read).
"""

from __future__ import annotations

import asyncio
import logging

from kbus_runtime.bus import connect_nats
from kbus_runtime.declaring import declare_streams, open_bucket
from kbus_runtime.logs import configure_logging
from kbus_runtime.store import weaviate_client

from kbus_searcher.settings import SearcherSettings
from kbus_searcher.store import ChunkStore

log = logging.getLogger("kbus.setup")


async def setup(settings: SearcherSettings) -> None:
    """Declare everything kbus needs on NATS and in Weaviate."""
    bus = settings.bus.model_copy(update={"declare_streams": True})
    topology = bus.topology
    nc = await connect_nats(bus)
    try:
        js = nc.jetstream()
        await declare_streams(js, topology)
        for bucket in topology.buckets:
            await open_bucket(js, bucket, create=True)
    finally:
        await nc.close()
    client = weaviate_client(settings.store)
    await client.connect()
    try:
        await ChunkStore.configured(client, settings).collections.ensure()
    finally:
        await client.close()
    log.info("streams, buckets and collection %s are ready", settings.store.collection)


def main() -> None:
    settings = SearcherSettings()
    configure_logging(settings.log_level)
    asyncio.run(setup(settings))


if __name__ == "__main__":
    main()
