"""Whether a publish's work is still wanted: a stage skips what was deleted or replaced since.

A document deleted (its tombstone, which the deleter writes before it deletes) or published
again (the gate remembers each document's newest publish: ``kbus_contract.buckets``, the
published bucket) while its work waits or runs costs nothing more at any stage: the ingestor
stops cutting it (and lets its large text go), the generator and the embedder drop its parts
unread, the indexer writes none of them. Each stage asks before it works on a message and, for
a large document, before each of its parts.

It is a saving, not a rule: the indexer alone decides what is searchable (the tombstones and
the versions, :mod:`kbus_searcher.index`), so a mark read a moment late costs work, never a
wrong answer, and a mark that cannot be read is taken as none. Marks are kept a second in
memory (a large document's parts and a tenant's many documents ask about the same tenant and
library), for the last :data:`KEPT` keys asked about.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from enum import StrEnum

from kbus_contract.buckets import covering_keys, scope_key
from kbus_contract.topology import Topology
from nats.aio.client import Client
from nats.errors import Error as NatsError
from nats.js.errors import KeyNotFoundError
from nats.js.kv import KeyValue

from kbus_runtime.declaring import open_bucket

log = logging.getLogger("kbus")

#: Seconds a mark read from a bucket is used before it is read again.
FRESH_S = 1.0
#: Marks kept in memory at most (the least recently asked go first).
KEPT = 10_000


class Withdrawn(StrEnum):
    """Why a publish's work is not wanted any more."""

    #: A deletion of the document, its library or its tenant was published after it.
    DELETED = "deleted"
    #: The same document was published again after it.
    SUPERSEDED = "superseded"


class Withdrawals:
    """Reads the tombstones and the newest publishes of the documents a stage works on."""

    def __init__(self, topology: Topology, clock: Callable[[], float] = time.monotonic) -> None:
        self.topology = topology
        self.clock = clock
        self._buckets: dict[str, KeyValue] = {}
        self._marks: OrderedDict[tuple[str, str], tuple[float, int]] = OrderedDict()

    async def open(self, nc: Client, *, reading: bool = True) -> None:
        """Open both buckets (created where the services declare what they use); the gate,
        which only remembers publishes (``reading`` off), the newest publishes' alone."""
        js = nc.jetstream()
        configs = [self.topology.published_kv]
        if reading:
            configs.insert(0, self.topology.tombstones_kv)
        for config in configs:
            self._buckets[config.bucket] = await open_bucket(
                js, config, create=self.topology.declare
            )

    async def reason(
        self, tenant: str, library: str, document_id: str, sequence: int
    ) -> Withdrawn | None:
        """Why the publish at ``sequence`` of a document is not wanted any more (None: it is,
        or its sequence is unknown)."""
        if sequence <= 0:
            return None
        tombstones = covering_keys(tenant, library, document_id)
        deletions = self.topology.tombstones_bucket
        marks = await asyncio.gather(*(self._mark(deletions, key) for key in tombstones))
        if max(marks) > sequence:
            return Withdrawn.DELETED
        key = scope_key(tenant, library, document_id)
        newest = await self._mark(self.topology.published_bucket, key)
        if newest > sequence:
            return Withdrawn.SUPERSEDED
        return None

    async def _mark(self, bucket: str, key: str) -> int:
        kv = self._buckets.get(bucket)
        if kv is None:
            return 0
        now = self.clock()
        cached = self._marks.get((bucket, key))
        if cached is not None and now - cached[0] < FRESH_S:
            self._marks.move_to_end((bucket, key))
            return cached[1]
        try:
            entry = await kv.get(key)
            value = int(entry.value or b"0")
        except KeyNotFoundError:
            value = 0
        except (NatsError, TimeoutError, ValueError) as exc:
            log.debug("could not read %s in %s (taken as none): %s", key, bucket, exc)
            return 0
        self._marks[(bucket, key)] = (now, value)
        self._marks.move_to_end((bucket, key))
        while len(self._marks) > KEPT:
            self._marks.popitem(last=False)
        return value

    async def published(self, tenant: str, library: str, document_id: str, sequence: int) -> None:
        """Remember that a document was published at ``sequence`` (the gate's, once stored;
        a failure to write it is a saving lost, said in the log)."""
        kv = self._buckets.get(self.topology.published_bucket)
        if kv is None:
            return
        try:
            await kv.put(scope_key(tenant, library, document_id), str(sequence).encode())
        except (NatsError, TimeoutError) as exc:
            log.warning("could not remember the newest publish of %s: %s", document_id, exc)
