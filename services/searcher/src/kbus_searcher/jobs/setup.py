"""One-shot set-up: streams, key-value buckets and the index's settings.

``python -m kbus_searcher.jobs.setup`` runs with rights the services need not have (creating streams
and collections), so that services can run with ``KBUS_DECLARE_STREAMS=false`` and
least-privilege NATS users. It is idempotent. Weaviate collections are made per embedding model
by the indexer when that model's first vectors arrive (``KBUS_WEAVIATE_COLLECTION`` is the alias
searches read).

Nothing is made per tenant: every store is shared, each tenant's use of it bounded by its budget
(kbus_runtime.budgets). ``--remove-tenant T`` removes everything a removed tenant left: its large
texts, its keys in every bucket kept by tenant (versions, deletions, newest publishes, syncs,
profiles) and its Weaviate tenant in every collection (its chunks, shard and files).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re

from kbus_contract.buckets import scope_key
from kbus_contract.identifiers import TENANT_PATTERN
from kbus_contract.topology import Topology
from kbus_runtime.bus import connect_nats
from kbus_runtime.declaring import declare_streams, open_bucket
from kbus_runtime.logs import configure_logging
from kbus_runtime.store import weaviate_client
from nats.js import JetStreamContext

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
            await _remove_from_bus(js, topology, tenant)
    finally:
        await nc.close()
    client = weaviate_client(settings.store)
    await client.connect()
    try:
        collections = ChunkStore.configured(client, settings).collections
        await collections.ensure()
        for tenant in removed or ():
            held = await collections.remove_tenant(tenant)
            log.info("tenant %s: removed from collections %s", tenant, ", ".join(held) or "none")
    finally:
        await client.close()
    log.info("streams, buckets and collection %s are ready", settings.store.collection)


async def _remove_from_bus(js: JetStreamContext, topology: Topology, tenant: str) -> None:
    """A removed tenant's large texts and its keys in every bucket kept by tenant."""
    await js.purge_stream(topology.bodies_stream.name, subject=topology.bodies_of(tenant))
    for bucket, key in tenant_keys(topology, tenant):
        for subject in (f"$KV.{bucket}.{key}", f"$KV.{bucket}.{key}.>"):
            await js.purge_stream(f"KV_{bucket}", subject=subject)
    log.info("tenant %s: its large texts and bucket keys removed", tenant)


def tenant_keys(topology: Topology, tenant: str) -> list[tuple[str, str]]:
    """Each bucket kept by tenant, and the key under which the tenant's keys all lie."""
    by_scope = (
        topology.tombstones_bucket,
        topology.published_bucket,
        topology.versions_bucket,
        topology.sync_marks_bucket,
        topology.sync_lists_bucket,
    )
    return [(b, scope_key(tenant)) for b in by_scope] + [(topology.profiles_bucket, tenant)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m kbus_searcher.jobs.setup", description=__doc__)
    parser.add_argument(
        "--remove-tenant", action="append", default=[], help="a removed tenant (repeat)"
    )
    args = parser.parse_args(argv)
    for tenant in args.remove_tenant:  # a key prefix and a subject filter: never a wildcard
        if not re.fullmatch(TENANT_PATTERN, tenant):
            parser.error(f"--remove-tenant {tenant!r} is not a tenant id ({TENANT_PATTERN})")
    settings = SearcherSettings()
    configure_logging(settings.process.log_level)
    asyncio.run(setup(settings, args.remove_tenant))


if __name__ == "__main__":
    main()
