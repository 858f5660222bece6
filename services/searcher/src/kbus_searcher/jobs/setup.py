"""One-shot set-up: streams, key-value buckets and the index's settings.

``python -m kbus_searcher.jobs.setup`` runs with rights the services need not have (creating streams
and collections), so that services can run with ``KBUS_DECLARE_STREAMS=false`` and
least-privilege NATS users. It is idempotent. Weaviate collections are made per embedding model
by the indexer when that model's first vectors arrive (``KBUS_WEAVIATE_COLLECTION`` is the alias
searches read).

Nothing is made per tenant: every store is shared, each tenant's use of it bounded by its budget
(kbus_runtime.budgets). ``--remove-tenant T`` removes what a removed tenant left in the store of
large texts (its documents in Weaviate go with a deletion of the tenant: ``kbus delete
--tenant``).
"""

from __future__ import annotations

import argparse
import asyncio
import logging

from kbus_runtime.bus import connect_nats
from kbus_runtime.declaring import declare_streams, open_bucket
from kbus_runtime.logs import configure_logging
from kbus_runtime.store import weaviate_client

from kbus_searcher.settings import SearcherSettings
from kbus_searcher.store import ChunkStore

log = logging.getLogger("kbus.setup")


async def setup(settings: SearcherSettings, removed: list[str] | None = None) -> None:
    """Declare everything kbus needs on NATS and in Weaviate; remove what removed tenants left
    in the store of large texts."""
    bus = settings.bus.model_copy(update={"declare_streams": True})
    topology = bus.topology
    nc = await connect_nats(bus)
    try:
        js = nc.jetstream()
        await declare_streams(js, topology)
        for bucket in topology.buckets:
            await open_bucket(js, bucket, create=True)
        for tenant in removed or ():
            await js.purge_stream(topology.bodies_stream.name, subject=topology.bodies_of(tenant))
            log.info("tenant %s: its large texts removed", tenant)
    finally:
        await nc.close()
    client = weaviate_client(settings.store)
    await client.connect()
    try:
        await ChunkStore.configured(client, settings).collections.ensure()
    finally:
        await client.close()
    log.info("streams, buckets and collection %s are ready", settings.store.collection)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m kbus_searcher.jobs.setup", description=__doc__)
    parser.add_argument(
        "--remove-tenant", action="append", default=[], help="a removed tenant (repeat)"
    )
    args = parser.parse_args(argv)
    settings = SearcherSettings()
    configure_logging(settings.process.log_level)
    asyncio.run(setup(settings, args.remove_tenant))


if __name__ == "__main__":
    main()
