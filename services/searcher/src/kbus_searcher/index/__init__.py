"""Indexing: embeddings.ready into the store, deletions, and a sync's reconciliation."""
