"""The Weaviate index of chunks, by role: the schema and the collections behind the alias
(:mod:`.schema`, :mod:`.collections`), the indexer's writes and deletes (:mod:`.writes`), and
reads, only through a view scoped to whom they are for (:mod:`.view`, running the kinds of
search of :mod:`.queries` with the filters of :mod:`.filters`)."""

from __future__ import annotations

from dataclasses import dataclass

from kbus_runtime.store import StoreClient

from kbus_searcher.ordering import DocumentKey
from kbus_searcher.settings import SearcherSettings
from kbus_searcher.store.collections import Collections
from kbus_searcher.store.queries import Candidate, Query
from kbus_searcher.store.schema import Replication
from kbus_searcher.store.view import Scope, StoreView
from kbus_searcher.store.writes import ChunkWriter, doc_key

__all__ = [
    "Candidate",
    "ChunkStore",
    "ChunkWriter",
    "Collections",
    "DocumentKey",
    "Query",
    "Scope",
    "StoreView",
    "doc_key",
]


@dataclass(frozen=True)
class ChunkStore:
    """The index's roles over one client: its collections, its writes, and its reads (a view
    per scope)."""

    collections: Collections
    writes: ChunkWriter

    def view(self, scope: Scope, work: float = 1.0) -> StoreView:
        """The store as ``scope`` may read it, for a request costing ``work``: the only way to
        read chunks."""
        return StoreView(self.collections, scope, self.writes.pressure, work)

    @classmethod
    def create(
        cls,
        client: StoreClient,
        alias: str,
        *,
        flat_search_cutoff: int,
        replication: Replication | None = None,
    ) -> ChunkStore:
        """The index behind ``alias``, creating collections with this flat-search cutoff and
        replication."""
        collections = Collections(
            client, alias, flat_search_cutoff=flat_search_cutoff, replication=replication
        )
        return cls(collections, ChunkWriter(collections))

    @classmethod
    def configured(cls, client: StoreClient, settings: SearcherSettings) -> ChunkStore:
        """The index a searcher's settings name."""
        store = settings.store
        replication = Replication(
            store.replication_factor,
            store.deletion_strategy,
            store.write_consistency,
            store.read_consistency,
        )
        return cls.create(
            client,
            store.collection,
            flat_search_cutoff=settings.flat_search_cutoff,
            replication=replication,
        )
