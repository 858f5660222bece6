"""``kbus_dev down`` stops what ``up`` started: services and stage replicas before the servers."""

from __future__ import annotations

from kbus_dev.stack import stop_order


def test_stage_replicas_stop_before_weaviate_and_nats() -> None:
    started = ["nats-1", "weaviate-2", "ingestor-1", "query-2", "indexer-1", "llm", "embedder"]
    order = stop_order(started)
    assert order[-3:] == ["llm", "weaviate-2", "nats-1"]
    assert set(order[:4]) == {"ingestor-1", "query-2", "indexer-1", "embedder"}
