"""Subjects, streams and consumers: the one place the bus's shape is declared.

Every name can carry a prefix so that several kbus installations (or test runs) share one NATS
server without seeing each other's messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from faststream.nats import JStream
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DiscardPolicy,
    RetentionPolicy,
    StorageType,
)

DAY = 24 * 60 * 60.0
DEDUPE_WINDOW_S = 2 * 60.0


@dataclass(frozen=True)
class Topology:
    """Names on the bus for one kbus installation."""

    prefix: str = ""
    #: Bytes each work stream may hold; JetStream reserves this much storage per stream.
    stream_max_bytes: int = 1024**3
    #: Copies of each stream in a NATS cluster (3 in production).
    replicas: int = 1
    #: Whether services create and update streams; False where a setup job owns them.
    #: (Streams are declared by ``kbus_shared.bus.declare_streams`` before any subscriber
    #: starts, so FastStream is told never to declare them a second time.)
    declare: bool = True
    #: Prefix of this connection's reply and pull inboxes (per user under NATS permissions).
    inbox_prefix: str = "_INBOX"

    @property
    def pull_inbox(self) -> bytes:
        """The inbox prefix pull consumers fetch on (FastStream wants bytes with a dot)."""
        return f"{self.inbox_prefix}.".encode()

    def _subject(self, name: str) -> str:
        return f"{self.prefix}.{name}" if self.prefix else name

    def _stream(self, name: str) -> str:
        stem = f"{self.prefix}_{name}" if self.prefix else f"KBUS_{name}"
        return stem.upper().replace(".", "_").replace("-", "_")

    # -- subjects ------------------------------------------------------------------------------

    @property
    def document_added(self) -> str:
        return self._subject("document.added")

    @property
    def document_deleted(self) -> str:
        return self._subject("document.deleted")

    @property
    def document_removed(self) -> str:
        return self._subject("document.removed")

    @property
    def document_indexed(self) -> str:
        return self._subject("document.indexed")

    @property
    def document_failed(self) -> str:
        return self._subject("document.failed")

    @property
    def chunks_ready(self) -> str:
        return self._subject("chunks.ready")

    @property
    def embeddings_ready(self) -> str:
        return self._subject("embeddings.ready")

    def dead_letter(self, stage: str) -> str:
        return self._subject(f"deadletter.{stage}")

    @property
    def dead_letters(self) -> str:
        return self._subject("deadletter.>")

    @property
    def search(self) -> str:
        return self._subject("kb.search")

    @property
    def stats(self) -> str:
        return self._subject("kb.stats")

    @property
    def embed(self) -> str:
        return self._subject("kb.embed")

    @property
    def rerank(self) -> str:
        return self._subject("kb.rerank")

    # -- durable consumers (shared names: N replicas split the work) ---------------------------

    ingestor_durable = "ingestor"
    deleter_durable = "deleter"
    embedder_durable = "embedder"
    indexer_durable = "indexer"

    # -- queue groups for request-reply --------------------------------------------------------

    search_queue = "searcher"
    embed_queue = "embedder"
    rerank_queue = "reranker"

    # -- streams -------------------------------------------------------------------------------

    @cached_property
    def documents_stream(self) -> JStream:
        return self._work_stream("documents", [self.document_added, self.document_deleted])

    @cached_property
    def chunks_stream(self) -> JStream:
        return self._work_stream("chunks", [self.chunks_ready])

    @cached_property
    def embeddings_stream(self) -> JStream:
        return self._work_stream("embeddings", [self.embeddings_ready])

    @cached_property
    def receipts_stream(self) -> JStream:
        return JStream(
            self._stream("receipts"),
            num_replicas=self.replicas,
            declare=False,
            subjects=[self.document_indexed, self.document_removed, self.document_failed],
            retention=RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            max_age=7 * DAY,
            max_bytes=self.stream_max_bytes,
            discard=DiscardPolicy.OLD,
            duplicate_window=DEDUPE_WINDOW_S,
        )

    @cached_property
    def dead_letter_stream(self) -> JStream:
        return JStream(
            self._stream("deadletter"),
            num_replicas=self.replicas,
            declare=False,
            subjects=[self.dead_letters],
            retention=RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            max_age=30 * DAY,
            # Dead letters are the record of what failed: refuse new ones rather than drop old ones.
            discard=DiscardPolicy.NEW,
            max_bytes=self.stream_max_bytes,
        )

    def _work_stream(self, name: str, subjects: list[str]) -> JStream:
        # Work queues: a message lives until a consumer acks it. With DiscardPolicy.NEW a full
        # stream refuses the publish (the publisher sees an error) instead of evicting work.
        return JStream(
            self._stream(name),
            num_replicas=self.replicas,
            declare=False,
            subjects=subjects,
            retention=RetentionPolicy.WORK_QUEUE,
            storage=StorageType.FILE,
            discard=DiscardPolicy.NEW,
            max_bytes=self.stream_max_bytes,
            max_msgs=10_000_000,
            duplicate_window=DEDUPE_WINDOW_S,
        )

    @property
    def embed_cache_bucket(self) -> str:
        """KV bucket of vectors by model and text hash: unchanged text is never embedded twice."""
        return self._stream("embedcache")

    @property
    def tombstones_bucket(self) -> str:
        """KV bucket of deletions: tombstone key to the stream sequence of the delete."""
        return self._stream("tombstones")

    @property
    def streams(self) -> tuple[JStream, ...]:
        return (
            self.documents_stream,
            self.chunks_stream,
            self.embeddings_stream,
            self.receipts_stream,
            self.dead_letter_stream,
        )


MAX_DELIVER = 10


def work_consumer(durable: str, *, ack_wait_s: float = 60.0) -> ConsumerConfig:
    """The durable pull consumer of one pipeline stage; replicas bind to the same name."""
    return ConsumerConfig(
        durable_name=durable,
        ack_policy=AckPolicy.EXPLICIT,
        ack_wait=ack_wait_s,
        max_deliver=MAX_DELIVER,
        max_ack_pending=1_000,
    )
