"""What the searcher's roles share beside the index, kept in NATS buckets and followed: the
searchable version of each document (:mod:`.versions`), deletions (:mod:`.tombstones`), a
sync's marks (:mod:`.syncmarks`), libraries' profiles (:mod:`.profiles`), and the tenants'
search rate and stored chunks (:mod:`.quotas`). Below the search and the indexer, above the
store."""
