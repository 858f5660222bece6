"""The store's replication settings become each new collection's configuration and the
consistency level of its writes and reads."""

from __future__ import annotations

from kbus_runtime.settings import StoreSettings
from kbus_searcher.settings import SearcherSettings
from kbus_searcher.store import ChunkStore
from weaviate.classes.config import ConsistencyLevel, ReplicationDeletionStrategy


def test_replication_settings_become_the_collections_config_and_levels() -> None:
    settings = SearcherSettings(
        store=StoreSettings(replication_factor=3, write_consistency="ALL", read_consistency="ONE")
    )
    store = ChunkStore.configured(None, settings)  # type: ignore[arg-type]  # nothing connects
    replication = store.collections.replication
    config = replication.config()
    assert config.factor == 3
    assert config.deletionStrategy is ReplicationDeletionStrategy.DELETE_ON_CONFLICT
    assert replication.level(write=True) is ConsistencyLevel.ALL
    assert replication.level(write=False) is ConsistencyLevel.ONE
