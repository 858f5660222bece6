"""Indexing: embeddings.ready into the store, versions, tombstones and deletions."""
