"""Subscriptions and endpoints of the searcher: thin; the work is in ``indexing`` and
``searching``."""

from __future__ import annotations

from kbus_runtime.advisories import MaxDeliveries
from kbus_runtime.bus import BusMessage
from kbus_runtime.service import Service

from kbus_searcher.index.indexer import Indexer
from kbus_searcher.index.reconciling import Reconciler
from kbus_searcher.search.feed import Feed
from kbus_searcher.search.searching import Searcher
from kbus_searcher.settings import SearcherSettings


def register(
    service: Service,
    settings: SearcherSettings,
    indexing: tuple[Indexer, Reconciler, MaxDeliveries] | None,
    searcher: Searcher | None,
    feed: Feed | None = None,
) -> None:
    """The indexing consumers and ``kb.search`` / ``kb.stats`` / ``kb.feed``, each where this
    process runs them (``KBUS_SEARCHER_INDEX``, ``KBUS_SEARCHER_SERVE``)."""
    if indexing is not None:
        _register_indexing(service, *indexing, settings)
    if searcher is not None and feed is not None:
        service.answer(
            {
                "kb.search": searcher.answer_search,
                "kb.stats": searcher.answer_stats,
                "kb.versions": searcher.answer_versions,
                "kb.feed": feed.answer,
            },
            description="kbus knowledge base: hybrid search, library statistics, receipts",
            concurrency=settings.search_concurrency,
        )


def _register_indexing(
    service: Service,
    indexer: Indexer,
    reconciler: Reconciler,
    advisories: MaxDeliveries,
    settings: SearcherSettings,
) -> None:
    """``embeddings.ready`` (``concurrency`` at once), deletions, syncs and max-deliveries
    advisories, each on its shared durable consumer."""
    topology = service.topology

    @service.consume(
        topology.embeddings_ready,
        topology.embeddings_stream,
        topology.indexer_durable,
        concurrency=settings.index_concurrency,
        title="searcher:embeddings.ready",
        description="Upsert a document's embedded chunks into Weaviate; publish document.indexed.",
    )
    async def on_embeddings_ready(message: BusMessage) -> None:
        await indexer.handle(message)

    @service.consume(
        topology.document_deleted,
        topology.documents_stream,
        topology.deleter_durable,
        title="searcher:document.deleted",
        description="Delete a document, library or tenant; publish document.removed.",
    )
    async def on_document_deleted(message: BusMessage) -> None:
        await indexer.handle_deletion(message)

    @service.consume(
        topology.document_synced,
        topology.documents_stream,
        topology.syncer_durable,
        concurrency=settings.sync_concurrency,
        title="searcher:document.synced",
        description="Delete what a source no longer lists, wait for what it lists; publish "
        "document.reconciled.",
    )
    async def on_document_synced(message: BusMessage) -> None:
        await reconciler.handle(message)

    @service.consume(
        topology.max_deliveries_advisories,
        topology.advisories_stream,
        topology.advisory_durable,
        title="searcher:max-deliveries advisories",
        description="Dead-letter each message the server gave up on, and remove it from its "
        "work queue.",
    )
    async def on_max_deliveries(message: BusMessage) -> None:
        await advisories.handle(message)
