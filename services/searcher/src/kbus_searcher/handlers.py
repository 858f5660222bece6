"""Subscriptions and endpoints of the searcher: thin; the work is in ``indexing`` and
``searching``."""

from __future__ import annotations

from dataclasses import dataclass

from kbus_runtime.advisories import MaxDeliveries
from kbus_runtime.answering import Priced
from kbus_runtime.service import Service

from kbus_searcher.index.deleting import Deleter
from kbus_searcher.index.indexer import Indexer
from kbus_searcher.index.reconciling import Reconciler
from kbus_searcher.search.feed import Feed
from kbus_searcher.search.rewriting import rewriter_state
from kbus_searcher.search.searching import Searcher
from kbus_searcher.settings import SearcherSettings


@dataclass(frozen=True)
class Indexing:
    """What an indexing process runs: each on its stage's consumer."""

    indexer: Indexer
    deleter: Deleter
    reconciler: Reconciler
    advisories: MaxDeliveries


def register(
    service: Service,
    settings: SearcherSettings,
    indexing: Indexing | None,
    searcher: Searcher | None,
    feed: Feed | None = None,
) -> None:
    """The indexing consumers and ``kb.search`` / ``kb.stats`` / ``kb.feed``, each where this
    process runs them (``KBUS_SEARCHER_INDEX``, ``KBUS_SEARCHER_SERVE``)."""
    if indexing is not None:
        _register_indexing(service, indexing, settings)
    if searcher is not None and feed is not None:
        service.answer(
            {
                "kb.search": Priced(searcher.answer_search, searcher.price),
                "kb.stats": searcher.answer_stats,
                "kb.backlog": searcher.answer_backlog,
                "kb.versions": searcher.answer_versions,
                "kb.feed": feed.answer,
                "kb.chat.searcher": lambda _: rewriter_state(searcher.rewriter),
            },
            description="kbus knowledge base: hybrid search, library statistics, receipts",
            concurrency=settings.search_concurrency,
            work_in_flight=searcher.quotas.in_flight,
        )


def _register_indexing(service: Service, indexing: Indexing, settings: SearcherSettings) -> None:
    """``embeddings.ready`` (``concurrency`` at once), deletions, syncs and max-deliveries
    advisories, each as its stage in ``Topology.stages`` (a fair stage's tenants' lanes by turn,
    the others' durable pull consumer)."""
    service.consume(
        "indexer",
        indexing.indexer.handle,
        concurrency=settings.index_concurrency,
        description="Upsert a document's embedded chunks into Weaviate; publish document.indexed.",
    )

    service.consume(
        "deleter",
        indexing.deleter.handle,
        description="Delete a document, library or tenant; publish document.removed.",
    )

    service.consume(
        "syncer",
        indexing.reconciler.handle,
        concurrency=settings.sync_concurrency,
        description="Delete what a source no longer lists, wait for what it lists; publish "
        "document.reconciled.",
    )

    service.consume(
        "deadletterer",
        indexing.advisories.handle,
        description="Dead-letter each message the server gave up on, and remove it from its "
        "work queue.",
    )
