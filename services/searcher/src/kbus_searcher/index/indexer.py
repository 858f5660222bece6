"""Indexing: ``embeddings.ready`` into the store, and receipts, a batch at a time.

A batch's way, each step once (:meth:`Indexer._index_group`): the store's newest sequences of
its documents; the rulings before the write (:mod:`kbus_searcher.state.standing`); the losers
undone (:mod:`.undoing`); the tenant's chunk budget; the write; which publishes are whole; the
rulings after the write; the losers undone; the older versions of the winners deleted; the
receipts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence

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
from kbus_searcher.index.undoing import Undoing
from kbus_searcher.state.quotas import Quotas
from kbus_searcher.state.standing import Ruling, Standing
from kbus_searcher.store import ChunkWriter
from kbus_searcher.store.errors import unavailable

log = logging.getLogger("kbus.searcher")


class Indexer:
    """Writes each publish of a document, retires older ones, and says so.

    Order comes from the stream sequence of the original ``document.added`` or
    ``document.deleted``: whatever was published later wins, however the messages interleave
    on the way (:mod:`kbus_searcher.state.standing` rules on each publish).
    """

    def __init__(
        self,
        stage: Stage,
        store: ChunkWriter,
        standing: Standing,
        registry: CollectorRegistry,
        *,
        max_batch: int = 256,
        linger_s: float = 0.0,
        quotas: Quotas | None = None,
        weights: Mapping[str, float] | None = None,
    ) -> None:
        self.stage = stage
        self.store = store
        self.standing = standing
        self.undoing = Undoing(store, standing.versions)
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
            "Publishes that lost, by their ruling (kbus_searcher.state.standing)",
            ["reason"],
            registry=registry,
        )
        for ruling in Ruling:
            if ruling.lost:
                self.skipped.labels(ruling.value)
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
            await self.undoing.undo(taken[0])

    async def given_up(self, subject: str, body: bytes) -> None:
        """The server gave up on a message: one of ``embeddings.ready`` takes out what its
        deliveries may have written."""
        if self.stage.topology.channel_of(subject) != "embeddings.ready":
            return
        try:
            ready = EmbeddingsReady.model_validate_json(body)
        except ValidationError:
            return
        await self.undoing.undo(ready)

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
        """Publishes of one model and tenant: each step once, in order (the module says which).

        Each publish's new version is complete in the store before it is made searchable and
        its old one deleted, so a search sees the old version or the new one, never neither.
        """
        docs = [r.document for r in readies]
        rulings = await self.standing.before_write(docs, await self.store.newest_sequences(readies))
        await self._lost(readies, rulings, written=False)
        outcomes: list[Exception | None] = [_outcome(r) for r in rulings]
        live = await self._admitted(
            readies, [i for i, r in enumerate(rulings) if not r.lost], outcomes
        )
        written = await self._write(readies, live, outcomes)
        if not written:
            return outcomes
        complete = await self._complete([readies[i] for i in written])
        after = await self.standing.after_write([docs[i] for i in written], complete)
        await self._lost([readies[i] for i in written], after, written=True)
        winners = []
        for i, whole, ruling in zip(written, complete, after, strict=True):
            outcomes[i] = _outcome(ruling)
            if whole and not ruling.lost:
                winners.append(readies[i])
        if not winners:
            return outcomes
        removed = await self.store.delete_superseded(winners)
        if removed:
            log.info("replaced %d chunks of older versions of %d documents", removed, len(winners))
        await self._receipts(readies, winners, outcomes)
        return outcomes

    async def _lost(
        self, readies: Sequence[EmbeddingsReady], rulings: Sequence[Ruling], *, written: bool
    ) -> None:
        for ruling in rulings:
            if ruling.lost:
                self.skipped.labels(ruling.value).inc()
        await self.undoing.lost(readies, rulings, written=written)

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

    async def _write(
        self, readies: list[EmbeddingsReady], live: list[int], outcomes: list[Exception | None]
    ) -> list[int]:
        """Write the live publishes in one request; those stored whole."""
        if not live:
            return []
        errors = await self.store.write([readies[i] for i in live])
        written = []
        for i, error in zip(live, errors, strict=True):
            outcomes[i] = error
            if error is None:
                written.append(i)
                self.chunks_indexed.labels(readies[i].document.tenant).inc(len(readies[i].chunks))
        return written

    async def _complete(self, readies: list[EmbeddingsReady]) -> list[bool]:
        """Whether each written publish has every part stored (a part tells its progress)."""

        async def whole(ready: EmbeddingsReady) -> bool:
            # A message with every chunk of its publish completes it (its write had no errors);
            # only a part of a larger document needs to count what is stored.
            if len(ready.chunks) == ready.total_chunks:
                return True
            stored = await self.store.count_stored(ready)
            if stored < ready.total_chunks:
                await receipts.progress(self.stage, ready, stored)
            return stored >= ready.total_chunks

        return list(await asyncio.gather(*(whole(ready) for ready in readies)))

    async def _receipts(
        self,
        readies: list[EmbeddingsReady],
        winners: list[EmbeddingsReady],
        outcomes: list[Exception | None],
    ) -> None:
        sent = await asyncio.gather(*(self._receipt(r) for r in winners), return_exceptions=True)
        for ready, result in zip(winners, sent, strict=True):
            if isinstance(result, Exception):
                outcomes[readies.index(ready)] = result
            elif isinstance(result, BaseException):
                raise result

    async def _receipt(self, ready: EmbeddingsReady) -> None:
        self.documents_indexed.labels(ready.document.tenant).inc()
        await receipts.indexed(self.stage, ready)


def _outcome(ruling: Ruling) -> Exception | None:
    """A publish's outcome by its ruling: one that lost ends as overtaken (settled)."""
    return OvertakenError() if ruling.lost else None
