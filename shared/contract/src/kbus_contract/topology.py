"""Subjects, streams and consumers: the one place the bus's shape is declared.

Every name can carry a prefix so that several kbus installations (or test runs) share one NATS
server without seeing each other's messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DiscardPolicy,
    KeyValueConfig,
    ObjectStoreConfig,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)

DAY = 24 * 60 * 60.0
DEDUPE_WINDOW_S = 2 * 60.0


@dataclass(frozen=True)
class Stream:
    """One stream: its name, and the configuration kbus declares it with."""

    name: str
    config: StreamConfig

    @property
    def subjects(self) -> list[str]:
        return list(self.config.subjects or ())


def _declared(name: str, **config: Any) -> Stream:
    return Stream(name, StreamConfig(name=name, **config))


@dataclass(frozen=True)
class Topology:
    """Names on the bus for one kbus installation."""

    prefix: str = ""
    #: Bytes each work stream may hold; JetStream reserves this much storage per stream.
    stream_max_bytes: int = 1024**3
    #: Copies of each stream in a NATS cluster (3 in production).
    replicas: int = 1
    #: Whether services create and update streams; False where a setup job owns them.
    declare: bool = True
    #: Prefix of this connection's reply and pull inboxes (per user under NATS permissions).
    inbox_prefix: str = "_INBOX"
    #: Seconds a consumer waits for an ack before redelivering (handlers send in-progress acks).
    ack_wait_s: float = 60.0
    #: Fault injection for the chaos test's negative control only: ack every message before
    #: processing it, so a crash loses it. Never set this in a real installation.
    unsafe_ack_first: bool = False
    #: Deliveries of a message before it is dead-lettered.
    max_deliver: int = 10

    @property
    def pull_inbox(self) -> bytes:
        """The inbox prefix pull consumers fetch on (FastStream wants bytes with a dot)."""
        return f"{self.inbox_prefix}.".encode()

    def _subject(self, name: str) -> str:
        return f"{self.prefix}.{name}" if self.prefix else name

    def _name(self, name: str) -> str:
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
    #: Dead-letters what the server gave up on (the max-deliveries advisories).
    advisory_durable = "deadletterer"

    # -- streams -------------------------------------------------------------------------------

    @cached_property
    def documents_stream(self) -> Stream:
        return self._work_stream("documents", [self.document_added, self.document_deleted])

    @cached_property
    def chunks_stream(self) -> Stream:
        return self._work_stream("chunks", [self.chunks_ready])

    @cached_property
    def embeddings_stream(self) -> Stream:
        return self._work_stream("embeddings", [self.embeddings_ready])

    @cached_property
    def receipts_stream(self) -> Stream:
        return _declared(
            self._name("receipts"),
            num_replicas=self.replicas,
            subjects=[self.document_indexed, self.document_removed, self.document_failed],
            retention=RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            max_age=7 * DAY,
            max_bytes=self.stream_max_bytes,
            discard=DiscardPolicy.OLD,
            duplicate_window=DEDUPE_WINDOW_S,
        )

    @cached_property
    def dead_letter_stream(self) -> Stream:
        return _declared(
            self._name("deadletter"),
            num_replicas=self.replicas,
            subjects=[self.dead_letters],
            retention=RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            max_age=30 * DAY,
            # Dead letters are the record of what failed: refuse new ones rather than drop old ones.
            discard=DiscardPolicy.NEW,
            max_bytes=self.stream_max_bytes,
        )

    @property
    def work_streams(self) -> tuple[Stream, ...]:
        return (self.documents_stream, self.chunks_stream, self.embeddings_stream)

    def max_deliveries_advisory(self, stream: str) -> str:
        """The server's advisory when a consumer of ``stream`` reaches its max deliveries."""
        return f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{stream}.*"

    @property
    def max_deliveries_advisories(self) -> str:
        """What the dead-letterer reads from the advisories stream (only this installation's)."""
        return "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.>"

    @cached_property
    def advisories_stream(self) -> Stream:
        # The server publishes each advisory once, whether or not anyone listens: a stream
        # keeps it until the dead-letterer has handled it, even if that was down at the time.
        return _declared(
            self._name("advisories"),
            num_replicas=self.replicas,
            subjects=[self.max_deliveries_advisory(s.name) for s in self.work_streams],
            retention=RetentionPolicy.WORK_QUEUE,
            storage=StorageType.FILE,
            max_age=30 * DAY,
            discard=DiscardPolicy.NEW,
            max_bytes=min(self.stream_max_bytes, 64 * 1024**2),
        )

    def _work_stream(self, name: str, subjects: list[str]) -> Stream:
        # Work queues: a message lives until a consumer acks it. With DiscardPolicy.NEW a full
        # stream refuses the publish (the publisher sees an error) instead of evicting work.
        return _declared(
            self._name(name),
            num_replicas=self.replicas,
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
        return self._name("embedcache")

    @property
    def tombstones_bucket(self) -> str:
        """KV bucket of deletions: tombstone key to the stream sequence of the delete."""
        return self._name("tombstones")

    @property
    def versions_bucket(self) -> str:
        """KV bucket of each document's searchable version (the newest complete one)."""
        return self._name("versions")

    @property
    def bodies_bucket(self) -> str:
        """Object store of large documents' text (the claim check)."""
        return self._name("bodies")

    @property
    def bodies_store(self) -> ObjectStoreConfig:
        # Objects are removed once ingested; the TTL only bounds what a crash leaves behind.
        return ObjectStoreConfig(
            bucket=self.bodies_bucket,
            description="kbus: text of documents larger than one message",
            ttl=7 * DAY,
            max_bytes=self.stream_max_bytes,
            storage=StorageType.FILE,
            replicas=self.replicas,
        )

    def bucket(
        self, name: str, description: str, max_bytes: int | None = None, *, direct: bool = False
    ) -> KeyValueConfig:
        """The configuration of one of kbus's key-value buckets (file storage, one value).

        ``direct``: any replica answers reads, without the JetStream API, and many keys can be
        read in one request. Only for a bucket whose values never change: a replica may lag.
        """
        return KeyValueConfig(
            bucket=name,
            history=1,
            storage=StorageType.FILE,
            replicas=self.replicas,
            max_bytes=max_bytes if max_bytes is not None else self.stream_max_bytes,
            description=description,
            direct=direct,
        )

    @property
    def tombstones_kv(self) -> KeyValueConfig:
        return self.bucket(self.tombstones_bucket, "kbus deletions: scope to stream sequence")

    @property
    def versions_kv(self) -> KeyValueConfig:
        return self.bucket(self.versions_bucket, "kbus searchable version of each document")

    @property
    def embed_cache_kv(self) -> KeyValueConfig:
        return self.bucket(
            self.embed_cache_bucket, "kbus vectors by sha256(model, text)", direct=True
        )

    @property
    def buckets(self) -> tuple[KeyValueConfig, ...]:
        """Every bucket, as the set-up job creates them."""
        return (self.tombstones_kv, self.versions_kv, self.embed_cache_kv)

    @property
    def streams(self) -> tuple[Stream, ...]:
        return (
            self.documents_stream,
            self.chunks_stream,
            self.embeddings_stream,
            self.receipts_stream,
            self.dead_letter_stream,
            self.advisories_stream,
        )


def work_consumer(
    durable: str, *, ack_wait_s: float = 60.0, max_deliver: int = 10
) -> ConsumerConfig:
    """The durable pull consumer of one pipeline stage; replicas bind to the same name."""
    return ConsumerConfig(
        durable_name=durable,
        ack_policy=AckPolicy.EXPLICIT,
        ack_wait=ack_wait_s,
        max_deliver=max_deliver,
        max_ack_pending=1_000,
    )
