"""The searcher: owns the Weaviate collection, indexes ``embeddings.ready``, answers searches."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from faststream.asgi import AsgiFastStream
from kbus_contract import DocumentRef
from kbus_runtime.advisories import MaxDeliveries
from kbus_runtime.service import Service, StartUp
from kbus_runtime.store import WeaviateNodes
from nats.aio.msg import Msg

from kbus_searcher.handlers import Indexing, register
from kbus_searcher.index.deleting import Deleter
from kbus_searcher.index.indexer import Indexer
from kbus_searcher.index.reconciling import Reconciler
from kbus_searcher.search.feed import Feed
from kbus_searcher.search.rewriting import create_rewriter
from kbus_searcher.search.searching import Searcher
from kbus_searcher.settings import SearcherSettings
from kbus_searcher.state.profiles import LibraryProfiles
from kbus_searcher.state.quotas import Quotas
from kbus_searcher.state.standing import Standing
from kbus_searcher.state.syncmarks import SyncMarks
from kbus_searcher.state.tombstones import Tombstones
from kbus_searcher.state.versions import Versions
from kbus_searcher.store import ChunkStore, Scope
from kbus_searcher.store.collections import IDLE_CHECK_S
from kbus_searcher.store.pressure import Pressure


@dataclass(frozen=True)
class _Parts:
    """What the searcher's roles share: the store, the buckets it follows, the quotas."""

    service: Service
    settings: SearcherSettings
    client: WeaviateNodes
    store: ChunkStore
    quotas: Quotas
    tombstones: Tombstones
    versions: Versions
    profiles: LibraryProfiles
    syncs: SyncMarks


def store_count(store: ChunkStore) -> Callable[[str], Awaitable[int]]:
    """A tenant's stored chunks, for its quota: kbus's own count of every document."""

    async def count(tenant: str) -> int:
        scope = Scope.whole(tenant, None, "a tenant's stored chunks against its budget")
        return await store.view(scope).count_chunks()

    return count


def _indexing(parts: _Parts) -> Indexing | None:
    """The indexing consumer, the syncs, and the dead-letterer of what they gave up on
    (``INDEX``)."""
    if not parts.settings.index:
        return None
    service, settings = parts.service, parts.settings
    stage = service.stage("indexer")

    async def wanted(doc: DocumentRef) -> bool:
        return await stage.wanted(doc.tenant, doc.library, doc.document_id, doc.sequence)

    indexer = Indexer(
        stage,
        parts.store.writes,
        Standing(parts.tombstones, parts.versions, parts.syncs, wanted),
        service.registry,
        max_batch=settings.index_batch_chunks,
        linger_s=settings.index_linger_ms / 1000,
        quotas=parts.quotas,
        weights=settings.bus.tenant_weights,
    )
    deleter = Deleter(service.stage("deleter"), parts.store.writes, parts.tombstones)
    reconciler = Reconciler(
        service.stage("syncer"),
        parts.store,
        deleter,
        parts.versions,
        parts.syncs,
        settings.sync_settle_max_s,
    )
    advisories = MaxDeliveries(service.stage("deadletterer"), indexer.given_up)
    return Indexing(indexer, deleter, reconciler, advisories)


def _searcher(parts: _Parts) -> Searcher | None:
    """The search path (``SERVE``)."""
    if not parts.settings.serve:
        return None
    settings = parts.settings
    return Searcher(
        parts.service.stage(),
        parts.store,
        settings,
        parts.service.registry,
        parts.versions,
        parts.profiles,
        create_rewriter(settings.rewriter, settings.cohere, settings.llm),
        parts.quotas,
    )


def _on_pressure(pressure: Pressure) -> Callable[[Msg], Awaitable[None]]:
    async def said(_: Msg) -> None:
        pressure.said()

    return said


def _lifespan(parts: _Parts) -> StartUp:
    """Connect Weaviate, declare the collection and follow the buckets; undo it at the end."""
    topology, settings = parts.service.topology, parts.settings

    @asynccontextmanager
    async def start_up() -> AsyncIterator[None]:
        resting: asyncio.Task[None] | None = None
        await parts.client.connect()
        try:
            await parts.store.collections.ensure()
            js = parts.service.broker.connection.jetstream()
            await parts.tombstones.open(js, create=topology.declare)
            await parts.versions.open(js, create=topology.declare)
            await parts.tombstones.follow()
            if settings.index:
                await parts.syncs.open(js, create=topology.declare)
                await parts.syncs.follow()
                await parts.service.withdrawals.open(parts.service.broker.connection)
                # Query searchers elsewhere say when they answer searches: writes yield.
                await parts.service.broker.connection.subscribe(
                    topology.subject("search.pressure"),
                    cb=_on_pressure(parts.store.writes.pressure),
                )
            if settings.serve:
                await parts.profiles.open(js, create=topology.declare)
                await parts.versions.follow()
                await parts.profiles.follow()
            resting = asyncio.create_task(_rest_idle(parts, settings.store.idle_tenant_s))
            yield
        finally:
            if resting is not None:
                resting.cancel()
            await parts.profiles.stop()
            await parts.syncs.stop()
            await parts.versions.stop()
            await parts.tombstones.stop()
            await parts.client.close()

    return start_up


async def _rest_idle(parts: _Parts, idle_s: float) -> None:
    """Until cancelled: what this process holds of idle tenants let go (the quotas' after
    seconds), and the Weaviate tenants it used and then left idle for ``idle_s`` made inactive
    (Weaviate closes their files and frees their memory, and makes one active again on its
    next read or write: auto tenant activation); 0: never inactive."""
    while True:
        await asyncio.sleep(min(idle_s or IDLE_CHECK_S, IDLE_CHECK_S))
        parts.quotas.forget_idle()
        if idle_s > 0:
            await parts.store.collections.deactivate_idle(idle_s)


def create_app(settings: SearcherSettings | None = None) -> AsgiFastStream:
    """Build the searcher app; Weaviate is connected in the lifespan, never at import."""
    settings = settings or SearcherSettings()
    service = Service("searcher", settings)
    topology = service.topology
    client = WeaviateNodes(settings.store)
    store = ChunkStore.configured(client, settings)
    parts = _Parts(
        service,
        settings,
        client,
        store,
        Quotas(service.budgets, store_count(store)),
        Tombstones(topology.tombstones_kv),
        Versions(topology.versions_kv),
        LibraryProfiles(topology.profiles_kv),
        SyncMarks(topology.sync_marks_kv, topology.sync_lists_kv),
    )
    searcher = _searcher(parts)
    feed = Feed(service.stage()) if searcher else None
    register(service, settings, _indexing(parts), searcher, feed)
    return service.app(_lifespan(parts))
