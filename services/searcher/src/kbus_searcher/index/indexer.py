"""Indexing: ``embeddings.ready`` into the store, deletions out of it, and receipts."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping

from faststream.message.message import AckStatus
from faststream.nats.message import NatsMessage
from kbus_contract import EmbeddingsReady
from kbus_contract.errors import ErrorCode, PermanentError
from kbus_contract.lanes import Lane
from kbus_runtime.batching import Batcher
from kbus_runtime.fair_share import Stride
from kbus_runtime.redelivery import deliveries
from kbus_runtime.stage import Stage
from prometheus_client import CollectorRegistry, Counter, Histogram
from pydantic import ValidationError
from weaviate.exceptions import WeaviateBaseError

from kbus_searcher.index import receipts
from kbus_searcher.index.late_writes import LateWrites, OvertakenError
from kbus_searcher.state.quotas import Quotas
from kbus_searcher.state.syncmarks import SyncMarks
from kbus_searcher.state.tombstones import Tombstones
from kbus_searcher.state.versions import Versions
from kbus_searcher.store import ChunkWriter, DocumentKey, doc_key
from kbus_searcher.store.errors import unavailable

log = logging.getLogger("kbus.searcher")


class Indexer:
    """Writes each publish of a document, retires older ones, applies deletions, and says so.

    Order comes from the stream sequence of the original ``document.added`` or
    ``document.deleted``: whatever was published later wins, however the messages interleave
    on the way.
    """

    def __init__(
        self,
        stage: Stage,
        store: ChunkWriter,
        tombstones: Tombstones,
        versions: Versions,
        registry: CollectorRegistry,
        *,
        max_batch: int = 256,
        linger_s: float = 0.0,
        quotas: Quotas | None = None,
        syncs: SyncMarks | None = None,
        weights: Mapping[str, float] | None = None,
    ) -> None:
        self.stage = stage
        self.store = store
        self.tombstones = tombstones
        self.versions = versions
        self.syncs = syncs
        self.quotas = quotas or Quotas()
        self.chunks_indexed = Counter(
            "kbus_indexer_chunks",
            "Chunks written to the store, by tenant",
            ["tenant"],
            registry=registry,
        )
        self.documents_indexed = Counter(
            "kbus_indexer_documents",
            "Documents made searchable (receipts sent), by tenant",
            ["tenant"],
            registry=registry,
        )
        self.skipped = Counter(
            "kbus_indexer_skipped",
            "Publishes skipped as superseded or deleted",
            ["reason"],
            registry=registry,
        )
        self.batch_sizes = Histogram(
            "kbus_indexer_batch_documents",
            "embeddings.ready messages indexed together in one batch",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
            registry=registry,
        )
        #: Publishes undone once on a redelivery, waiting to be undone again.
        self._late = LateWrites()
        # A batch holds up to ``max_batch`` chunks, the tenants' messages taking turns by their
        # chunks (kbus_runtime.batching).
        self._batches: Batcher[EmbeddingsReady, None] = Batcher(
            self._index_batch,
            max_size=max_batch,
            linger_s=linger_s,
            name="index",
            size=lambda ready: max(1, len(ready.chunks)),
            turns=Stride(weights),
        )

    async def handle(self, message: NatsMessage) -> None:
        """Settle one ``embeddings.ready`` message; one dead-lettered takes out whatever it
        wrote (a part of a publish that can never complete must not be searched)."""
        taken: list[EmbeddingsReady] = []
        again = deliveries(message) > 1

        async def work(ready: EmbeddingsReady) -> None:
            taken.append(ready)
            await self.index(ready, redelivered=again)

        await self.stage.settle(message, EmbeddingsReady, work)
        if taken and message.committed is AckStatus.REJECTED:
            await self.undo(taken[0])

    async def given_up(self, subject: str, body: bytes) -> None:
        """The server gave up on a message: one of ``embeddings.ready`` takes out what its
        deliveries may have written."""
        if self.stage.topology.channel_of(subject) != "embeddings.ready":
            return
        with contextlib.suppress(ValidationError):
            await self.undo(EmbeddingsReady.model_validate_json(body))

    async def undo(self, ready: EmbeddingsReady) -> None:
        """Remove what a publish that will never be the searchable one may have written (by
        this delivery or an earlier one cut short): unless its version is the searchable one,
        whose chunks it shares (same ids)."""
        doc = ready.document
        current = await self.versions.entry(doc.tenant, doc.library, doc.document_id)
        if current is not None and current[1] == doc.version:
            return
        try:
            removed = await self.store.delete_publish(ready)
        except WeaviateBaseError as exc:
            raise unavailable(exc, "undo a publish") from exc
        if removed:
            log.info(
                "removed %d chunks of %s/%s@%s (seq %d): a later publish or a deletion won",
                removed,
                doc.library,
                doc.document_id,
                doc.version,
                doc.sequence,
            )

    async def index(self, ready: EmbeddingsReady, *, redelivered: bool = False) -> None:
        """Index a part of a document, in one batch with what other handlers hand in meanwhile.

        Raises this part's own error (a bad vector, a chunk the store refused, the store or the
        bus unavailable): the other parts of the batch end on their own. A publish undone on a
        ``redelivered`` message (an earlier delivery failed, and what it sent the store may
        still land) is undone again later before it is settled (:mod:`.late_writes`).
        """
        try:
            await self._batches.submit(
                ready, ready.document.tenant, urgent=ready.document.lane is Lane.INTERACTIVE
            )
        except OvertakenError:
            if redelivered:
                self._late.settle(ready)

    async def _index_batch(self, batch: list[EmbeddingsReady]) -> list[Exception | None]:
        self.batch_sizes.observe(len(batch))
        outcomes: list[Exception | None] = [None] * len(batch)
        # One request never mixes vector lengths: on a new collection the first vector fixes the
        # dimension, and a message of another length must not get the others refused with it.
        groups: dict[tuple[str, str, int], list[int]] = {}
        for i, ready in enumerate(batch):
            if any(len(c.vector) != ready.dimension for c in ready.chunks):
                outcomes[i] = PermanentError(
                    "a vector's length differs from the stated dimension", code=ErrorCode.BAD_VECTOR
                )
            else:
                key = (ready.model, ready.document.tenant, ready.dimension)
                groups.setdefault(key, []).append(i)
        # The groups (tenants, models) are written at once: a batch of many tenants' documents
        # takes about as long as one tenant's, not one round of requests per tenant.
        ends = await asyncio.gather(*(self._index_members(batch, m) for m in groups.values()))
        for members, ended in zip(groups.values(), ends, strict=True):
            for i, outcome in zip(members, ended, strict=True):
                outcomes[i] = outcome
        return outcomes

    async def _index_members(
        self, batch: list[EmbeddingsReady], members: list[int]
    ) -> list[Exception | None]:
        group = [batch[i] for i in members]
        try:
            return await self._index_group(group)
        except WeaviateBaseError as exc:
            return [unavailable(exc, "index") for _ in group]

    async def _index_group(self, readies: list[EmbeddingsReady]) -> list[Exception | None]:
        """Publishes of one model and tenant: one query, one write and one delete for all.

        Each publish's new version is complete in the store before the old one is deleted, so
        a search sees the old version or the new one, never neither.
        """
        outcomes: list[Exception | None] = [None] * len(readies)
        live = await self._admitted(
            readies, await self._not_superseded(readies, outcomes), outcomes
        )
        if not live:
            return outcomes
        errors = await self.store.write([readies[i] for i in live])
        written = []
        for i, error in zip(live, errors, strict=True):
            outcomes[i] = error
            if error is None:
                written.append(i)
                self.chunks_indexed.labels(readies[i].document.tenant).inc(len(readies[i].chunks))
        complete = await self._complete(readies, written)
        parts = [i for i in written if i not in complete]
        await self._undo_overtaken_parts(readies, parts, outcomes)
        if not complete:
            return outcomes
        # Searches switch to each new version here, before its old one is deleted.
        complete = await self._advanced(readies, complete, outcomes)
        if not complete:
            return outcomes
        removed = await self.store.delete_superseded([readies[i] for i in complete])
        if removed:
            log.info("replaced %d chunks of older versions of %d documents", removed, len(complete))
        receipts = await self._not_deleted_meanwhile(readies, complete, outcomes)
        sent = await asyncio.gather(
            *(self._receipt(readies[i]) for i in receipts), return_exceptions=True
        )
        for i, result in zip(receipts, sent, strict=True):
            if isinstance(result, Exception):
                outcomes[i] = result
            elif isinstance(result, BaseException):
                raise result
        return outcomes

    async def _not_superseded(
        self, readies: list[EmbeddingsReady], outcomes: list[Exception | None]
    ) -> list[int]:
        """The publishes no deletion and no later publish of the same document overtook; the
        others are undone."""
        newest: dict[DocumentKey, int] = {}
        kept: list[int] = []
        skipped: list[int] = []
        unlisted = await self._unlisted(readies, fresh=False)
        for i, ready in enumerate(readies):
            doc = ready.document
            # The copies in memory may miss a deletion or a sync of the last moment: the check
            # after the write reads the buckets and removes what this one let through.
            barrier = await self.tombstones.barrier(
                doc.tenant, doc.library, doc.document_id, fresh=False
            )
            if barrier > doc.sequence:
                self.skipped.labels("deleted").inc()
                skipped.append(i)
            elif unlisted[i]:
                self.skipped.labels("unlisted").inc()
                skipped.append(i)
            elif not await self.stage.wanted(
                doc.tenant, doc.library, doc.document_id, doc.sequence
            ):
                # Published again since (or deleted a moment ago): none of it is written.
                self.skipped.labels("withdrawn").inc()
                skipped.append(i)
            else:
                kept.append(i)
                key = doc_key(ready)
                newest[key] = max(newest.get(key, 0), doc.sequence)
        if kept:
            stored = await self.store.newest_sequences([readies[i] for i in kept])
            for key, sequence in stored.items():
                newest[key] = max(newest[key], sequence)
        live = [i for i in kept if newest[doc_key(readies[i])] <= readies[i].document.sequence]
        self.skipped.labels("superseded").inc(len(kept) - len(live))
        # A delivery before this one may have written and been cut short (a kill between its
        # write and its own check): what it left goes now, before this one is acked.
        for i in [*skipped, *(i for i in kept if i not in live)]:
            await self.undo(readies[i])
            outcomes[i] = OvertakenError()
        return live

    async def _admitted(
        self, readies: list[EmbeddingsReady], live: list[int], outcomes: list[Exception | None]
    ) -> list[int]:
        """The publishes whose chunks their tenant's limit leaves room for; the others end
        with ``quota_exceeded``."""
        admitted = []
        for i in live:
            doc = readies[i].document
            try:
                await self.quotas.admit_chunks(doc.tenant, len(readies[i].chunks))
            except PermanentError as exc:
                outcomes[i] = exc
            else:
                admitted.append(i)
        return admitted

    async def _complete(self, readies: list[EmbeddingsReady], written: list[int]) -> list[int]:
        """The written publishes whose every part is stored."""

        async def whole(ready: EmbeddingsReady) -> bool:
            # A message with every chunk of its publish completes it (its write had no errors);
            # only a part of a larger document needs to count what is stored.
            if len(ready.chunks) == ready.total_chunks:
                return True
            stored = await self.store.count_stored(ready)
            if stored < ready.total_chunks:
                await receipts.progress(self.stage, ready, stored)
            return stored >= ready.total_chunks

        done = await asyncio.gather(*(whole(readies[i]) for i in written))
        return [i for i, complete in zip(written, done, strict=True) if complete]

    async def _advanced(
        self, readies: list[EmbeddingsReady], complete: list[int], outcomes: list[Exception | None]
    ) -> list[int]:
        """Make each complete publish the searchable one; those a later publish overtook
        meanwhile remove what they wrote.

        Another indexer replica may make a later publish of the same document searchable after
        this one read the store (which then held none of it) and before this one's write. That
        replica deletes what is older only after its own advance; so either this advance comes
        first and that deletion sees this write, or this advance finds the later publish and
        this write is undone here.
        """

        async def advance(ready: EmbeddingsReady) -> bool:
            doc = ready.document
            return await self.versions.advance(
                doc.tenant, doc.library, doc.document_id, doc.sequence, doc.version
            )

        advanced = await asyncio.gather(*(advance(readies[i]) for i in complete))
        for i, current in zip(complete, advanced, strict=True):
            if not current:
                await self.undo(readies[i])
                outcomes[i] = OvertakenError()
                self.skipped.labels("superseded").inc()
        return [i for i, current in zip(complete, advanced, strict=True) if current]

    async def _undo_overtaken_parts(
        self, readies: list[EmbeddingsReady], parts: list[int], outcomes: list[Exception | None]
    ) -> None:
        """Remove the parts, written here, of a publish that cannot complete any more: a later
        one became searchable meanwhile (as :meth:`_advanced` does for whole publishes; the
        other replica's deletion of older chunks follows its advance, so it sees this write
        unless this read sees the advance)."""
        for i in parts:
            doc = readies[i].document
            if await self.versions.later_than(
                doc.tenant, doc.library, doc.document_id, doc.sequence, doc.version
            ):
                await self.undo(readies[i])
                outcomes[i] = OvertakenError()
                self.skipped.labels("superseded").inc()

    async def _not_deleted_meanwhile(
        self, readies: list[EmbeddingsReady], complete: list[int], outcomes: list[Exception | None]
    ) -> list[int]:
        # A deletion records its tombstone before it deletes; checking again after writing means
        # that either the deletion saw these chunks or this check sees the deletion.
        barriers = await self.tombstones.barriers(
            [(d.tenant, d.library, d.document_id) for d in (readies[i].document for i in complete)]
        )
        unlisted = await self._unlisted([readies[i] for i in complete], fresh=True)
        kept = []
        for i, barrier, gone in zip(complete, barriers, unlisted, strict=True):
            if barrier > readies[i].document.sequence:
                await self.store.delete_publish(readies[i])
                outcomes[i] = OvertakenError()
                self.skipped.labels("deleted").inc()
            elif gone:
                await self.store.delete_publish(readies[i])
                outcomes[i] = OvertakenError()
                self.skipped.labels("unlisted").inc()
            else:
                kept.append(i)
        return kept

    async def _unlisted(self, readies: list[EmbeddingsReady], *, fresh: bool) -> list[bool]:
        """Whether a sync of each publish's source, published after it, did not list it (the
        source no longer holds it: :mod:`kbus_searcher.state.syncmarks`)."""
        if self.syncs is None:
            return [False] * len(readies)
        return await self.syncs.unlisted(
            [
                (
                    r.document.tenant,
                    r.document.library,
                    r.document.source,
                    r.document.document_id,
                    r.document.sequence,
                )
                for r in readies
            ],
            fresh=fresh,
        )

    async def _receipt(self, ready: EmbeddingsReady) -> None:
        self.documents_indexed.labels(ready.document.tenant).inc()
        await receipts.indexed(self.stage, ready)
