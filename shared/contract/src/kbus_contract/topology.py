"""Subjects, streams and consumers: the one place the bus's shape is declared.

Every name can carry a prefix so that several kbus installations (or test runs) share one NATS
server without seeing each other's messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from kbus_contract import storage
from kbus_contract.buckets import Buckets
from kbus_contract.catalog import ACCEPTED
from kbus_contract.lanes import Lane
from kbus_contract.storage import Stream, work_consumer
from kbus_contract.subjects import Subjects
from kbus_contract.work import QUANTUM

__all__ = ["StageConsumer", "Stream", "Topology", "work_consumer"]

_MAX_DELIVERIES = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES"


@dataclass(frozen=True)
class StageConsumer:
    """A pipeline stage's durable consumer: its stage, stream, name and the catalog channel it
    takes; ``fair``: the stage serves tenants in turn, through a consumer per tenant and lane
    (:mod:`kbus_contract.lanes`) named from the durable's."""

    stage: str
    stream: str
    durable: str
    channel: str
    fair: bool = True
    #: The most messages of one tenant the stage holds at once, over every replica (the lane
    #: consumer's max_ack_pending): what keeps one tenant's slow work from taking every worker.
    tenant_in_flight: int = 1_000
    #: The most work (chunks, :mod:`kbus_contract.work`) of one tenant a replica holds at once
    #: (one message more, if that one alone is more): enough to keep the stage busy for a
    #: tenant alone, and no more, so another tenant's message finds a worker and the next turn.
    window: float = 4 * QUANTUM
    #: The channels it publishes a tenant's work on, to the next stage: it takes no more of a
    #: tenant's work while the tenant holds its budget there (kbus_runtime.lanes).
    feeds: tuple[str, ...] = ()

    def lane_consumer(self, tenant: str, lane: Lane) -> str:
        """The name of the consumer of one tenant's lane (a tenant id is a valid name)."""
        return f"{self.durable}_{lane.value}_{tenant}"


