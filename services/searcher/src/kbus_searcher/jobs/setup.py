"""One-shot set-up: streams, key-value buckets, each tenant's store and the index's settings.

``python -m kbus_searcher.jobs.setup`` runs with rights the services need not have (creating streams
and collections), so that services can run with ``KBUS_DECLARE_STREAMS=false`` and
least-privilege NATS users. It is idempotent. Weaviate collections are made per embedding model
by the indexer when that model's first vectors arrive (``KBUS_WEAVIATE_COLLECTION`` is the alias
searches read).

``--tenant T`` (or ``--tenants-file``, one per line, as ``python -m kbus_dev nats-auth``
writes it) provisions what a tenant's credential needs before it is handed out: its store of
large texts, with kbus's fixed configuration (a tenant's credential cannot create or change
it). ``--remove-tenant T`` deletes that store.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
from pathlib import Path

from kbus_contract.claimcheck import open_bodies
from kbus_runtime.bus import connect_nats
from kbus_runtime.declaring import declare_streams, open_bucket
from kbus_runtime.logs import configure_logging
from kbus_runtime.store import weaviate_client
from nats.js.errors import NotFoundError

from kbus_searcher.settings import SearcherSettings
from kbus_searcher.store import ChunkStore

log = logging.getLogger("kbus.setup")


async def setup(
    settings: SearcherSettings, tenants: list[str] | None = None, removed: list[str] | None = None
) -> None:
    """Declare everything kbus needs on NATS and in Weaviate, and each tenant's store."""
    bus = settings.bus.model_copy(update={"declare_streams": True})
    topology = bus.topology
    nc = await connect_nats(bus)
    try:
        js = nc.jetstream()
        await declare_streams(js, topology)
        for bucket in topology.buckets:
            await open_bucket(js, bucket, create=True)
        for tenant in tenants or ():
            await open_bodies(js, topology, tenant, create=True)
            log.info("tenant %s: store of large texts %s", tenant, topology.bodies_bucket(tenant))
        for tenant in removed or ():
            with contextlib.suppress(NotFoundError):
                await js.delete_object_store(topology.bodies_bucket(tenant))
            log.info("tenant %s: store of large texts removed", tenant)
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
    parser.add_argument("--tenant", action="append", default=[], help="provision (repeat)")
    parser.add_argument("--tenants-file", type=Path, help="tenants to provision, one per line")
    parser.add_argument("--remove-tenant", action="append", default=[], help="remove (repeat)")
    args = parser.parse_args(argv)
    tenants = list(args.tenant)
    settings = SearcherSettings()
    configure_logging(settings.log_level)
    if args.tenants_file and args.tenants_file.is_file():
        tenants += [line.strip() for line in args.tenants_file.read_text().splitlines()]
    elif args.tenants_file:
        log.warning("no tenants file at %s: no tenant provisioned", args.tenants_file)
    asyncio.run(setup(settings, [t for t in tenants if t], args.remove_tenant))


if __name__ == "__main__":
    main()