@dataclass(frozen=True)
class Topology(Subjects, Buckets):
    """The bus of one kbus installation: its streams and stages' consumers here, its subjects
    (:class:`Subjects`) and buckets (:class:`Buckets`) from the same prefix and sizes."""

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
    #: Deliveries of a message before it is dead-lettered.
    max_deliver: int = 10

    def records_of(self, stream: str, tenant: str) -> list[str]:
        """What one tenant holds of the receipts or the dead-letter stream, as filter subjects
        (the first holds nearly all of it: its oldest go when the tenant is past its budget)."""
        if stream == self.receipts_stream.name:
            return [self._subject(f"document.*.{tenant}.>"), self.removed(tenant)]
        if stream == self.dead_letter_stream.name:
            return [self._subject(f"deadletter.*.{tenant}.>")]
        raise ValueError(f"{stream} holds no tenant's records")

    # -- durable consumers (shared names: N replicas split the work) ---------------------------

    ingestor_durable = "ingestor"
    deleter_durable = "deleter"
    embedder_durable = "embedder"
    generator_durable = "generator"
    indexer_durable = "indexer"
    syncer_durable = "syncer"
    #: Dead-letters what the server gave up on (the max-deliveries advisories).
    advisory_durable = "deadletterer"

    @property
    def stages(self) -> tuple[StageConsumer, ...]:
        """The pipeline's stages: each one's stream and durable consumer."""
        return (
            # A tenant's large documents take seconds each to cut: it holds half of the
            # default workers at most, so another's document always finds one free.
            StageConsumer(
                "ingestor",
                self.documents_stream.name,
                self.ingestor_durable,
                "document.added",
                feeds=("chunks.ready", "chunks.generate"),
                tenant_in_flight=8,
            ),
            StageConsumer(
                "generator",
                self.chunks_stream.name,
                self.generator_durable,
                "chunks.generate",
                feeds=("chunks.ready",),
            ),
            StageConsumer(
                "embedder",
                self.chunks_stream.name,
                self.embedder_durable,
                "chunks.ready",
                feeds=("embeddings.ready",),
            ),
            StageConsumer(
                "indexer", self.embeddings_stream.name, self.indexer_durable, "embeddings.ready"
            ),
            # A tenant's deletions apply one at a time, in the order they were published.
            StageConsumer(
                "deleter",
                self.documents_stream.name,
                self.deleter_durable,
                "document.deleted",
                tenant_in_flight=1,
            ),
            # A sync may wait minutes for what it lists: two of a tenant's at once at most, so
            # its long syncs never hold another tenant's.
            StageConsumer(
                "syncer",
                self.documents_stream.name,
                self.syncer_durable,
                "document.synced",
                tenant_in_flight=2,
            ),
        )

    @property
    def advisory_consumer(self) -> StageConsumer:
        """The dead-letterer's: the max-deliveries advisories, in order (not a pipeline stage)."""
        return StageConsumer(
            "deadletterer",
            self.advisories_stream.name,
            self.advisory_durable,
            _MAX_DELIVERIES,
            fair=False,
        )

    def stage(self, name: str) -> StageConsumer:
        """One stage's consumer (or the dead-letterer's), by its name."""
        [found] = [s for s in (*self.stages, self.advisory_consumer) if s.stage == name]
        return found

    def stream_of(self, consumer: StageConsumer) -> Stream:
        """The stream a stage's consumer reads."""
        [found] = [s for s in self.streams if s.name == consumer.stream]
        return found

    # -- streams -------------------------------------------------------------------------------

    @cached_property
    def documents_stream(self) -> Stream:
        return self._work_stream(
            "documents", [self.document_added, self.document_deleted, self.document_synced]
        )

    @cached_property
    def chunks_stream(self) -> Stream:
        return self._work_stream("chunks", [self.chunks_generate, self.chunks_ready])

    @cached_property
    def embeddings_stream(self) -> Stream:
        return self._work_stream("embeddings", [self.embeddings_ready])

    @cached_property
    def receipts_stream(self) -> Stream:
        subjects = [
            self.document_indexed,
            self.document_removed,
            self.document_failed,
            self.document_reconciled,
        ]
        return storage.receipts_stream(self._name("receipts"), subjects, **self._sized)

    @cached_property
    def dead_letter_stream(self) -> Stream:
        return storage.dead_letter_stream(
            self._name("deadletter"), [self.dead_letters], **self._sized
        )

    @cached_property
    def bodies_stream(self) -> Stream:
        """The store of large texts, shared by every tenant (kbus_contract.claimcheck)."""
        return storage.bodies_stream(
            self._name("bodies"), [self._subject(f"{ACCEPTED}.document.body.>")], **self._sized
        )

    @property
    def work_streams(self) -> tuple[Stream, ...]:
        return (self.documents_stream, self.chunks_stream, self.embeddings_stream)

    def max_deliveries_advisory(self, stream: str) -> str:
        """The server's advisory when a consumer of ``stream`` reaches its max deliveries."""
        return self.subject(_MAX_DELIVERIES, stream=stream, consumer="*")

    @property
    def max_deliveries_advisories(self) -> str:
        """What the dead-letterer reads from the advisories stream (only this installation's)."""
        return self.every(_MAX_DELIVERIES)

    @cached_property
    def advisories_stream(self) -> Stream:
        subjects = [self.max_deliveries_advisory(s.name) for s in self.work_streams]
        return storage.advisories_stream(self._name("advisories"), subjects, **self._sized)

    @property
    def _sized(self) -> dict[str, int]:
        return {"replicas": self.replicas, "max_bytes": self.stream_max_bytes}

    def _work_stream(self, name: str, subjects: list[str]) -> Stream:
        return storage.work_stream(self._name(name), subjects, **self._sized)

    @property
    def streams(self) -> tuple[Stream, ...]:
        return (
            self.documents_stream,
            self.chunks_stream,
            self.embeddings_stream,
            self.receipts_stream,
            self.dead_letter_stream,
            self.advisories_stream,
            self.bodies_stream,
        )
